package analytics

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"time"
)

// Report is the analytics of a period, shaped as GET /api/v1/analytics
// returns it.
type Report struct {
	Since    time.Time      `json:"since"`
	Until    time.Time      `json:"until"`
	Kinds    []KindStats    `json:"kinds"`
	Deciders []DeciderStats `json:"deciders"`
	Days     []DayStats     `json:"days"`

	// Pending is the backlog now by kind and age (the pending-load chart);
	// not part of the JSON.
	Pending []PendingLoad `json:"-"`
	// Filter is what the report covers.
	Filter Filter `json:"-"`
}

// KindStats are the figures of one interrupt kind.
type KindStats struct {
	Kind     string `json:"kind"`
	Raised   int    `json:"raised"`
	Approved int    `json:"approved"`
	Rejected int    `json:"rejected"`
	Edited   int    `json:"edited"`
	Answered int    `json:"answered"`
	Expired  int    `json:"expired"`
	// AutoApproved and AutoRejected are the decisions a rule of the
	// policy took (SPEC §18), counted apart (they are among Approved and
	// Rejected too).
	AutoApproved int `json:"auto_approved"`
	AutoRejected int `json:"auto_rejected"`
	// Pending and OldestPendingSeconds are the backlog now, whatever the
	// period.
	Pending                  int            `json:"pending"`
	OldestPendingSeconds     *float64       `json:"oldest_pending_seconds"`
	TimeToDecision           Percentiles    `json:"time_to_decision_seconds"`
	RejectionsBeforeApproval RejectionCount `json:"rejections_before_approval"`
	// RejectionRate is rejected / (approved + rejected + edited); null
	// without any of those.
	RejectionRate *float64 `json:"rejection_rate"`
}

// Decided is the number of decisions of the kind in the period.
func (k KindStats) Decided() int { return k.Approved + k.Rejected + k.Edited + k.Answered }

// Percentiles of a time to decision, in seconds; null without decisions.
type Percentiles struct {
	P50 *float64 `json:"p50"`
	P90 *float64 `json:"p90"`
	Max *float64 `json:"max"`
}

// RejectionCount is a histogram: approvals by the number of rejections of
// the same gate before them. It marshals as {"0":n,"1":n,…} with every
// count from 0 to the largest seen, in numeric order.
type RejectionCount []int

// MarshalJSON writes the histogram as an object in numeric key order.
func (r RejectionCount) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, n := range r {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + strconv.Itoa(i) + `":` + strconv.Itoa(n))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// DeciderStats are the figures of one person (or token) who decided.
type DeciderStats struct {
	Decider   string `json:"decider"`
	Decisions int    `json:"decisions"`
	// Approvals counts approve and edit (an approval of a changed artifact).
	Approvals  int `json:"approvals"`
	Rejections int `json:"rejections"`
	// MedianSeconds is the median time from raise to decision, to one
	// significant digit (rounded down).
	MedianSeconds *float64 `json:"median_seconds"`
	// FastDecisions were made at most FastWithin after the decider first
	// opened the interrupt: the rubber-stamp flag.
	FastDecisions int `json:"fast_decisions"`
}

// DayStats is one day of one kind: the series of the charts.
type DayStats struct {
	Day        string   `json:"day"`
	Kind       string   `json:"kind"`
	Raised     int      `json:"raised"`
	Decided    int      `json:"decided"`
	P50Seconds *float64 `json:"p50_seconds"`
}

// Age bands of the pending load.
var PendingBands = []string{"under 1 h", "1 h – 1 d", "1 – 7 d", "over 7 d"}

// PendingLoad is the backlog of one kind now, by age band.
type PendingLoad struct {
	Kind  string
	Bands [4]int
}

// Total is the kind's pending interrupts.
func (p PendingLoad) Total() int { return p.Bands[0] + p.Bands[1] + p.Bands[2] + p.Bands[3] }

// Input is what the store reads for a report: rollup rows, filtered.
type Input struct {
	Filter     Filter
	Interrupts []InterruptDay
	Decisions  []DecisionDay
	Approvals  []ApprovalCount
	Deciders   []DeciderDay
	Pending    []PendingGroup
	Ruled      []RuledCount
}

// RuledCount: the decisions rules of the policy took on a kind's
// interrupts in the period.
type RuledCount struct {
	Kind               string
	Approved, Rejected int
}

// InterruptDay: the interrupts of a kind raised on Day and no longer
// pending (Closed), and those that expired or were cancelled on Day.
type InterruptDay struct {
	Day                       time.Time
	Kind                      string
	Closed, Expired, Canceled int
}

