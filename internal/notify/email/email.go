// Package email is the email channel of the notifications (SPEC §12): one
// message per delivery, plain text and HTML from the desk's templates, with
// one action link bound to its recipient.
//
// Markdown (a request's description, a question, a Markdown document's
// summary) is rendered in the HTML part by internal/markdown, the desk's
// renderer: raw HTML dropped, the result sanitised. The text part shows it
// as written.
//
// It imports graph, markdown, notify, textdiff and views; never postgres
// (it declares the EmailStore it reads) nor the web packages.
package email

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wneessen/go-mail"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/markdown"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/textdiff"
	"github.com/gatehousehq/gatehouse/views"
)

// SMTP is where mail goes (GATEHOUSE_SMTP_URL).
type SMTP struct {
	Host     string
	Port     int
	Username string
	Password string
	// TLS from the first byte (smtps); otherwise STARTTLS when offered.
	TLS bool
}

// EmailStore is what the email channel needs besides notify.Store.
type EmailStore interface {
	// RecipientEmail is a user's address ("" when none or disabled).
	// Errors: notify.ErrNotFound.
	RecipientEmail(ctx context.Context, username string) (string, error)
	// CreateActionLink stores a link by its token's SHA-256.
	CreateActionLink(ctx context.Context, hash []byte, l notify.ActionLink, deliveryID string) error
}

// Email is the email channel: one message per delivery, to one person,
// with one action link bound to them.
type Email struct {
	store     EmailStore
	smtp      SMTP
	from      string
	publicURL string
}

// New returns the email channel; publicURL is the base of its links.
func New(store EmailStore, smtp SMTP, from, publicURL string) *Email {
	return &Email{store: store, smtp: smtp, from: from, publicURL: strings.TrimRight(publicURL, "/")}
}

// asks reports whether an event asks its recipient to decide.
func asks(event string) bool {
	return event == notify.EventRaised || event == notify.EventReminder || event == notify.EventEscalated
}

// Send implements Channel.
func (e *Email) Send(ctx context.Context, d *notify.Delivery, s *notify.Subject) notify.Outcome {
	addr, err := e.store.RecipientEmail(ctx, d.Recipient)
	switch {
	case errors.Is(err, notify.ErrNotFound):
		return notify.Outcome{Err: fmt.Errorf("user %s no longer exists", d.Recipient), Permanent: true}
	case err != nil:
		return notify.Outcome{Err: err}
	case addr == "":
		return notify.Outcome{Err: fmt.Errorf("user %s has no email address (or is disabled)", d.Recipient), Permanent: true}
	}
	m := Compose(d.Event, s, e.publicURL)
	if asks(d.Event) && s.Interrupt != nil && s.Interrupt.Status == graph.InterruptPending {
		token, hash := notify.ActionToken()
		expires := time.Now().Add(notify.LinkTTL)
		if dl := s.Interrupt.Deadline; dl != nil && dl.Before(expires) {
			expires = *dl
		}
		if err := e.store.CreateActionLink(ctx, hash, notify.ActionLink{InterruptID: s.Interrupt.ID, TaskID: s.Task.ID,
			Recipient: d.Recipient, ExpiresAt: expires}, d.ID); err != nil {
			return notify.Outcome{Err: err}
		}
		m.ActionURL, m.ActionLabel = e.publicURL+"/act/"+token, "Review and decide"
		m.Note = fmt.Sprintf("This link decides as %s, once, until %s. Forwarding this email forwards that power.",
			d.Recipient, expires.UTC().Format("2006-01-02 15:04 MST"))
	}
	var html bytes.Buffer
	if err := views.EmailHTML(m).Render(ctx, &html); err != nil {
		return notify.Outcome{Err: fmt.Errorf("rendering the email: %w", err), Permanent: true}
	}
	msg := mail.NewMsg()
	if err := msg.From(e.from); err != nil {
		return notify.Outcome{Err: fmt.Errorf("GATEHOUSE_SMTP_FROM: %w", err), Permanent: true}
	}
	if err := msg.To(addr); err != nil {
		return notify.Outcome{Err: fmt.Errorf("address of %s: %w", d.Recipient, err), Permanent: true}
	}
	msg.Subject(Subjectline(d.Event, s))
	// The delivery's id: a retry after a crash is the same message to
	// every mail client that deduplicates by Message-ID.
	msg.SetMessageIDWithValue(d.ID + "@gatehouse")
	msg.SetDate()
	msg.SetGenHeader("Auto-Submitted", "auto-generated")
	msg.SetGenHeader("X-Auto-Response-Suppress", "All")
	msg.SetUserAgent("Gatehouse")
	msg.SetBodyString(mail.TypeTextPlain, PlainText(m))
	msg.AddAlternativeString(mail.TypeTextHTML, html.String())
	opts := []mail.Option{mail.WithPort(e.smtp.Port), mail.WithTimeout(30 * time.Second)}
	if e.smtp.TLS {
		opts = append(opts, mail.WithSSL())
	} else {
		opts = append(opts, mail.WithTLSPolicy(mail.TLSOpportunistic))
	}
	if e.smtp.Username != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover), mail.WithUsername(e.smtp.Username),
			mail.WithPassword(e.smtp.Password))
	}
	c, err := mail.NewClient(e.smtp.Host, opts...)
	if err != nil {
		return notify.Outcome{Err: fmt.Errorf("smtp client: %w", err), Permanent: true}
	}
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		return notify.Outcome{Err: fmt.Errorf("smtp %s:%d: %w", e.smtp.Host, e.smtp.Port, err)}
	}
	return notify.Outcome{OK: true}
}

