// Package views holds the desk's templ components: a layout and one file
// per concern (dashboard, inbox, new task, task page and its parts). They
// take view models shaped for display, built by internal/web; they decide
// nothing but presentation.
//
// It imports nothing of the project: no store, no engine, no server.
package views

import (
	"strings"
	"time"

	"github.com/a-h/templ"
)

// SafeHTML is HTML that internal/web produced and made safe (Markdown
// rendered then sanitised, code tokenised with every text escaped). Only
// it is written unescaped; every other string is escaped by templ.
type SafeHTML string

// Assets resolves a static file's logical name to its hashed URL.
type Assets interface {
	URL(name string) string
}

// Page is what every page carries.
type Page struct {
	Title      string
	Nav        string // the active section: dashboard, inbox, new
	InboxCount int
	Assets     Assets
	// CSRF is the session's form token; when set, the page's script puts
	// it in every form as _csrf (also in forms that arrive live, which are
	// shared by every viewer and so carry none themselves) and in the
	// X-CSRF-Token header of htmx requests.
	CSRF string
	// User is who is signed in (nil on the login page).
	User *PageUser
}

// PageUser is the signed-in principal, for the navigation.
type PageUser struct {
	Name string
	Role string
	// Operator and Admin say what the navigation offers (start a task;
	// users, tokens and the audit trail).
	Operator bool
	Admin    bool
}

// --- dashboard ---

// Dashboard is the home page: counts by status and the tasks of each.
type Dashboard struct {
	Page
	Body DashboardBody
	// LiveBase is the websocket URL (without parameters) of the updates.
	LiveBase string
}

// DashboardBody is the live part of the dashboard.
type DashboardBody struct {
	Counts     []StatusCount
	InboxCount int
	Total      int
	// Filter is the status shown alone (paged), or "" for every group.
	Filter string
	Groups []TaskGroup
	// PrevURL / NextURL page through a filtered list.
	NextURL  string
	FirstURL string
	// Version identifies this rendering (a reconnect with the same version
	// needs no update).
	Version string
}

// StatusCount is one status's count with its filter link.
type StatusCount struct {
	Status string
	Label  string
	N      int
	URL    string
	Active bool
}

// TaskGroup is the tasks of one status.
type TaskGroup struct {
	Status  string
	Label   string
	Total   int
	Tasks   []TaskRow
	MoreURL string // set when Total > len(Tasks)
}

// TaskRow is a task in a list.
type TaskRow struct {
	ID          string
	Title       string
	Workflow    string
	Status      string
	CurrentNode string
	Waiting     string // title of the pending interrupt
	Error       string
	CreatedBy   string
	Created     time.Time
	Updated     time.Time
}

// --- inbox ---

// Inbox lists pending interrupts, oldest first.
type Inbox struct {
	Page
	Body     InboxBody
	LiveBase string
}

// InboxBody is the live part of the inbox.
type InboxBody struct {
	Kind string
	// Claim (mine, unclaimed) and Overdue are the work-queue filters.
	Claim    string
	Overdue  bool
	Kinds    []KindCount
	Total    int
	Items    []InboxItem
	NextURL  string
	FirstURL string
	Version  string
}

// KindCount is a kind filter with its count.
type KindCount struct {
	Kind   string
	N      int
	URL    string
	Active bool
}

// InboxItem is one pending interrupt.
type InboxItem struct {
	InterruptID string
	TaskID      string
	TaskTitle   string
	Workflow    string
	Node        string
	Kind        string
	Title       string
	Question    string
	Iteration   int
	Created     time.Time
	Waiting     string // how long, e.g. "3 min"
	// CreatedBy is who started the task or made the request (a user, or
	// an API token as token:NAME, as over MCP); Via the channel a
	// request came through ("API", "MCP"; "" for other tasks).
	CreatedBy string
	Via       string
	// NotBy names who may not approve it (its task's creator, under
	// separation of duties): "needs another approver" in the inbox.
	NotBy string
	// The work queue (SPEC §11): the deadline and how long is left, the
	// escalation level, who holds the claim, how many have it open.
	Deadline *time.Time
	DueIn    string
	Overdue  bool
	// OnTimeout is what the deadline does: fail, approve, cancel or none.
	OnTimeout string
	Level     int
	Holder    string
	Viewers   int
}

// --- new task ---

