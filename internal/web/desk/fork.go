package desk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/views"
)

// forkPage: GET /tasks/:id/fork?step=N — "Re-run from here": the
// checkpoint's state, field by field, in a form that starts a fork (the
// last checkpoint when no step is given).
func (d *desk) forkPage(c echo.Context) error {
	id, err := request.PathID(c)
	if err != nil {
		return response.NotFound("task")
	}
	ctx := c.Request().Context()
	hist, err := d.s.store.History(ctx, id)
	if err != nil {
		return err
	}
	t, err := d.s.store.Task(ctx, id)
	if err != nil {
		return err
	}
	if err := request.MayRead(request.Principal(c), t); err != nil {
		return err
	}
	if len(hist) == 0 {
		return &response.Error{Status: http.StatusNotFound, Code: response.CodeNotFound, Field: "step", Message: "this task has no checkpoint to re-run from"}
	}
	step := hist[len(hist)-1].Step
	if q := c.QueryParam("step"); q != "" {
		if step, err = strconv.Atoi(q); err != nil || step < 0 {
			return response.BadRequest("step", "step must be a non-negative integer")
		}
	}
	m, snap, err := d.forkModel(ctx, id, step, hist)
	if err != nil {
		return err
	}
	m.Fields = stateFields(snap.Checkpoint.State)
	return response.Page(c, http.StatusOK, views.ForkView(m))
}

// forkForm: POST /tasks/:id/fork — starts the fork with the state as the
// form changed it and goes to the new task; a refused state comes back in
// the form with the error at its field and everything typed kept.
func (d *desk) forkForm(c echo.Context) error {
	id, err := request.PathID(c)
	if err != nil {
		return response.NotFound("task")
	}
	ctx := c.Request().Context()
	form, err := c.FormParams()
	if err != nil {
		return response.BadRequest("", "the form could not be read")
	}
	step, err := strconv.Atoi(form.Get("step"))
	if err != nil || step < 0 {
		return response.BadRequest("step", "step must be a non-negative integer")
	}
	t, err := d.s.store.Task(ctx, id)
	if err != nil {
		return err
	}
	if err := request.MayRead(request.Principal(c), t); err != nil {
		return err
	}
	hist, err := d.s.store.History(ctx, id)
	if err != nil {
		return err
	}
	m, snap, err := d.forkModel(ctx, id, step, hist)
	if err != nil {
		return err
	}
	// Text that cannot be stored (U+0000, invalid UTF-8, or a \u0000 in
	// the JSON typed) is an error beside its field, with everything typed
	// kept (formRoute leaves the form's text to this handler).
	var got formRead
	m.Title = got.text(form.Get("title"), &m.TitleError)
	m.Patch = got.json(strings.TrimSpace(normalizeNewlines(form.Get("patch"))), &m.PatchError)
	m.Fields = stateFields(snap.Checkpoint.State)
	fail := func(status int) error { return response.Page(c, status, views.ForkView(m)) }
	if m.Blocked != "" {
		return fail(http.StatusConflict)
	}

	// The state the form describes, as a merge patch of the checkpoint's.
	var orig map[string]any
	if err := json.Unmarshal(snap.Checkpoint.State, &orig); err != nil {
		orig = map[string]any{}
	}
	target := make(map[string]any, len(orig))
	for k, v := range orig {
		target[k] = v
	}
	bad := false
	for i := range m.Fields {
		f := &m.Fields[i]
		vals, sent := form["state."+f.Key]
		if !sent || len(vals) == 0 {
			continue
		}
		v := normalizeNewlines(vals[0])
		if !f.JSON {
			f.Value = got.text(v, &f.Error)
			target[f.Key] = v
			continue
		}
		if f.Value = got.json(v, &f.Error); f.Error != "" {
			continue
		}
		var parsed any
		if err := json.Unmarshal([]byte(v), &parsed); err != nil {
			f.Error, bad = "Not valid JSON: "+err.Error(), true
			continue
		}
		target[f.Key] = parsed
	}
	if m.Patch != "" && m.PatchError == "" {
		var p any
		if err := json.Unmarshal([]byte(m.Patch), &p); err != nil {
			m.PatchError, bad = "Not valid JSON: "+err.Error(), true
		} else if _, ok := p.(map[string]any); !ok {
			m.PatchError, bad = "A merge patch of the state is a JSON object.", true
		} else {
			target = graph.MergePatch(target, p).(map[string]any)
		}
	}
	switch {
	case got.unstorable:
		return fail(http.StatusBadRequest)
	case bad || got.failed:
		return fail(http.StatusUnprocessableEntity)
	}
	var patch json.RawMessage
	if diff := mergeDiff(orig, target); len(diff) > 0 {
		if patch, err = json.Marshal(diff); err != nil {
			return err
		}
	}
	f, err := d.s.engine.Fork(ctx, graph.ForkRequest{TaskID: id, Step: step, Patch: patch, Title: m.Title,
		CreatedBy: request.Principal(c).Name})
	var ve *graph.ValidationError
	switch {
	case errors.As(err, &ve):
		key, isState := strings.CutPrefix(ve.Field, "state.")
		key, _, _ = strings.Cut(key, ".")
		placed := false
		for i := range m.Fields {
			if isState && m.Fields[i].Key == key {
				m.Fields[i].Error, placed = response.Sentence(ve.Message), true
			}
		}
		switch {
		case placed:
		case ve.Field == "title":
			m.TitleError = response.Sentence(ve.Message)
		case isState || ve.Field == "state":
			m.PatchError = ve.Field + ": " + ve.Message
		default:
			m.FormError = ve.Error()
		}
		return fail(http.StatusUnprocessableEntity)
	case errors.Is(err, graph.ErrConflict):
		m.FormError = response.Sentence(err.Error())
		return fail(http.StatusConflict)
	case err != nil:
		return err
	}
	if f.Status == graph.StatusQueued {
		d.s.wakeRunner()
	}
	return c.Redirect(http.StatusSeeOther, "/tasks/"+f.ID)
}