// Subjectline is an email's subject: the kind and the task.
func Subjectline(event string, s *notify.Subject) string {
	title := s.Task.Title
	if title == "" {
		title = s.Task.Workflow + " " + s.Task.ID[:8]
	}
	kind := ""
	if s.Interrupt != nil {
		kind = notify.KindLabel(s.Interrupt.Kind)
	}
	switch event {
	case notify.EventRaised:
		return fmt.Sprintf("[Gatehouse] %s waits for your decision: %s", kind, title)
	case notify.EventReminder:
		return fmt.Sprintf("[Gatehouse] Reminder: %s waits for your decision: %s", kind, title)
	case notify.EventEscalated:
		return fmt.Sprintf("[Gatehouse] Escalated to you: %s of %s", kind, title)
	case notify.EventExpired:
		return fmt.Sprintf("[Gatehouse] %s expired: %s", kind, title)
	case notify.EventDecided:
		return fmt.Sprintf("[Gatehouse] %s decided: %s", kind, title)
	case notify.EventSucceeded:
		return "[Gatehouse] Task succeeded: " + title
	case notify.EventFailed:
		return "[Gatehouse] Task failed: " + title
	case notify.EventCancelled:
		return "[Gatehouse] Task cancelled: " + title
	}
	return "[Gatehouse] " + event + ": " + title
}

// diffLines bounds the diff an email shows.
const diffLines = 60

// md renders the Markdown of the HTML part (safe for concurrent use).
var md = markdown.New()

// Compose builds the email's content for an event (without its action
// link, which is made per recipient).
func Compose(event string, s *notify.Subject, publicURL string) views.Email {
	m := views.Email{TaskTitle: s.Task.Title, Workflow: s.Task.Workflow, Heading: Subjectline(event, s)}
	m.Heading = strings.TrimPrefix(m.Heading, "[Gatehouse] ")
	if m.TaskTitle == "" {
		m.TaskTitle = s.Task.Workflow + " task " + s.Task.ID
	}
	if publicURL != "" {
		m.TaskURL = publicURL + "/tasks/" + s.Task.ID
		m.ActionURL, m.ActionLabel = m.TaskURL, "Open the task"
	}
	switch event {
	case notify.EventSucceeded, notify.EventFailed, notify.EventCancelled:
		m.Kind = string(s.Task.Status)
		if s.Task.Error != "" {
			m.Ask = "Error: " + s.Task.Error
		}
		m.Note = "You started this task."
		return m
	}
	itr := s.Interrupt
	if itr == nil {
		return m
	}
	m.Kind = itr.Kind
	m.Ask = itr.Payload.Title
	if q := strings.TrimSpace(itr.Payload.Question); q != "" {
		m.Question, m.QuestionHTML = q, views.SafeHTML(md.HTML(q))
	}
	if itr.Deadline != nil {
		m.Deadline = itr.Deadline.UTC().Format("2006-01-02 15:04 MST")
	}
	if d := s.Decision; d != nil && event != notify.EventRaised {
		m.Ask = fmt.Sprintf("%s: %s by %s at %s", m.Ask, d.Action, d.DecidedBy, d.DecidedAt.UTC().Format(time.RFC3339))
	}
	if a := itr.Payload.Artifact; a != nil {
		m.ArtifactName = a.Name
		m.Summary, m.Truncated = notify.Summarize(a.Content)
		if markdown.Is(a.ContentType) {
			m.SummaryHTML = views.SafeHTML(md.HTML(m.Summary))
		}
		if prev, cur, ok := lastTwo(s.Artifacts, a.Name, a.Content); ok {
			m.DiffFrom, m.DiffTo = prev.Version, cur.Version
			m.Diff = LineDiff(prev.Content, cur.Content, diffLines)
		}
	}
	return m
}