// NewTask is the form that starts a task.
type NewTask struct {
	Page
	Workflows []WorkflowChoice
	Workflow  string
	// Description of the chosen workflow.
	About    string
	Title    string
	TitleErr string
	Fields   []Field
	// Options are the workflow's task options other than gates
	// (slogan's max_turns and human_reviewer, sdd's max_revisions, …).
	Options   []Field
	Gates     []GateSwitch
	FormError string
	// Multipart is set when a field uploads files.
	Multipart bool
}

// WorkflowChoice is a workflow in the picker.
type WorkflowChoice struct {
	Name     string
	Title    string
	Selected bool
}

// Field kinds.
const (
	FieldText     = "text"
	FieldTextarea = "textarea"
	FieldCheckbox = "checkbox"
	FieldSelect   = "select"
	FieldNumber   = "number"
	FieldLines    = "lines" // an array of strings, one per line
	FieldFiles    = "files" // an array of {name, content}: uploaded text files
)

// Field is one input generated from the workflow's input schema.
type Field struct {
	Name      string // the form field name, "input.<property>"
	ID        string
	Label     string
	Help      string
	Kind      string
	Required  bool
	Value     string
	Checked   bool
	Options   []string
	MaxLength int
	MinLength int
	Min, Max  string
	Step      string
	Error     string
	// Pattern is the schema's pattern; PatternMessage says it in words.
	Pattern, PatternMessage string
}

// GateSwitch asks whether a gate waits for a human.
type GateSwitch struct {
	Option string // the task option, e.g. allowPrd
	Kind   string
	Node   string
	Human  bool
}

// --- task page ---

// TaskPage is everything about one task.
type TaskPage struct {
	Page
	Head      TaskHead
	Graph     Graph
	Timeline  []TimelineItem
	LastSeq   int64
	State     StateView
	Artifacts ArtifactsView
	Interrupt InterruptView
	Decisions []DecisionRow
	LiveBase  string
	// NoDecisions is what the decisions list says while empty: "No
	// decisions yet", or that the finished task had no gate at all.
	NoDecisions string
	// Deliverable is what a succeeded task produced for people (merge.md,
	// sdd.md, the slogan, …), shown first; nil otherwise.
	Deliverable *Deliverable
	// DemoModel: the replies come from the offline scripted model.
	DemoModel bool
	// Lineage links forks both ways and flags a changed definition.
	Lineage TaskLineage
}

// Deliverable is a finished task's main document, rendered.
type Deliverable struct {
	Name, ContentType string
	Version           int
	Rendered          SafeHTML
	URL               string // the document in the artifact viewer
}

// TaskHead is the task's identity and status.
type TaskHead struct {
	ID            string
	Title         string
	Workflow      string
	WorkflowTitle string
	Status        string
	CurrentNode   string
	Error         string
	CreatedBy     string
	// Via is the channel an approval request came through ("API",
	// "MCP"; "" for other tasks).
	Via       string
	Created   time.Time
	Updated   time.Time
	Completed *time.Time
	Elapsed   string
	CanCancel bool
	CanRetry  bool
	Result    SafeHTML // highlighted JSON, when the task has a result
	// CSRF is the session's token in the page's own copy ("" in the copy
	// live pages share: their script adds theirs).
	CSRF string
}

// Graph is a workflow drawn as SVG, laid out by internal/web.
type Graph struct {
	Width, Height int
	Nodes         []GraphNode
	Edges         []GraphEdge
}

// GraphNode is one box (or the start and end dots).
type GraphNode struct {
	Name        string
	Label       string
	Description string
	Status      string // pending, running, waiting, done, failed
	Iteration   int
	Gated       bool
	Terminal    bool // the start or end marker, not a node of the workflow
	X, Y, W, H  int
}

// GraphEdge is one arrow.
type GraphEdge struct {
	Path   string // SVG path data
	Label  string
	LX, LY int
	Dashed bool
	Back   bool
	Taken  bool
}

// TimelineItem is one event.
type TimelineItem struct {
	Seq       int64
	Type      string
	Tone      string // info, good, warn, bad, muted
	Node      string
	Phase     string
	Iteration int
	At        time.Time
	Duration  string
	BarPct    int // duration relative to the longest node run
	Summary   string
	Who       string
	Quote     string // feedback, error
	// Detail is shown collapsed (prompt and reply of an LLM call).
	Detail []DetailPart
	// ForkURL, when set, is the "Re-run from here" form of the checkpoint
	// this event's commit wrote (ForkStep).
	ForkURL  string
	ForkStep int
}