// DecisionDay: the decisions of a kind made on Day (of one workflow),
// with Hist[code] decisions per time-to-decision Code.
type DecisionDay struct {
	Day                                  time.Time
	Kind                                 string
	Approved, Rejected, Edited, Answered int
	MaxSeconds                           float64
	Hist                                 []int32
}

// ApprovalCount: approvals of a kind after Rejections rejections.
type ApprovalCount struct {
	Kind          string
	Rejections, N int
}

// DeciderDay: a decider's decisions of a day, kind and workflow, with
// Hist[code] decisions per time-to-decision Code1.
type DeciderDay struct {
	Decider                                string
	Decisions, Approvals, Rejections, Fast int
	Hist                                   []int32
}

// PendingGroup: interrupts of a kind pending now, raised on Day, in an age
// Band (0–3, PendingBands).
type PendingGroup struct {
	Kind          string
	Day           time.Time
	Band, N       int
	OldestSeconds float64
}

// Build computes the report.
func Build(in Input) *Report {
	f := in.Filter
	r := &Report{Since: f.Since, Until: f.Until, Filter: f, Kinds: []KindStats{}, Deciders: []DeciderStats{}, Days: []DayStats{}}
	kinds := map[string]*KindStats{}
	kind := func(k string) *KindStats {
		if ks, ok := kinds[k]; ok {
			return ks
		}
		ks := &KindStats{Kind: k, RejectionsBeforeApproval: RejectionCount{}}
		kinds[k] = ks
		return ks
	}
	if f.Kind != "" {
		kind(f.Kind)
	}
	type dayKind struct {
		day  time.Time
		kind string
	}
	days := map[dayKind]*DayStats{}
	dayOf := func(d time.Time, k string) *DayStats {
		key := dayKind{Day(d), k}
		if ds, ok := days[key]; ok {
			return ds
		}
		ds := &DayStats{Day: key.day.Format(time.DateOnly), Kind: k}
		days[key] = ds
		return ds
	}
	inPeriod := func(d time.Time) bool { return !d.Before(f.Since) && d.Before(f.Until) }

	for _, it := range in.Interrupts {
		ks := kind(it.Kind)
		ks.Raised += it.Closed
		ks.Expired += it.Expired
		if it.Closed > 0 {
			dayOf(it.Day, it.Kind).Raised += it.Closed
		}
	}
	pending := map[string]*PendingLoad{}
	for _, p := range in.Pending {
		ks := kind(p.Kind)
		ks.Pending += p.N
		if ks.OldestPendingSeconds == nil || p.OldestSeconds > *ks.OldestPendingSeconds {
			ks.OldestPendingSeconds = ptr(p.OldestSeconds)
		}
		if inPeriod(p.Day) {
			ks.Raised += p.N
			dayOf(p.Day, p.Kind).Raised += p.N
		}
		pl, ok := pending[p.Kind]
		if !ok {
			pl = &PendingLoad{Kind: p.Kind}
			pending[p.Kind] = pl
		}
		if p.Band >= 0 && p.Band < len(pl.Bands) {
			pl.Bands[p.Band] += p.N
		}
	}

	for _, rc := range in.Ruled {
		ks := kind(rc.Kind)
		ks.AutoApproved += rc.Approved
		ks.AutoRejected += rc.Rejected
	}
	kindHist := map[string][]int{}
	dayHist := map[dayKind][]int{}
	for _, d := range in.Decisions {
		ks := kind(d.Kind)
		ks.Approved += d.Approved
		ks.Rejected += d.Rejected
		ks.Edited += d.Edited
		ks.Answered += d.Answered
		n := d.Approved + d.Rejected + d.Edited + d.Answered
		if n == 0 {
			continue
		}
		if ks.TimeToDecision.Max == nil || d.MaxSeconds > *ks.TimeToDecision.Max {
			ks.TimeToDecision.Max = ptr(d.MaxSeconds)
		}
		kindHist[d.Kind] = addHist(kindHist[d.Kind], d.Hist)
		key := dayKind{Day(d.Day), d.Kind}
		dayHist[key] = addHist(dayHist[key], d.Hist)
		dayOf(d.Day, d.Kind).Decided += n
	}
	for k, h := range kindHist {
		ks := kinds[k]
		if c, ok := PercentileHist(h, 50); ok {
			ks.TimeToDecision.P50 = ptr(CodeSeconds(c))
		}
		if c, ok := PercentileHist(h, 90); ok {
			ks.TimeToDecision.P90 = ptr(CodeSeconds(c))
		}
	}
	for key, h := range dayHist {
		if c, ok := PercentileHist(h, 50); ok {
			days[key].P50Seconds = ptr(CodeSeconds(c))
		}
	}
	for _, a := range in.Approvals {
		ks := kind(a.Kind)
		for len(ks.RejectionsBeforeApproval) <= a.Rejections {
			ks.RejectionsBeforeApproval = append(ks.RejectionsBeforeApproval, 0)
		}
		ks.RejectionsBeforeApproval[a.Rejections] += a.N
	}

	deciders := map[string]*DeciderStats{}
	deciderHist := map[string][]int{}
	for _, d := range in.Deciders {
		ds, ok := deciders[d.Decider]
		if !ok {
			ds = &DeciderStats{Decider: d.Decider}
			deciders[d.Decider] = ds
		}
		ds.Decisions += d.Decisions
		ds.Approvals += d.Approvals
		ds.Rejections += d.Rejections
		ds.FastDecisions += d.Fast
		deciderHist[d.Decider] = addHist(deciderHist[d.Decider], d.Hist)
	}
	for name, ds := range deciders {
		if c, ok := PercentileHist(deciderHist[name], 50); ok {
			ds.MedianSeconds = ptr(Code1Seconds(c))
		}
		r.Deciders = append(r.Deciders, *ds)
	}
	slices.SortFunc(r.Deciders, func(a, b DeciderStats) int {
		return cmp.Or(cmp.Compare(b.Decisions, a.Decisions), cmp.Compare(a.Decider, b.Decider))
	})

	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		ks := kinds[k]
		if den := ks.Approved + ks.Rejected + ks.Edited; den > 0 {
			ks.RejectionRate = ptr(float64(ks.Rejected) / float64(den))
		}
		r.Kinds = append(r.Kinds, *ks)
	}
	for _, ds := range days {
		r.Days = append(r.Days, *ds)
	}
	slices.SortFunc(r.Days, func(a, b DayStats) int { return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Kind, b.Kind)) })
	for _, k := range slices.Sorted(maps.Keys(pending)) {
		r.Pending = append(r.Pending, *pending[k])
	}
	return r
}