// lastTwo finds the version of artifact name with this content and the
// version before it.
func lastTwo(arts []graph.Artifact, name, content string) (prev, cur graph.Artifact, ok bool) {
	var vs []graph.Artifact
	for _, a := range arts {
		if a.Name == name {
			vs = append(vs, a)
		}
	}
	slices.SortFunc(vs, func(a, b graph.Artifact) int { return a.Version - b.Version })
	for i := len(vs) - 1; i > 0; i-- {
		if vs[i].Content == content {
			return vs[i-1], vs[i], true
		}
	}
	return prev, cur, false
}

// LineDiff is the changed lines from a to b with one line of context, at
// most max lines; documents past 500 lines are compared on their first 500.
func LineDiff(a, b string, max int) []views.DiffLine {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	x, y = x[:min(len(x), 500)], y[:min(len(y), 500)]
	all := textdiff.Ops(strings.Join(x, "\n"), strings.Join(y, "\n"))
	keep := make([]bool, len(all))
	for k, d := range all {
		if d.Op != "=" {
			for c := max2(k-1, 0); c <= min(k+1, len(all)-1); c++ {
				keep[c] = true
			}
		}
	}
	var out []views.DiffLine
	for k, d := range all {
		if keep[k] && len(out) < max {
			out = append(out, d)
		}
	}
	return out
}

func max2(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// PlainText is the text/plain part of an email: the same content as the
// HTML one.
func PlainText(m views.Email) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n%s (%s, %s)\n", m.Heading, m.TaskTitle, m.Workflow, m.Kind)
	if m.Ask != "" {
		fmt.Fprintf(&b, "\n%s\n", m.Ask)
	}
	if m.Question != "" {
		fmt.Fprintf(&b, "\n%s\n", m.Question)
	}
	if m.Deadline != "" {
		fmt.Fprintf(&b, "\nDue %s\n", m.Deadline)
	}
	if m.ActionURL != "" {
		fmt.Fprintf(&b, "\n%s:\n%s\n", m.ActionLabel, m.ActionURL)
	}
	if len(m.Diff) > 0 {
		fmt.Fprintf(&b, "\nWhat changed in %s (v%d -> v%d):\n", m.ArtifactName, m.DiffFrom, m.DiffTo)
		for _, l := range m.Diff {
			op := l.Op
			if op == "=" {
				op = " "
			}
			fmt.Fprintf(&b, "%s %s\n", op, l.Text)
		}
	}
	if m.Summary != "" {
		fmt.Fprintf(&b, "\n%s:\n%s\n", m.ArtifactName, m.Summary)
		if m.Truncated {
			b.WriteString("[cut short: the whole document is on the task page]\n")
		}
	}
	if m.TaskURL != "" && m.TaskURL != m.ActionURL {
		fmt.Fprintf(&b, "\nThe task: %s\n", m.TaskURL)
	}
	if m.Note != "" {
		fmt.Fprintf(&b, "\n-- \n%s\n", m.Note)
	}
	return b.String()
}
