package desk

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/views"
)

// Page sizes of the lists.
const (
	groupSize = 8  // tasks per status on the dashboard
	pageSize  = 50 // tasks of one status, or inbox entries, per page
)

// statusOrder is the order of the dashboard: what needs a person first.
var statusOrder = []graph.TaskStatus{graph.StatusWaiting, graph.StatusRunning, graph.StatusQueued, graph.StatusFailed,
	graph.StatusSucceeded, graph.StatusCancelled}

// dashQuery is what a dashboard URL asks for.
type dashQuery struct {
	Status graph.TaskStatus
	Cursor *postgres.TaskCursor
	raw    string // the cursor as given
}

func parseDashQuery(q url.Values) (dashQuery, error) {
	st, err := request.TaskStatus(q.Get("status"))
	if err != nil {
		return dashQuery{}, err
	}
	cur, err := request.DecodeCursor(q.Get("cursor"))
	if err != nil {
		return dashQuery{}, err
	}
	return dashQuery{Status: st, Cursor: cur, raw: q.Get("cursor")}, nil
}

func (q dashQuery) key() string { return "dash|" + string(q.Status) + "|" + q.raw }

func (q dashQuery) values() url.Values {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", string(q.Status))
	}
	if q.raw != "" {
		v.Set("cursor", q.raw)
	}
	return v
}

// dashboard: GET / — tasks by status.
func (d *desk) dashboard(c echo.Context) error {
	q, err := parseDashQuery(c.QueryParams())
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	body, err := d.loadDashboard(ctx, q)
	if err != nil {
		return err
	}
	page := withUser(ctx, views.Page{Title: "Tasks", Nav: "dashboard", InboxCount: body.InboxCount, Assets: d.assets})
	live := "/live/dashboard"
	if qs := q.values().Encode(); qs != "" {
		live += "?" + qs
	}
	return response.Page(c, http.StatusOK, views.DashboardView(views.Dashboard{Page: page, Body: body, LiveBase: live}))
}

// loadDashboard reads the counts and the tasks of each status (or one
// status's page).
func (d *desk) loadDashboard(ctx context.Context, q dashQuery) (views.DashboardBody, error) {
	counts, err := d.statusCounts(ctx)
	if err != nil {
		return views.DashboardBody{}, err
	}
	inbox, err := d.pendingCount(ctx)
	if err != nil {
		return views.DashboardBody{}, err
	}
	b := views.DashboardBody{InboxCount: inbox, Filter: string(q.Status)}
	for _, st := range statusOrder {
		n := counts[string(st)]
		b.Total += n
		v := url.Values{"status": {string(st)}}
		b.Counts = append(b.Counts, views.StatusCount{Status: string(st), N: n, URL: "/?" + v.Encode(),
			Active: q.Status == st})
	}
	var tasks []graph.Task
	groups := map[graph.TaskStatus][]graph.Task{}
	if q.Status != "" {
		page, next, err := d.s.store.ListTasks(ctx, postgres.TaskFilter{Status: q.Status, Limit: pageSize, After: q.Cursor})
		if err != nil {
			return b, err
		}
		groups[q.Status], tasks = page, page
		if next != nil {
			b.NextURL = "/?" + url.Values{"status": {string(q.Status)}, "cursor": {*request.EncodeCursor(next)}}.Encode()
		}
		if q.Cursor != nil {
			b.FirstURL = "/?" + url.Values{"status": {string(q.Status)}}.Encode()
		}
	} else {
		for _, st := range statusOrder {
			if counts[string(st)] == 0 {
				continue
			}
			page, _, err := d.s.store.ListTasks(ctx, postgres.TaskFilter{Status: st, Limit: groupSize})
			if err != nil {
				return b, err
			}
			groups[st] = page
			tasks = append(tasks, page...)
		}
	}
	var waiting []string
	for _, t := range tasks {
		if t.Status == graph.StatusWaiting {
			waiting = append(waiting, t.ID)
		}
	}
	pending, err := d.s.store.PendingInterrupts(ctx, waiting...)
	if err != nil {
		return b, err
	}
	for _, st := range statusOrder {
		if q.Status != "" && st != q.Status {
			continue
		}
		n := counts[string(st)]
		if q.Status == "" && n == 0 {
			continue
		}
		g := views.TaskGroup{Status: string(st), Label: groupLabel(st), Total: n}
		for _, t := range groups[st] {
			row := views.TaskRow{ID: t.ID, Title: t.Title, Workflow: t.Workflow, Status: string(t.Status),
				CurrentNode: t.CurrentNode, Error: graph.Excerpt(t.Error, 160), CreatedBy: t.CreatedBy, Created: t.CreatedAt,
				Updated: t.UpdatedAt}
			if itr, ok := pending[t.ID]; ok {
				row.Waiting = itr.Payload.Title
			}
			g.Tasks = append(g.Tasks, row)
		}
		if q.Status == "" && n > len(g.Tasks) {
			g.MoreURL = "/?" + url.Values{"status": {string(st)}}.Encode()
		}
		b.Groups = append(b.Groups, g)
	}
	b.Version = version(b)
	return b, nil
}

