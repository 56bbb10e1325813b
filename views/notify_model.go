package views

import "time"

// Notifications (SPEC §12): the email's HTML body, and the pages behind an
// email's action link.

// Email is one notification email.
type Email struct {
	// Heading says what happened: "A PRD waits for your decision".
	Heading   string
	TaskTitle string
	Workflow  string
	Kind      string
	// Ask is what the person is asked (the interrupt's title), or what
	// became of it.
	Ask string
	// Question is the interrupt's question or a request's description, as
	// written (Markdown: the text part shows it so); QuestionHTML is it
	// rendered and sanitised for the HTML part.
	Question     string
	QuestionHTML SafeHTML
	Deadline     string
	// Artifact is the artifact under decision, cut to a summary;
	// SummaryHTML is that summary rendered and sanitised when the artifact
	// is Markdown ("" otherwise: the HTML part shows it as text).
	ArtifactName string
	Summary      string
	SummaryHTML  SafeHTML
	Truncated    bool
	// Diff is the change since the last iteration, when there is one.
	DiffFrom, DiffTo int
	Diff             []DiffLine
	// ActionURL is the one-click action link (or the task page);
	// ActionLabel its words.
	ActionURL   string
	ActionLabel string
	TaskURL     string
	// Note is the last paragraph (why this person got it).
	Note string
}

// emailMarkdownCSS styles the rendered Markdown of an email (class md)
// in the mail clients that read a head's style element.
const emailMarkdownCSS = `<style>
.md h1, .md h2, .md h3 { font-size: 16px; margin: 12px 0 6px; }
.md p, .md ul, .md ol { margin: 0 0 8px; }
.md code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; background: #f6f8fa; padding: 1px 4px; border-radius: 4px; }
.md pre { background: #f6f8fa; padding: 8px; white-space: pre-wrap; border-radius: 6px; }
.md pre code { padding: 0; }
.md blockquote { margin: 0 0 8px; padding-left: 10px; border-left: 3px solid #d1d9e0; color: #59636e; }
.md table { border-collapse: collapse; }
.md th, .md td { border: 1px solid #d1d9e0; padding: 4px 8px; }
.md a { color: #0969da; }
</style>`

// ActPage is the confirmation page of an action link: what is asked and
// the form. It carries no session.
type ActPage struct {
	Title     string
	Recipient string
	TaskTitle string
	Workflow  string
	Kind      string
	Ask       string
	Question  string
	Deadline  string
	// The artifact under decision, as text; ArtifactHTML is it rendered
	// and sanitised when it is Markdown ("": shown as text).
	ArtifactName    string
	ArtifactContent string
	ArtifactHTML    SafeHTML
	// Request is set for an approval request (SPEC §16): who asked and
	// through what, its description (shown instead of Question).
	Request *RequestInfo
	// Fields are the controls of a typed answer (SPEC §17).
	Fields []AnswerField
	// Actions are the buttons offered (approve, reject, respond).
	Actions []string
	// Action is where the form posts; FormKey its anti-forgery field.
	Action  string
	FormKey string
	// Error is a refusal of the last post, with its reason.
	Error    string
	Feedback string
	// Progress, when set, says how many approvals the interrupt has.
	Progress string
	// Claim, when set, says that someone else holds the interrupt's claim
	// (SPEC §11): the form would be refused until it ends.
	Claim string
	// CSS and Icon are the addresses of the stylesheet and the favicon.
	CSS  string
	Icon string
}

// ActDone is the page of a spent or ended link (410), or of a decision
// just taken (200): who decided what, and when.
type ActDone struct {
	Title     string
	Message   string
	TaskTitle string
	TaskURL   string
	// CSS and Icon are the addresses of the stylesheet and the favicon.
	CSS  string
	Icon string
}

func hasAction(actions []string, a string) bool {
	for _, x := range actions {
		if x == a {
			return true
		}
	}
	return false
}

func actLabel(a string) string {
	switch a {
	case "approve":
		return "Approve"
	case "reject":
		return "Reject with feedback"
	case "respond":
		return "Send answer"
	}
	return a
}

// WebhooksPage administers webhook endpoints, with each one's latest
// deliveries and their attempts.
type WebhooksPage struct {
	Page
	Endpoints []EndpointRow
	Events    []string
	// Secret is the signing secret of an endpoint just added: shown once.
	Secret, SecretURL string
	Message, Error    string
	NewURL, NewEvents string
	// Retention says how long the delivery log is kept.
	Retention string
}

// EndpointRow is one endpoint.
type EndpointRow struct {
	ID, URL, Events, State string
	Disabled               bool
	Deliveries             []DeliveryRow
}

// DeliveryRow is one delivery of the log.
type DeliveryRow struct {
	ID, Event, State, TaskID string
	Created                  time.Time
	// NextAt is when a pending delivery is tried next (zero otherwise).
	NextAt   time.Time
	Attempts []AttemptRow
}

// Pending reports whether the delivery waits for its next try.
func (d DeliveryRow) Pending() bool { return d.State == "pending" && !d.NextAt.IsZero() }

// AttemptRow is one attempt of a delivery.
type AttemptRow struct {
	N          int
	At         time.Time
	DurationMS int64
	Status     int
	OK         bool
	Error      string
}