// forkModel is the fork form of checkpoint step of task id, without its
// fields; Blocked says why no fork can be made of it now.
func (d *desk) forkModel(ctx context.Context, id string, step int, hist []postgres.HistoryEntry) (views.ForkPage, *graph.Snapshot, error) {
	snap, err := d.s.store.ForkPoint(ctx, id, step)
	if err != nil {
		return views.ForkPage{}, nil, err
	}
	t, cp := &snap.Task, &snap.Checkpoint
	m := views.ForkPage{Page: d.pageMeta(ctx, "Re-run "+t.Title, ""), TaskID: t.ID, TaskTitle: t.Title, Workflow: t.Workflow,
		Step: cp.Step, LastNode: cp.LastNode, NextNode: cp.NextNode, Created: cp.UpdatedAt, CSRF: userOf(ctx).csrf}
	for _, h := range hist {
		if h.Step == cp.Step {
			m.Reason = h.Reason
		}
		m.Steps = append(m.Steps, views.ForkStepOption{Step: h.Step, Label: checkpointLabel(h), Selected: h.Step == cp.Step})
	}
	pos := graph.Position{NextNode: cp.NextNode}
	if itr := snap.Interrupt; cp.PendingInterrupt != "" && itr != nil {
		m.WaitsOn = fmt.Sprintf("the %s %s at %s", itr.Kind, itr.Payload.Type, strings.ReplaceAll(itr.Node, "_", " "))
		pos.InterruptNode, pos.InterruptType = itr.Node, itr.Payload.Type
	}
	w, werr := d.s.engine.Workflow(t.Workflow)
	switch {
	case werr != nil:
		m.Blocked = fmt.Sprintf("This server does not run the %s workflow: it cannot re-run this task.", t.Workflow)
	case t.Status == graph.StatusRunning:
		m.Blocked = "This task is running: it can be re-run once it waits, fails or ends."
	default:
		if err := w.Resumable(pos); err != nil {
			m.Blocked = response.Sentence(err.Error())
		}
	}
	return m, snap, nil
}

// checkpointLabel names a checkpoint in the step picker.
func checkpointLabel(h postgres.HistoryEntry) string {
	var what string
	switch {
	case h.Reason == "start":
		what = "start"
	case h.Reason == "fork":
		what = "forked here"
	case h.Reason == "interrupt":
		what = strings.ReplaceAll(h.NextNode, "_", " ") + " asked a question"
	case h.Reason == "node" && h.LastNode == h.NextNode:
		// A gated node's run, waiting for its decision.
		what = "after " + strings.ReplaceAll(h.LastNode, "_", " ") + ", at its gate"
	case h.LastNode != "":
		what = "after " + strings.ReplaceAll(h.LastNode, "_", " ")
	default:
		what = h.Reason
	}
	if h.NextNode != "" && h.NextNode != graph.END && h.LastNode != h.NextNode && h.Reason != "interrupt" {
		what += ", before " + strings.ReplaceAll(h.NextNode, "_", " ")
	}
	if h.Reason == "decision" {
		what += " (decided)"
	}
	return fmt.Sprintf("Step %d — %s — %s", h.Step, what, h.CreatedAt.UTC().Format("15:04:05"))
}

// stateFields lists a state's top-level fields in their stored order:
// text as it reads, anything else as indented JSON.
func stateFields(state json.RawMessage) []views.StateField {
	dec := json.NewDecoder(bytes.NewReader(state))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []views.StateField
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return out
		}
		f := views.StateField{Key: key}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			f.Value = s
		} else {
			f.JSON = true
			var buf bytes.Buffer
			if json.Indent(&buf, raw, "", "  ") == nil {
				f.Value = buf.String()
			} else {
				f.Value = string(raw)
			}
		}
		f.Rows = min(max(strings.Count(f.Value, "\n")+2, 2), 18)
		out = append(out, f)
	}
	return out
}

