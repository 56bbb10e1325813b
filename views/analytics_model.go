package views

// Analytics is the /analytics page: the filter form, the figures per kind
// and per decider, and three charts drawn on the server.
type Analytics struct {
	Page
	Form AnalyticsForm
	// Period is the period in words ("5 Jan – 8 Jan 2026").
	Period string
	// Empty: nothing raised, decided or expired in the period.
	Empty     bool
	WiderURL  string // the last 90 days, for the empty state
	CSVURL    string
	JSONURL   string
	Kinds     []AnalyticsKind
	Deciders  []AnalyticsDecider
	Trend     LineChart
	Pending   BarChart
	Load      BarChart
	NoPending bool
}

// AnalyticsForm is the filter form, as submitted.
type AnalyticsForm struct {
	Since, Until     string // YYYY-MM-DD
	Kind, Workflow   string
	Kinds, Workflows []string
	Presets          []Link
}

// Link is a labelled URL.
type Link struct {
	Label, URL string
	Active     bool
}

// Figure is a number shown with the link to what it counts ("" URL: none).
type Figure struct {
	Text, URL string
}

// AnalyticsKind is a row of the kinds table.
type AnalyticsKind struct {
	Kind                                                   string
	Raised, Approved, Rejected, Edited, Answered, Expired  Figure
	Pending                                                Figure
	Oldest, P50, P90, Max, RejectionRate, RejectionsBefore string
}

// AnalyticsDecider is a row of the deciders table.
type AnalyticsDecider struct {
	Decider                                string
	Decisions, Approvals, Rejections, Fast Figure
	Median                                 string
	// Stamp flags a decider whose fast decisions are at least half of
	// theirs.
	Stamp bool
}

// LineChart is an SVG line chart: one series per kind over the days.
type LineChart struct {
	Width, Height int
	// Title and Desc label the chart for assistive technology.
	Title, Desc string
	Series      []LineSeries
	XTicks      []Tick
	YTicks      []Tick
	Empty       bool
	// Plot is the drawing area.
	PlotX, PlotY, PlotW, PlotH int
}

// LineSeries is one kind's line and points.
type LineSeries struct {
	Name   string
	Class  string // the colour class
	Points string // the polyline's points
	Dots   []Dot
}

// Dot is a point with its tooltip and link.
type Dot struct {
	X, Y  string
	Label string
	URL   string
}

// Tick is an axis label at a position.
type Tick struct {
	Pos   string
	Label string
}

// BarChart is an SVG chart of horizontal stacked bars.
type BarChart struct {
	Width, Height int
	Title, Desc   string
	Bars          []Bar
	Legend        []LegendItem
	LabelW        int
}

// Bar is one row: a label and its segments.
type Bar struct {
	Label    string
	URL      string
	Y        string
	TextY    string
	Total    string
	TotalX   string
	Segments []Segment
}

// Segment is one part of a bar.
type Segment struct {
	X, W  string
	Class string
	Label string
	URL   string
}

// LegendItem names a colour.
type LegendItem struct {
	Label, Class string
}

// AnalyticsTasks is the drill-down behind a figure: the interrupts it
// counts, with their tasks.
type AnalyticsTasks struct {
	Page
	Heading string
	Period  string
	Back    string
	Rows    []AnalyticsTaskRow
	Limit   int
	More    bool
}

// AnalyticsTaskRow is one interrupt behind a figure.
type AnalyticsTaskRow struct {
	TaskID, TaskTitle, Workflow, Kind, Node, Status string
	Raised, Decided                                 string
	Action, DecidedBy, Waited                       string
}

func viewBox(w, h int) string { return "0 0 " + itoa(w) + " " + itoa(h) }

// filterNote names the kind and workflow filters in a sentence.
func filterNote(f AnalyticsForm) string {
	s := ""
	if f.Kind != "" {
		s += " for kind " + f.Kind
	}
	if f.Workflow != "" {
		s += " in workflow " + f.Workflow
	}
	return s
}