// DetailPart is a labelled block of text.
type DetailPart struct {
	Label string
	Text  string
}

// StateView is the current checkpoint.
type StateView struct {
	Present  bool
	Step     int
	LastNode string
	NextNode string
	Updated  time.Time
	JSON     SafeHTML
	Size     string
}

// ArtifactsView lists artifacts and shows one.
type ArtifactsView struct {
	TaskID string
	Names  []ArtifactName
	View   ArtifactDoc
}

// ArtifactName is an artifact with its versions.
type ArtifactName struct {
	Name     string
	Latest   int
	Versions []ArtifactVersion
	Selected bool
	URL      string
}

// ArtifactVersion is one version of an artifact.
type ArtifactVersion struct {
	Version   int
	Node      string
	Iteration int
	Created   time.Time
	URL       string
	Selected  bool
}

// ArtifactDoc is one version shown, or a diff between two.
type ArtifactDoc struct {
	Present     bool
	TaskID      string
	Name        string
	ContentType string
	Version     int
	From        int // > 0: a diff from this version to Version
	Versions    []int
	Node        string
	Iteration   int
	Created     time.Time
	Rendered    SafeHTML
	Diff        Diff
	ViewURL     string // the plain view of Version
	DiffURL     string // the diff from the previous version
	Endpoint    string // the fragment endpoint of the compare form
	// ShownAbove: this version is the one under decision, shown with the
	// form; the viewer says so instead of showing it twice.
	ShownAbove bool
	// Follows: the page chose nothing (the default view), so the view
	// follows the task live: new versions and decisions replace it. A
	// chosen version or diff stays as chosen.
	Follows bool
	// OOB renders the view as a live fragment, swapped only into a page
	// whose view follows.
	OOB bool
}

// Diff is a line diff.
type Diff struct {
	Added, Removed int
	Hunks          []DiffHunk
	Same           bool
}

// DiffHunk is a run of changed lines with context; Skipped lines of
// unchanged text come before it.
type DiffHunk struct {
	Skipped int
	Lines   []DiffLine
}

// DiffLine is one line of a diff.
type DiffLine struct {
	Op       string // "=", "+", "-"
	Text     string
	Old, New int // line numbers, 0 when absent
	// Segs, when set, is Text in segments, the words changed against the
	// line it replaced (or that replaced it) marked.
	Segs []DiffSeg
}

// DiffSeg is a part of a changed line.
type DiffSeg struct {
	Text    string
	Changed bool
}

// InterruptView is the decision area of the task page.
type InterruptView struct {
	TaskID string
	// Key identifies what is shown (pending interrupt or last outcome), so
	// the live feed replaces the area only when that changes.
	Key string
	// Reviewer is the viewer's name: their own answers in a thread.
	Reviewer string
	Pending  *PendingForm
	// Outcome is the latest decision, shown above a new form or alone.
	Outcome *Outcome
	// Thread is the questions and answers so far (questions only).
	Thread []ThreadMessage
	// Status is the task status, for the message when nothing is pending.
	Status string
}

// PendingForm is the open interrupt as forms.
type PendingForm struct {
	InterruptID string
	// The interrupt in time (SPEC §11).
	Deadline *time.Time
	DueIn    string // "3 h", "overdue"
	Overdue  bool
	// OnTimeout is what the deadline does: fail, approve, cancel or none.
	OnTimeout string
	Level     int
	// ClaimedBy holds the claim; ClaimAction is the button the viewer
	// gets: claim, release, take_over or none.
	ClaimedBy     string
	ClaimAction   string
	PayloadSHA256 string
	Kind          string
	Node          string
	Type          string // gate or question
	Title         string
	Question      string
	Iteration     int
	Created       time.Time
	CanApprove    bool
	CanReject     bool
	CanEdit       bool
	CanRespond    bool
	// Artifact under decision, rendered; Raw for the editor.
	ArtifactName string
	ContentType  string
	Rendered     SafeHTML
	Raw          string
	// Changes since the version the reviewer rejected (iteration > 1).
	Changes     *Diff
	ChangesFrom int // the iteration rejected
	// Kept input and errors after a refused submit.
	Feedback string
	Value    string
	Errors   map[string]string
	// Approvals is the progress of a kind that needs several approvers
	// ("1 of 2 approvals: ann"); Notice says why the viewer may do less
	// than everything (or nothing: then no form is shown).
	Approvals string
	Notice    string
	// MayApprove names who may approve when the viewer may not (the
	// creator under separation of duties): "ann (approver)". NoApprover
	// says nobody else may; UsersLink offers an admin the Users page to
	// add one.
	MayApprove []string
	NoApprover bool
	UsersLink  bool
	// CSRF is the session's token for the forms ("" in the copy shared
	// by live pages: their script adds their own).
	CSRF string
	// Request is set when the interrupt is an approval request's (SPEC
	// §16): who asked and through what, its description as sanitised
	// Markdown (shown instead of Question).
	Request *RequestInfo
	// Fields are the controls of a typed answer (SPEC §17), shown instead
	// of the one answer box; each carries its kept input and its error.
	Fields []AnswerField
}