// mergeDiff is the JSON merge patch that turns from into to: members that
// changed (whole), and null for those removed.
func mergeDiff(from, to map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range to {
		if old, ok := from[k]; !ok || !reflect.DeepEqual(old, v) {
			out[k] = v
		}
	}
	for k := range from {
		if _, ok := to[k]; !ok {
			out[k] = nil
		}
	}
	return out
}

// normalizeNewlines undoes the CR LF line ends browsers send textareas with.
func normalizeNewlines(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

// lineage is what the task page says about forks and the definition.
func (d *desk) lineage(ctx context.Context, td *taskData) (views.TaskLineage, error) {
	t := td.task
	var l views.TaskLineage
	if f := t.ForkedFrom; f != nil {
		link := &views.ForkLink{ID: f.TaskID, Step: f.Step, Title: "task " + shortTaskID(f.TaskID)}
		if src, err := d.s.store.Task(ctx, f.TaskID); err == nil && auth.MaySee(userOf(ctx).p, src) {
			link.Title, link.Status = src.Title, string(src.Status)
		}
		l.ForkedFrom = link
	}
	forks, err := d.s.store.Forks(ctx, t.ID)
	if err != nil {
		return l, err
	}
	for i := range forks {
		f := &forks[i]
		if !auth.MaySee(userOf(ctx).p, f) {
			continue
		}
		step := 0
		if f.ForkedFrom != nil {
			step = f.ForkedFrom.Step
		}
		l.Forks = append(l.Forks, views.ForkLink{ID: f.ID, Title: f.Title, Status: string(f.Status), Step: step})
	}
	if w, err := d.s.engine.Workflow(t.Workflow); err == nil && graph.DefinitionChanged(t, w) &&
		t.Status != graph.StatusSucceeded && t.Status != graph.StatusCancelled {
		n := &views.DefinitionNote{Stored: t.DefinitionVersion, Running: w.Version()}
		if err := d.s.engine.Resumable(ctx, t.ID); err != nil {
			var ng *graph.NodeGoneError
			if errors.As(err, &ng) {
				n.Blocked = problemLine(ng)
			} else {
				n.Blocked = response.Sentence(err.Error())
			}
		}
		l.Definition = n
	}
	return l, nil
}

// problemLine is why a task cannot resume, short.
func problemLine(ng *graph.NodeGoneError) string {
	if ng.Gate {
		return fmt.Sprintf("Its node %q is no longer gated", ng.Node)
	}
	return fmt.Sprintf("Its node %q no longer exists", ng.Node)
}

func shortTaskID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// forkSteps finds, for each checkpoint of the history, the event its
// commit wrote (by seq): where the timeline offers "Re-run from here".
// Both are in commit order; a checkpoint whose event is not found (the
// page shows only the recent events) is skipped.
func forkSteps(events []graph.Event, hist []postgres.HistoryEntry) map[int64]int {
	out := map[int64]int{}
	i := 0
	for _, h := range hist {
		for j := i; j < len(events); j++ {
			if commitOf(&events[j], h) {
				out[events[j].Seq] = h.Step
				i = j + 1
				break
			}
		}
	}
	return out
}

// commitOf says whether ev is the event a checkpoint of reason h.Reason
// was written with.
func commitOf(ev *graph.Event, h postgres.HistoryEntry) bool {
	switch h.Reason {
	case "start":
		return ev.Type == graph.EventTaskCreated
	case "fork":
		return ev.Type == graph.EventTaskForked
	case "node":
		return ev.Type == graph.EventNodeCompleted && ev.Node == h.LastNode
	case "interrupt":
		return ev.Type == graph.EventInterruptRaised && ev.Node == h.NextNode
	case "decision":
		return ev.Type == graph.EventNodeStarted && ev.Node == h.NextNode ||
			ev.Type == graph.EventTaskCompleted || ev.Type == graph.EventTaskFailed
	}
	return false
}

// timeTravel adds to a task page what only its first render shows: the
// fork links, the definition banner, and "Re-run from here" on the
// timeline's checkpoints (for those who may start tasks).
func (d *desk) timeTravel(ctx context.Context, td *taskData, page *views.TaskPage) error {
	var err error
	if page.Lineage, err = d.lineage(ctx, td); err != nil {
		return err
	}
	if !userOf(ctx).p.Can(auth.RoleOperator) || td.task.Status == graph.StatusRunning {
		return nil
	}
	hist, err := d.s.store.History(ctx, td.task.ID)
	if err != nil {
		return err
	}
	steps := forkSteps(td.events, hist)
	for i := range page.Timeline {
		if step, ok := steps[page.Timeline[i].Seq]; ok {
			page.Timeline[i].ForkStep = step
			page.Timeline[i].ForkURL = "/tasks/" + td.task.ID + "/fork?step=" + strconv.Itoa(step)
		}
	}
	return nil
}
