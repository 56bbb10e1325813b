// Package analytics holds the vocabulary of approval analytics (SPEC §13):
// the period and filters of a report, the report itself as the API shows it
// (JSON and CSV), and the arithmetic that turns the database's daily
// rollups into figures (percentiles from histograms of duration codes).
// It imports nothing of the project, so the store, the API and the pages
// share it.
//
// Durations are kept in the rollups as codes of two significant digits of
// their milliseconds (Code, the SQL function gatehouse_duration_code), and
// a decider's as codes of one (Code1). A percentile is the nearest-rank
// one: the smallest kept value with at least p of the values at or below
// it, reported as the lower bound of its code. So 127 s counts as 120 s in
// a percentile; the maximum is kept exactly.
package analytics

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// DefaultDays is the period of a report when none is asked for.
const DefaultDays = 30

// MaxDays bounds a report's period.
const MaxDays = 400

// FastWithin is the rubber-stamp threshold: a decision made at most this
// long after its decider first opened the interrupt.
const FastWithin = 10 * time.Second

// Filter selects what a report covers: whole UTC days from Since
// (inclusive) to Until (exclusive), optionally one kind and one workflow.
type Filter struct {
	Since, Until time.Time
	Kind         string
	Workflow     string
	// Now is the instant of the report: the pending interrupts' ages are
	// taken at it.
	Now time.Time
}

// FieldError is bad input, naming the field.
type FieldError struct {
	Field, Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// ParseFilter reads since and until (RFC 3339 or YYYY-MM-DD; "" for the
// default: the last DefaultDays days, today included), kind and workflow.
// The period is widened to whole UTC days: since to the start of its day;
// an RFC 3339 until to the end of the day it falls in (unless it is a
// midnight), a YYYY-MM-DD until to the end of that day (inclusive, as a
// person reading "until 30 November" means).
func ParseFilter(since, until, kind, workflow string, now time.Time) (Filter, error) {
	f := Filter{Kind: kind, Workflow: workflow, Now: now}
	today := Day(now)
	var err error
	switch {
	case until == "":
		f.Until = today.AddDate(0, 0, 1)
	default:
		if f.Until, err = parseEnd(until); err != nil {
			return Filter{}, &FieldError{Field: "until", Message: err.Error()}
		}
	}
	switch {
	case since == "":
		f.Since = f.Until.AddDate(0, 0, -DefaultDays)
	default:
		t, err := parseInstant(since)
		if err != nil {
			return Filter{}, &FieldError{Field: "since", Message: err.Error()}
		}
		f.Since = Day(t)
	}
	if !f.Since.Before(f.Until) {
		return Filter{}, &FieldError{Field: "since", Message: "must be before until"}
	}
	if f.Until.Sub(f.Since) > MaxDays*24*time.Hour {
		return Filter{}, &FieldError{Field: "since", Message: fmt.Sprintf("the period may span at most %d days", MaxDays)}
	}
	if len(kind) > 100 {
		return Filter{}, &FieldError{Field: "kind", Message: "is too long"}
	}
	if len(workflow) > 100 {
		return Filter{}, &FieldError{Field: "workflow", Message: "is too long"}
	}
	return f, nil
}

var errTime = errors.New("must be an RFC 3339 time or a date YYYY-MM-DD")

func parseInstant(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, errTime
}

// parseEnd is the exclusive end of the period an until names.
func parseEnd(s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t.AddDate(0, 0, 1), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errTime
	}
	d := Day(t)
	if d.Equal(t) {
		return d, nil
	}
	return d.AddDate(0, 0, 1), nil
}

// Day is the start of t's UTC day.
func Day(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// Days is the number of days of the filter's period.
func (f Filter) Days() int { return int(f.Until.Sub(f.Since) / (24 * time.Hour)) }

// Code is the two-significant-digit code of a duration, as the SQL function
// gatehouse_duration_code computes it: milliseconds 0–99 exactly, then 90
// codes per decade.
func Code(seconds float64) int {
	ms := int64(math.Floor(seconds * 1000))
	if ms < 100 {
		return int(max(ms, 0))
	}
	e, p := 1, int64(10)
	for ms/p >= 100 {
		e++
		p *= 10
	}
	return 100 + (e-1)*90 + int(ms/p-10)
}

// CodeSeconds is the lower bound of a Code, in seconds.
func CodeSeconds(code int) float64 {
	if code < 100 {
		return float64(code) / 1000
	}
	e, m := (code-100)/90+1, (code-100)%90+10
	return float64(m) * math.Pow10(e) / 1000
}

// Code1 is the one-significant-digit code (gatehouse_duration_code1):
// milliseconds 0–9 exactly, then 9 codes per decade.
func Code1(seconds float64) int {
	ms := int64(math.Floor(seconds * 1000))
	if ms < 10 {
		return int(max(ms, 0))
	}
	e, p := 1, int64(10)
	for ms/p >= 10 {
		e++
		p *= 10
	}
	return 10 + (e-1)*9 + int(ms/p-1)
}

// Code1Seconds is the lower bound of a Code1, in seconds.
func Code1Seconds(code int) float64 {
	if code < 10 {
		return float64(code) / 1000
	}
	e, m := (code-10)/9+1, (code-10)%9+1
	return float64(m) * math.Pow10(e) / 1000
}

// Bin is one bar of a histogram of codes.
type Bin struct {
	Code int
	N    int
}

// Percentile is the nearest-rank pct-th percentile (1–100) of a histogram
// whose bins are in ascending code order: the code of the ceil(pct·N/100)-th
// value (integer arithmetic: 0.9·10 must be 9, not 9.000000000000002). ok
// is false for an empty histogram.
func Percentile(bins []Bin, pct int) (code int, ok bool) {
	total := 0
	for _, b := range bins {
		total += b.N
	}
	if total == 0 {
		return 0, false
	}
	rank := max((pct*total+99)/100, 1)
	seen := 0
	for _, b := range bins {
		seen += b.N
		if seen >= rank {
			return b.Code, true
		}
	}
	return bins[len(bins)-1].Code, true
}

// PercentileHist is Percentile of a dense histogram: h[code] values have
// that code.
func PercentileHist(h []int, pct int) (code int, ok bool) {
	var bins []Bin
	for c, n := range h {
		if n > 0 {
			bins = append(bins, Bin{Code: c, N: n})
		}
	}
	return Percentile(bins, pct)
}