func groupLabel(st graph.TaskStatus) string {
	switch st {
	case graph.StatusWaiting:
		return "Waiting for a decision"
	case graph.StatusRunning:
		return "Running"
	case graph.StatusQueued:
		return "Queued"
	case graph.StatusFailed:
		return "Failed"
	case graph.StatusSucceeded:
		return "Succeeded"
	case graph.StatusCancelled:
		return "Cancelled"
	}
	return string(st)
}

// version fingerprints a view model: equal versions render equal HTML.
func version(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// inboxQuery is what an inbox URL asks for.
type inboxQuery struct {
	Kind string
	// Claim is mine, unclaimed or ""; Overdue keeps the overdue ones.
	Claim   string
	Overdue bool
	// Who is the viewer (claim=mine).
	Who    string
	Cursor *postgres.InboxCursor
	raw    string
}

func parseInboxQuery(q url.Values) (inboxQuery, error) {
	kind := strings.TrimSpace(q.Get("kind"))
	if len(kind) > 64 {
		return inboxQuery{}, response.BadRequest("kind", "kind is too long")
	}
	out := inboxQuery{Kind: kind, raw: q.Get("after"), Claim: strings.TrimSpace(q.Get("claim"))}
	switch out.Claim {
	case "", "mine", "unclaimed":
	default:
		return out, response.BadRequest("claim", "claim must be mine or unclaimed")
	}
	switch strings.TrimSpace(q.Get("overdue")) {
	case "", "0", "false":
	case "1", "true":
		out.Overdue = true
	default:
		return out, response.BadRequest("overdue", "overdue must be 1 or absent")
	}
	if out.raw != "" {
		raw, err := base64.RawURLEncoding.DecodeString(out.raw)
		bad := response.BadRequest("after", "after is not a cursor this server handed out")
		if err != nil {
			return out, bad
		}
		parts := strings.Split(string(raw), " ")
		if len(parts) < 2 || len(parts) > 3 {
			return out, bad
		}
		t, terr := time.Parse(time.RFC3339Nano, parts[0])
		if terr != nil || !graph.ValidID(parts[1]) {
			return out, bad
		}
		out.Cursor = &postgres.InboxCursor{CreatedAt: t, ID: parts[1]}
		if len(parts) == 3 {
			due, derr := time.Parse(time.RFC3339Nano, parts[2])
			if derr != nil {
				return out, bad
			}
			out.Cursor.Due = &due
		}
	}
	return out, nil
}

func (q inboxQuery) key() string {
	k := "inbox|" + q.Kind + "|" + q.raw + "|" + q.Claim + "|" + strconv.FormatBool(q.Overdue)
	if q.Claim == "mine" {
		k += "|" + q.Who
	}
	return k
}

func (q inboxQuery) values() url.Values {
	v := url.Values{}
	if q.Kind != "" {
		v.Set("kind", q.Kind)
	}
	if q.raw != "" {
		v.Set("after", q.raw)
	}
	if q.Claim != "" {
		v.Set("claim", q.Claim)
	}
	if q.Overdue {
		v.Set("overdue", "1")
	}
	return v
}

// inbox: GET /inbox?kind=&after= — pending interrupts, oldest first.
func (d *desk) inbox(c echo.Context) error {
	q, err := parseInboxQuery(c.QueryParams())
	if err != nil {
		return err
	}
	q.Who = request.Principal(c).Name
	body, err := d.loadInbox(c.Request().Context(), q)
	if err != nil {
		return err
	}
	// The navigation counts every pending interrupt, whatever the filter.
	page := withUser(c.Request().Context(), views.Page{Title: "Inbox", Nav: "inbox", InboxCount: body.Total, Assets: d.assets})
	if q.Kind != "" {
		if page.InboxCount, err = d.pendingCount(c.Request().Context()); err != nil {
			return err
		}
	}
	live := "/live/inbox"
	if qs := q.values().Encode(); qs != "" {
		live += "?" + qs
	}
	return response.Page(c, http.StatusOK, views.InboxView(views.Inbox{Page: page, Body: body, LiveBase: live}))
}

// loadInbox reads one page of the inbox with the counts by kind.
func (d *desk) loadInbox(ctx context.Context, q inboxQuery) (views.InboxBody, error) {
	kinds, err := d.pendingKinds(ctx)
	if err != nil {
		return views.InboxBody{}, err
	}
	entries, next, err := d.s.store.InboxPage(ctx, postgres.InboxFilter{Kind: q.Kind, Limit: pageSize, After: q.Cursor,
		Claim: q.Claim, Who: q.Who, Overdue: q.Overdue})
	var valErr *graph.ValidationError
	if errors.As(err, &valErr) {
		return views.InboxBody{}, response.BadRequest("after", "after is not a cursor this server handed out")
	}
	if err != nil {
		return views.InboxBody{}, err
	}
	b := views.InboxBody{Kind: q.Kind, Claim: q.Claim, Overdue: q.Overdue}
	for _, k := range kinds {
		if q.Kind == "" || q.Kind == k.Kind {
			b.Total += k.N
		}
		b.Kinds = append(b.Kinds, views.KindCount{Kind: k.Kind, N: k.N,
			URL: "/inbox?" + url.Values{"kind": {k.Kind}}.Encode(), Active: k.Kind == q.Kind})
	}
	now := time.Now()
	taskIDs := make([]string, 0, len(entries))
	for _, e := range entries {
		taskIDs = append(taskIDs, e.TaskID)
	}
	viewers, err := d.s.store.PresenceCounts(ctx, taskIDs)
	if err != nil {
		return views.InboxBody{}, err
	}
	var due []string
	for _, e := range entries {
		if e.Deadline != nil {
			due = append(due, e.ID)
		}
	}
	onTimeout, err := d.s.store.DeadlineActions(ctx, due)
	if err != nil {
		return views.InboxBody{}, err
	}
	for _, e := range entries {
		it := views.InboxItem{InterruptID: e.ID, TaskID: e.TaskID, TaskTitle: e.Task.Title,
			Workflow: e.Task.Workflow, Node: e.Node, Kind: e.Kind, Title: e.Payload.Title,
			Question: response.QuestionLine(e.Task.Workflow, e.Payload.Question, 200, d.render.md), Iteration: e.Iteration, Created: e.CreatedAt,
			Waiting: waited(now.Sub(e.CreatedAt)), Deadline: e.Deadline, Overdue: e.Overdue,
			Level: e.EscalationLevel, Holder: e.ClaimedBy, Viewers: viewers[e.TaskID],
			CreatedBy: e.Task.CreatedBy, Via: strings.ToUpper(e.Task.Via), NotBy: d.notBy(e.Kind, e.Task.CreatedBy), OnTimeout: onTimeout[e.ID]}
		if e.Deadline != nil {
			it.DueIn = dueIn(e.Deadline.Sub(now))
			it.Overdue = it.Overdue || !e.Deadline.After(now)
		}
		b.Items = append(b.Items, it)
	}
	if q.Claim != "" || q.Overdue {
		b.Total = len(b.Items)
	}
	if next != nil {
		cur := next.CreatedAt.UTC().Format(time.RFC3339Nano) + " " + next.ID
		if next.Due != nil {
			cur += " " + next.Due.UTC().Format(time.RFC3339Nano)
		}
		v := q.values()
		v.Set("after", base64.RawURLEncoding.EncodeToString([]byte(cur)))
		b.NextURL = "/inbox?" + v.Encode()
	}
	if q.Cursor != nil {
		b.FirstURL = "/inbox"
		if q.Kind != "" {
			b.FirstURL += "?" + url.Values{"kind": {q.Kind}}.Encode()
		}
	}
	// The waiting times change every minute; the version follows the data.
	items := b.Items
	b.Items = nil
	ids := make([]string, 0, len(items))
	for _, it := range items {
		ids = append(ids, it.InterruptID)
	}
	// What each item shows of time, claims and presence changes it too
	// (the minutes of "due in" as well).
	var facts []string
	for _, it := range items {
		facts = append(facts, fmt.Sprintf("%s|%s|%t|%d|%s|%d", it.InterruptID, it.DueIn, it.Overdue, it.Level, it.Holder, it.Viewers))
	}
	b.Version = version(struct {
		B     views.InboxBody
		IDs   []string
		Facts []string
	}{b, ids, facts})
	b.Items = items
	return b, nil
}

// waited is a short duration for people: "just now", "4 min", "3 h", "2 d".
func waited(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	default:
		return fmt.Sprintf("%d d", int(d.Hours()/24))
	}
}

// statusCounts counts tasks by status.
func (d *desk) statusCounts(ctx context.Context) (map[string]int, error) {
	return d.s.store.TaskCounts(ctx)
}

// pendingCount counts pending interrupts.
func (d *desk) pendingCount(ctx context.Context) (int, error) {
	byKind, err := d.s.store.PendingInterruptCounts(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range byKind {
		n += c
	}
	return n, nil
}

// kindCount is the number of pending interrupts of one kind.
type kindCount struct {
	Kind string
	N    int
}

// pendingKinds counts pending interrupts by kind, in kind order.
func (d *desk) pendingKinds(ctx context.Context) ([]kindCount, error) {
	byKind, err := d.s.store.PendingInterruptCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]kindCount, 0, len(byKind))
	for k, n := range byKind {
		out = append(out, kindCount{Kind: k, N: n})
	}
	slices.SortFunc(out, func(a, b kindCount) int { return strings.Compare(a.Kind, b.Kind) })
	return out, nil
}

// notBy is who may not approve an interrupt of kind on a task creator
// started (separation of duties), "" when anyone may.
func (d *desk) notBy(kind, creator string) string {
	if creator == "" || !d.s.decider.Policy().SeparateDuties(kind) {
		return ""
	}
	return creator
}