// EmptyPeriod reports a period in which nothing was raised, decided or
// expired (interrupts may still be pending now).
func (r *Report) EmptyPeriod() bool {
	for _, k := range r.Kinds {
		if k.Raised > 0 || k.Decided() > 0 || k.Expired > 0 {
			return false
		}
	}
	return len(r.Deciders) == 0
}

// addHist adds histogram h (h[code] values per code) into sum.
func addHist(sum []int, h []int32) []int {
	if len(sum) < len(h) {
		sum = append(sum, make([]int, len(h)-len(sum))...)
	}
	for i, n := range h {
		sum[i] += int(n)
	}
	return sum
}

func ptr[T any](v T) *T { return &v }

// CSVHeader is the header row of CSV: the fields of a kind.
var CSVHeader = []string{"kind", "raised", "approved", "rejected", "edited", "answered", "expired", "pending",
	"oldest_pending_seconds", "time_to_decision_p50", "time_to_decision_p90", "time_to_decision_max",
	"rejections_before_approval", "rejection_rate", "auto_approved", "auto_rejected"}

// CSV writes one row per kind, the kind's JSON fields as columns (numbers
// as JSON writes them, null as an empty cell, the rejection histogram as
// its JSON object).
func (r *Report) CSV() ([]byte, error) {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.Write(CSVHeader); err != nil {
		return nil, err
	}
	for _, k := range r.Kinds {
		hist, _ := k.RejectionsBeforeApproval.MarshalJSON()
		row := []string{k.Kind, itoa(k.Raised), itoa(k.Approved), itoa(k.Rejected), itoa(k.Edited), itoa(k.Answered),
			itoa(k.Expired), itoa(k.Pending), num(k.OldestPendingSeconds), num(k.TimeToDecision.P50),
			num(k.TimeToDecision.P90), num(k.TimeToDecision.Max), string(hist), num(k.RejectionRate),
			itoa(k.AutoApproved), itoa(k.AutoRejected)}
		if err := w.Write(row); err != nil {
			return nil, err
		}
	}
	w.Flush()
	return b.Bytes(), w.Error()
}

func itoa(n int) string { return strconv.Itoa(n) }

// num writes a float as encoding/json does, so CSV and JSON agree.
func num(v *float64) string {
	if v == nil {
		return ""
	}
	b, _ := json.Marshal(*v)
	return string(b)
}
