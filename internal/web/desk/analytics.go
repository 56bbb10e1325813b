package desk

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/analytics"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/views"
)

// behindLimit is how many interrupts a drill-down lists.
const behindLimit = 200

// analyticsPage: GET /analytics — the figures and charts of a period.
func (d *desk) analyticsPage(c echo.Context) error {
	f, err := request.AnalyticsFilter(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	r, err := d.s.store.Analytics(ctx, f)
	if err != nil {
		return err
	}
	a := views.Analytics{Page: d.pageMeta(ctx, "Analytics", "analytics"), Period: periodText(f), Empty: r.EmptyPeriod()}
	a.Form = d.analyticsForm(f, r)
	base := filterValues(f)
	a.CSVURL = "/api/v1/analytics?" + withParam(base, "format", "csv").Encode()
	a.JSONURL = "/api/v1/analytics?" + base.Encode()
	wide := url.Values{}
	wide.Set("since", f.Now.UTC().AddDate(0, 0, -89).Format(time.DateOnly))
	a.WiderURL = "/analytics?" + wide.Encode()
	kindURL := func(what, kind string, extra url.Values) string {
		v := filterValues(f)
		v.Set("what", what)
		if kind != "" {
			v.Set("kind", kind)
		}
		for k, vs := range extra {
			v[k] = vs
		}
		return "/analytics/tasks?" + v.Encode()
	}
	action := func(a string) url.Values { return url.Values{"action": {a}} }
	for _, k := range r.Kinds {
		a.Kinds = append(a.Kinds, views.AnalyticsKind{Kind: k.Kind,
			Raised:   fig(k.Raised, kindURL("raised", k.Kind, nil)),
			Approved: fig(k.Approved, kindURL("decided", k.Kind, action("approve"))),
			Rejected: fig(k.Rejected, kindURL("decided", k.Kind, action("reject"))),
			Edited:   fig(k.Edited, kindURL("decided", k.Kind, action("edit"))),
			Answered: fig(k.Answered, kindURL("decided", k.Kind, action("respond"))),
			Expired:  fig(k.Expired, kindURL("expired", k.Kind, nil)),
			Pending:  fig(k.Pending, kindURL("pending", k.Kind, nil)),
			Oldest:   seconds(k.OldestPendingSeconds), P50: seconds(k.TimeToDecision.P50),
			P90: seconds(k.TimeToDecision.P90), Max: seconds(k.TimeToDecision.Max),
			RejectionRate: percent(k.RejectionRate), RejectionsBefore: rejectionsText(k.RejectionsBeforeApproval)})
	}
	for _, ds := range r.Deciders {
		who := url.Values{"decider": {ds.Decider}}
		with := func(k, v string) url.Values {
			w := url.Values{"decider": {ds.Decider}}
			w[k] = append(w[k], v)
			return w
		}
		appr := url.Values{"decider": {ds.Decider}, "action": {"approve", "edit"}}
		a.Deciders = append(a.Deciders, views.AnalyticsDecider{Decider: ds.Decider,
			Decisions:  fig(ds.Decisions, kindURL("decided", f.Kind, who)),
			Approvals:  fig(ds.Approvals, kindURL("decided", f.Kind, appr)),
			Rejections: fig(ds.Rejections, kindURL("decided", f.Kind, with("action", "reject"))),
			Fast:       fig(ds.FastDecisions, kindURL("decided", f.Kind, with("fast", "1"))),
			Median:     seconds(ds.MedianSeconds),
			Stamp:      ds.Decisions > 0 && ds.FastDecisions*2 >= ds.Decisions && ds.FastDecisions > 0})
	}
	a.Trend = trendChart(r, func(day, kind string) string {
		v := filterValues(f)
		v.Set("since", day)
		v.Set("until", day)
		v.Set("kind", kind)
		v.Set("what", "decided")
		return "/analytics/tasks?" + v.Encode()
	})
	a.Pending = pendingChart(r, func(kind string) string { return kindURL("pending", kind, nil) })
	a.NoPending = len(a.Pending.Bars) == 0
	a.Load = loadChart(r, func(decider string, fast bool) string {
		w := url.Values{"decider": {decider}}
		if fast {
			w.Set("fast", "1")
		}
		return kindURL("decided", f.Kind, w)
	})
	return response.Page(c, http.StatusOK, views.AnalyticsView(a))
}

// analyticsTasks: GET /analytics/tasks — the interrupts behind a figure.
func (d *desk) analyticsTasks(c echo.Context) error {
	f, err := request.AnalyticsFilter(c)
	if err != nil {
		return err
	}
	q := c.QueryParams()
	b := postgres.Behind{Filter: f, What: q.Get("what"), Decider: q.Get("decider"), Fast: q.Get("fast") == "1",
		Limit: behindLimit + 1}
	for _, act := range q["action"] {
		switch act {
		case "approve", "reject", "edit", "respond":
			b.Actions = append(b.Actions, act)
		default:
			return response.BadRequest("action", "action must be approve, reject, edit or respond")
		}
	}
	switch b.What {
	case "":
		b.What = "raised" // the first figure of the page
	case "raised", "pending", "decided", "expired", "cancelled":
	default:
		return response.BadRequest("what", "what must be raised, pending, decided, expired or cancelled")
	}
	ctx := c.Request().Context()
	rows, err := d.s.store.AnalyticsBehind(ctx, b)
	if err != nil {
		return err
	}
	v := views.AnalyticsTasks{Page: d.pageMeta(ctx, "Analytics", "analytics"), Heading: behindHeading(b),
		Period: periodText(f), Back: "/analytics?" + filterValues(f).Encode(), Limit: behindLimit}
	if b.What == "pending" {
		v.Period = "Waiting now"
	}
	if len(rows) > behindLimit {
		rows, v.More = rows[:behindLimit], true
	}
	for _, r := range rows {
		row := views.AnalyticsTaskRow{TaskID: r.TaskID, TaskTitle: r.Title, Workflow: r.Workflow, Kind: r.Kind,
			Node: r.Node, Status: r.Status, Raised: r.Raised.UTC().Format("2 Jan 2006 15:04:05"), Action: verbOrStatus(r),
			DecidedBy: r.DecidedBy}
		if row.TaskTitle == "" {
			row.TaskTitle = r.TaskID
		}
		end := r.Decided
		if end == nil {
			end = r.Closed
		}
		if end != nil {
			row.Decided = end.UTC().Format("2 Jan 2006 15:04:05")
			row.Waited = seconds(ptr(end.Sub(r.Raised).Seconds()))
		} else if r.Status == "pending" {
			row.Waited = seconds(ptr(f.Now.Sub(r.Raised).Seconds()))
		}
		v.Rows = append(v.Rows, row)
	}
	return response.Page(c, http.StatusOK, views.AnalyticsTasksView(v))
}

func ptr[T any](v T) *T { return &v }

func verbOrStatus(r postgres.BehindRow) string {
	if r.Action != "" {
		return response.Verb(r.Action)
	}
	return r.Status
}

func behindHeading(b postgres.Behind) string {
	var s string
	switch b.What {
	case "raised":
		s = "Interrupts raised"
	case "pending":
		s = "Interrupts waiting"
	case "expired":
		s = "Interrupts expired"
	case "cancelled":
		s = "Interrupts cancelled"
	default:
		s = "Decisions"
		if len(b.Actions) > 0 {
			var vs []string
			for _, a := range b.Actions {
				vs = append(vs, response.Verb(a))
			}
			s = "Decisions: " + strings.Join(vs, " or ")
		}
	}
	if b.Decider != "" {
		s += " by " + b.Decider
	}
	if b.Fast {
		s += ", within 10 s of opening"
	}
	if b.Filter.Kind != "" {
		s += " · " + b.Filter.Kind
	}
	if b.Filter.Workflow != "" {
		s += " · " + b.Filter.Workflow
	}
	return s
}

// analyticsForm is the filter form of f, with the kinds and workflows to
// choose from.
func (d *desk) analyticsForm(f analytics.Filter, r *analytics.Report) views.AnalyticsForm {
	form := views.AnalyticsForm{Since: f.Since.Format(time.DateOnly), Until: f.Until.AddDate(0, 0, -1).Format(time.DateOnly),
		Kind: f.Kind, Workflow: f.Workflow}
	// The kinds the workflows declare, offered before any is seen, and
	// those seen.
	var kinds []string
	for _, k := range r.Kinds {
		kinds = append(kinds, k.Kind)
	}
	for _, w := range d.s.engine.Workflows() {
		desc := w.Describe()
		form.Workflows = append(form.Workflows, desc.Name)
		kinds = append(kinds, desc.Kinds...)
	}
	slices.Sort(kinds)
	form.Kinds = slices.Compact(kinds)
	if f.Workflow != "" && !slices.Contains(form.Workflows, f.Workflow) {
		form.Workflows = append(form.Workflows, f.Workflow)
	}
	slices.Sort(form.Workflows)
	today := analytics.Day(f.Now)
	for _, days := range []int{7, 30, 90} {
		v := url.Values{}
		since := today.AddDate(0, 0, 1-days)
		v.Set("since", since.Format(time.DateOnly))
		if f.Kind != "" {
			v.Set("kind", f.Kind)
		}
		if f.Workflow != "" {
			v.Set("workflow", f.Workflow)
		}
		form.Presets = append(form.Presets, views.Link{Label: "Last " + strconv.Itoa(days) + " days",
			URL: "/analytics?" + v.Encode(), Active: f.Since.Equal(since) && f.Until.Equal(today.AddDate(0, 0, 1))})
	}
	return form
}

// filterValues are the query parameters that ask for f again.
func filterValues(f analytics.Filter) url.Values {
	v := url.Values{}
	v.Set("since", f.Since.Format(time.DateOnly))
	v.Set("until", f.Until.AddDate(0, 0, -1).Format(time.DateOnly))
	if f.Kind != "" {
		v.Set("kind", f.Kind)
	}
	if f.Workflow != "" {
		v.Set("workflow", f.Workflow)
	}
	return v
}

func withParam(v url.Values, k, val string) url.Values {
	w := url.Values{}
	for key, vs := range v {
		w[key] = vs
	}
	w.Set(k, val)
	return w
}

// periodText is the period in words: "5 Jan – 8 Jan 2026".
func periodText(f analytics.Filter) string {
	last := f.Until.AddDate(0, 0, -1)
	if f.Since.Equal(last) {
		return last.Format("2 Jan 2006")
	}
	if f.Since.Year() == last.Year() {
		return f.Since.Format("2 Jan") + " – " + last.Format("2 Jan 2006")
	}
	return f.Since.Format("2 Jan 2006") + " – " + last.Format("2 Jan 2006")
}

func fig(n int, u string) views.Figure {
	if n == 0 {
		return views.Figure{Text: "0"}
	}
	return views.Figure{Text: strconv.Itoa(n), URL: u}
}

// seconds writes a duration for people: "45 s", "2 min", "3.6 h", "2.5 d".
func seconds(v *float64) string {
	if v == nil {
		return "–"
	}
	s := *v
	short := func(x float64, unit string) string {
		return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64) + " " + unit
	}
	switch {
	case s < 1:
		return strconv.FormatFloat(math.Round(s*1000), 'f', -1, 64) + " ms"
	case s < 60:
		return short(s, "s")
	case s < 3600:
		return short(s/60, "min")
	case s < 2*86400:
		return short(s/3600, "h")
	default:
		return short(s/86400, "d")
	}
}