// RequestInfo is what the desk says about an approval request (SPEC §16).
type RequestInfo struct {
	// AskedBy is the principal that made it (a user, or token:NAME), Via
	// the channel: "API" or "MCP".
	AskedBy string
	Via     string
	// Description is the request's description, rendered and sanitised.
	Description SafeHTML
}

// Answer controls (AnswerField.Widget).
const (
	WidgetText     = "text"
	WidgetTextarea = "textarea"
	WidgetSelect   = "select"
	WidgetNumber   = "number"
	WidgetCheckbox = "checkbox"
	WidgetChoices  = "choices"
)

// AnswerField is one labelled control of a typed answer (SPEC §17): a
// text box, a text area, a choice (select), a number, a checkbox, or
// several choices (checkboxes). Attrs carries the browser's checks
// (required, min, max, step, minlength, maxlength, pattern); the server
// checks again.
type AnswerField struct {
	Name     string
	Label    string
	Help     string
	Widget   string
	Required bool
	// Value is a text or number control's input; Checked a checkbox's.
	Value   string
	Checked bool
	Options []AnswerOption
	Attrs   templ.Attributes
	// Error is the problem of the last submit, beside the control.
	Error string
}

// ID is the control's element id.
func (f AnswerField) ID() string { return "answer-" + f.Name }

// DescribedBy lists the ids of the control's help and error, those it has.
func (f AnswerField) DescribedBy() string {
	var ids []string
	if f.Help != "" {
		ids = append(ids, f.ID()+"-help")
	}
	if f.Error != "" {
		ids = append(ids, f.ID()+"-error")
	}
	return strings.Join(ids, " ")
}

// Input is the control's form field name.
func (f AnswerField) Input() string { return "answer." + f.Name }

// AnswerOption is one choice of a select or of several choices.
type AnswerOption struct {
	Value    string
	Selected bool
}

// Outcome is a decision as the desk reports it.
type Outcome struct {
	InterruptID string
	Title       string
	Action      string
	Verb        string // approved, rejected, approved with edits, answered
	By          string
	At          time.Time
	Feedback    string
	// Late marks the answer to a submit that came after this decision.
	Late bool
}

// ThreadMessage is one message of a question thread.
type ThreadMessage struct {
	From string // the asking node, or the person who answered
	Mine bool   // a person's answer (shown on the right)
	Text string
	// HTML, when set, is Text as sanitised HTML (an approval request's
	// description, Markdown), shown instead of Text.
	HTML SafeHTML
	At   time.Time
}

// DecisionRow is a decision in the task's record.
type DecisionRow struct {
	InterruptID string
	Title       string
	Kind        string
	Node        string
	Iteration   int
	Action      string
	Verb        string
	By          string
	At          time.Time
	Feedback    string
	Edited      bool
}

// ErrorPage is a page for an error.
type ErrorPage struct {
	Page
	Status  int
	Heading string
	Message string
}

// IsQuestion reports whether the interrupt asks something rather than
// gates a document: it is answered, never rejected, so it shows one form
// (the answer), with "accept the proposal" once the asker offers one.
func (p PendingForm) IsQuestion() bool { return p.CanRespond && !p.CanReject && p.ArtifactName == "" }

// RespondForm reports whether the card shows a form to answer in: a
// question, or typed answer fields. An interrupt that also takes approve
// and reject (a slogan's human review) is one form with one text box —
// its feedback — and no second box for a free answer (the API still takes
// respond).
func (p PendingForm) RespondForm() bool {
	return p.CanRespond && (p.IsQuestion() || len(p.Fields) > 0 || !(p.CanApprove || p.CanReject))
}