func percent(v *float64) string {
	if v == nil {
		return "–"
	}
	return strconv.FormatFloat(math.Round(*v*1000)/10, 'f', -1, 64) + " %"
}

func rejectionsText(r analytics.RejectionCount) string {
	if len(r) == 0 {
		return "–"
	}
	var parts []string
	for i, n := range r {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("after %d: %d", i, n))
		}
	}
	return strings.Join(parts, " · ")
}

// Chart geometry (SVG user units).
const (
	chartW      = 720
	trendH      = 260
	trendLeft   = 64
	trendTop    = 14
	trendPlotW  = chartW - trendLeft - 16
	trendPlotH  = trendH - trendTop - 34
	barChartW   = 480
	barRow      = 28
	barH        = 18
	barLabelW   = 110
	barW        = barChartW - barLabelW - 40
	maxLoadBars = 15
)

// seriesClasses colour the kinds, in order of their names.
var seriesClasses = []string{"c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"}

// timeTicks are the values a log axis of durations may label.
var timeTicks = []float64{0.001, 0.01, 0.1, 1, 10, 60, 600, 3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400, 365 * 86400}

func fmtf(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// trendChart draws the median time to decision per day and kind on a log
// scale, a point per day with decisions, each linking to them.
func trendChart(r *analytics.Report, dayURL func(day, kind string) string) views.LineChart {
	c := views.LineChart{Width: chartW, Height: trendH, PlotX: trendLeft, PlotY: trendTop, PlotW: trendPlotW, PlotH: trendPlotH,
		Title: "Time to decision over time", Desc: "Median time from raise to decision per day, one line per kind."}
	days := r.Filter.Days()
	if days <= 0 {
		days = 1
	}
	lo, hi := math.Inf(1), 0.0
	for _, d := range r.Days {
		if d.P50Seconds != nil {
			v := max(*d.P50Seconds, timeTicks[0])
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if hi == 0 {
		c.Empty = true
		lo, hi = 1, 3600
	}
	tlo, thi := timeTicks[0], timeTicks[len(timeTicks)-1]
	for _, t := range timeTicks {
		if t <= lo {
			tlo = t
		}
	}
	for i := len(timeTicks) - 1; i >= 0; i-- {
		if timeTicks[i] >= hi && timeTicks[i] > tlo {
			thi = timeTicks[i]
		}
	}
	y := func(v float64) float64 {
		v = max(v, tlo)
		return float64(trendTop+trendPlotH) - (math.Log(v)-math.Log(tlo))/(math.Log(thi)-math.Log(tlo))*float64(trendPlotH)
	}
	for _, t := range timeTicks {
		if t >= tlo && t <= thi {
			c.YTicks = append(c.YTicks, views.Tick{Pos: fmtf(y(t)), Label: seconds(&t)})
		}
	}
	x := func(day time.Time) float64 {
		i := day.Sub(r.Filter.Since).Hours() / 24
		return float64(trendLeft) + (i+0.5)*float64(trendPlotW)/float64(days)
	}
	step := max(1, (days+7)/8)
	for i := 0; i < days; i += step {
		day := r.Filter.Since.AddDate(0, 0, i)
		c.XTicks = append(c.XTicks, views.Tick{Pos: fmtf(x(day)), Label: day.Format("2 Jan")})
	}
	var kinds []string
	for _, d := range r.Days {
		if d.P50Seconds != nil && !slices.Contains(kinds, d.Kind) {
			kinds = append(kinds, d.Kind)
		}
	}
	slices.Sort(kinds)
	for i, k := range kinds {
		s := views.LineSeries{Name: k, Class: seriesClasses[i%len(seriesClasses)]}
		var pts []string
		for _, d := range r.Days {
			if d.Kind != k || d.P50Seconds == nil {
				continue
			}
			day, err := time.Parse(time.DateOnly, d.Day)
			if err != nil {
				continue
			}
			px, py := fmtf(x(day)), fmtf(y(*d.P50Seconds))
			pts = append(pts, px+","+py)
			s.Dots = append(s.Dots, views.Dot{X: px, Y: py, URL: dayURL(d.Day, k),
				Label: fmt.Sprintf("%s, %s: median %s over %d decisions", k, day.Format("2 Jan"), seconds(d.P50Seconds), d.Decided)})
		}
		s.Points = strings.Join(pts, " ")
		c.Series = append(c.Series, s)
	}
	return c
}

// pendingChart draws the backlog now per kind, stacked by age band.
func pendingChart(r *analytics.Report, kindURL func(kind string) string) views.BarChart {
	c := views.BarChart{Width: barChartW, LabelW: barLabelW, Title: "Pending load by kind",
		Desc: "Interrupts waiting now per kind, by how long they have waited."}
	top := 0
	for _, p := range r.Pending {
		top = max(top, p.Total())
	}
	for i, band := range analytics.PendingBands {
		c.Legend = append(c.Legend, views.LegendItem{Label: band, Class: "band" + strconv.Itoa(i)})
	}
	for _, p := range r.Pending {
		if p.Total() == 0 {
			continue
		}
		b := bar(len(c.Bars), p.Kind, kindURL(p.Kind))
		xpos := float64(barLabelW)
		for band, n := range p.Bands {
			if n == 0 {
				continue
			}
			w := float64(n) / float64(top) * barW
			b.Segments = append(b.Segments, views.Segment{X: fmtf(xpos), W: fmtf(w), Class: "band" + strconv.Itoa(band),
				URL: kindURL(p.Kind), Label: fmt.Sprintf("%s: %d waiting %s", p.Kind, n, analytics.PendingBands[band])})
			xpos += w
		}
		b.Total, b.TotalX = strconv.Itoa(p.Total()), fmtf(xpos+6)
		c.Bars = append(c.Bars, b)
	}
	c.Height = max(len(c.Bars), 1)*barRow + 8
	return c
}

// loadChart draws the decisions per decider, the fast ones apart.
func loadChart(r *analytics.Report, deciderURL func(decider string, fast bool) string) views.BarChart {
	c := views.BarChart{Width: barChartW, LabelW: barLabelW, Title: "Decider load",
		Desc:   "Decisions per person in the period; the darker part was decided within 10 s of opening the interrupt.",
		Legend: []views.LegendItem{{Label: "decisions", Class: "load"}, {Label: "within 10 s of opening", Class: "fast"}}}
	ds := slices.Clone(r.Deciders)
	slices.SortFunc(ds, func(a, b analytics.DeciderStats) int {
		return cmp.Or(cmp.Compare(b.Decisions, a.Decisions), cmp.Compare(a.Decider, b.Decider))
	})
	if len(ds) > maxLoadBars {
		ds = ds[:maxLoadBars]
	}
	top := 0
	for _, d := range ds {
		top = max(top, d.Decisions)
	}
	for _, d := range ds {
		if d.Decisions == 0 {
			continue
		}
		b := bar(len(c.Bars), d.Decider, deciderURL(d.Decider, false))
		xpos := float64(barLabelW)
		if d.FastDecisions > 0 {
			w := float64(d.FastDecisions) / float64(top) * barW
			b.Segments = append(b.Segments, views.Segment{X: fmtf(xpos), W: fmtf(w), Class: "fast", URL: deciderURL(d.Decider, true),
				Label: fmt.Sprintf("%s: %d decisions within 10 s of opening", d.Decider, d.FastDecisions)})
			xpos += w
		}
		if rest := d.Decisions - d.FastDecisions; rest > 0 {
			w := float64(rest) / float64(top) * barW
			b.Segments = append(b.Segments, views.Segment{X: fmtf(xpos), W: fmtf(w), Class: "load", URL: deciderURL(d.Decider, false),
				Label: fmt.Sprintf("%s: %d decisions", d.Decider, d.Decisions)})
			xpos += w
		}
		b.Total, b.TotalX = strconv.Itoa(d.Decisions), fmtf(xpos+6)
		c.Bars = append(c.Bars, b)
	}
	c.Height = max(len(c.Bars), 1)*barRow + 8
	return c
}

func bar(i int, label, u string) views.Bar {
	top := float64(4 + i*barRow)
	return views.Bar{Label: label, URL: u, Y: fmtf(top), TextY: fmtf(top + barH/2)}
}
