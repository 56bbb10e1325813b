package desk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/markdown"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/views"
)

// maxPageEvents bounds the events a task page loads; the timeline of a
// task longer than that starts at its recent end.
const maxPageEvents = 5000

// taskData is everything stored about a task, as one page shows it.
type taskData struct {
	task       *graph.Task
	desc       *graph.Description // nil for a workflow this build does not know
	events     []graph.Event
	firstSeq   int64 // seq of events[0]
	lastSeq    int64
	artifacts  []graph.Artifact
	interrupts []graph.Interrupt
	decisions  []graph.Decision
	checkpoint *graph.Checkpoint
	pending    *graph.Interrupt
	// deadlineAction is what the pending interrupt's deadline does (fail,
	// approve, cancel, none; "" without one).
	deadlineAction string
	// approvals are the approvers so far of interrupts whose kind needs
	// several, by interrupt id.
	approvals map[string][]string
}

// loadTask reads a task and everything about it.
func (d *desk) loadTask(ctx context.Context, id string) (*taskData, error) {
	return d.loadTaskSince(ctx, id, nil)
}

// loadTaskSince is loadTask that reuses the events of an earlier load of
// the same task (events never change once committed) and reads only the
// newer ones.
func (d *desk) loadTaskSince(ctx context.Context, id string, prev *taskData) (*taskData, error) {
	st := d.s.store
	// Events first: whatever is read after them is at least as new, so a
	// snapshot never claims a seq its task row has not caught up with.
	td := &taskData{}
	var after int64
	if prev != nil && prev.task.ID == id && prev.firstSeq <= 1 {
		td.events = slices.Clone(prev.events)
		after = prev.lastSeq
	}
	for {
		evs, err := st.Events(ctx, id, after, 1000)
		if err != nil {
			return nil, err
		}
		td.events = append(td.events, evs...)
		if len(evs) < 1000 {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	if n := len(td.events); n > 0 {
		td.lastSeq = td.events[n-1].Seq
		if n > maxPageEvents {
			td.events = td.events[n-maxPageEvents:]
		}
		td.firstSeq = td.events[0].Seq
	}
	t, err := st.Task(ctx, id)
	if err != nil {
		return nil, err
	}
	td.task = t
	if w, err := d.s.engine.Workflow(t.Workflow); err == nil {
		desc := w.Describe()
		td.desc = &desc
	}
	if td.artifacts, err = st.Artifacts(ctx, id); err != nil {
		return nil, err
	}
	if td.interrupts, err = st.Interrupts(ctx, id); err != nil {
		return nil, err
	}
	if td.decisions, err = st.Decisions(ctx, id); err != nil {
		return nil, err
	}
	if td.approvals, err = st.TaskApprovals(ctx, id); err != nil {
		return nil, err
	}
	cp, err := st.CurrentCheckpoint(ctx, id)
	switch {
	case errors.Is(err, graph.ErrTaskNotFound):
	case err != nil:
		return nil, err
	default:
		td.checkpoint = cp
	}
	for i := range td.interrupts {
		if td.interrupts[i].Status == graph.InterruptPending {
			td.pending = &td.interrupts[i]
		}
	}
	if td.pending != nil && td.pending.Deadline != nil {
		acts, err := st.DeadlineActions(ctx, []string{td.pending.ID})
		if err != nil {
			return nil, err
		}
		td.deadlineAction = acts[td.pending.ID]
	}
	return td, nil
}

// artifactSel is the artifact a page shows: a version, or a diff.
type artifactSel struct {
	Name    string
	Version int
	From    int
}

func parseArtifactSel(q url.Values) artifactSel {
	v, _ := strconv.Atoi(q.Get("v"))
	f, _ := strconv.Atoi(q.Get("from"))
	return artifactSel{Name: q.Get("artifact"), Version: max(v, 0), From: max(f, 0)}
}

// taskPage: GET /tasks/:id — the task with its graph, timeline, artifacts,
// decisions and the pending interrupt.
func (d *desk) taskPage(c echo.Context) error {
	id, err := request.PathID(c)
	if err != nil {
		return response.NotFound("task")
	}
	ctx := c.Request().Context()
	td, err := d.loadTask(ctx, id)
	if err != nil {
		return err
	}
	if err := request.MayRead(request.Principal(c), td.task); err != nil {
		return err
	}
	d.recordView(c, td)
	sel := parseArtifactSel(c.QueryParams())
	page := d.buildTaskPage(ctx, td, sel, userOf(ctx))
	page.Page = d.pageMeta(ctx, td.task.Title, "")
	if err := d.timeTravel(ctx, td, &page); err != nil {
		return err
	}
	if request.IsHX(c) && c.Request().Header.Get("HX-Target") == "artifact-view" {
		// Only what the artifact links swap: the view, and the index for its
		// selection.
		return response.Page(c, http.StatusOK, templ.Join(views.ArtifactDocView(page.Artifacts.View),
			views.ArtifactsIndex(page.Artifacts, false)))
	}
	return response.Page(c, http.StatusOK, views.TaskView(page))
}

// recordView notes the first time a person who may decide the pending
// interrupt opens it: the rubber-stamp flag of the analytics compares it
// with their decision. A failure costs the flag, not the page.
func (d *desk) recordView(c echo.Context, td *taskData) {
	p := request.Principal(c)
	if td.pending == nil || !p.MayDecide(td.pending.Kind) {
		return
	}
	if err := d.s.store.RecordInterruptView(c.Request().Context(), td.pending.ID, p.Name); err != nil {
		d.s.log.Warn("recording an interrupt view", "interrupt", td.pending.ID, "error", err)
	}
}

// buildTaskPage shapes a task's data for the page.
func (d *desk) buildTaskPage(ctx context.Context, td *taskData, sel artifactSel, who deskUser) views.TaskPage {
	t := td.task
	p := views.TaskPage{LastSeq: td.lastSeq, LiveBase: "/tasks/" + t.ID + "/live"}
	p.Head = d.taskHead(td)
	p.Head.CSRF = who.csrf
	if !who.p.Can(auth.RoleOperator) {
		p.Head.CanCancel, p.Head.CanRetry = false, false
	}
	p.Graph = d.taskGraph(td)
	for i := range td.events {
		p.Timeline = append(p.Timeline, timelineItem(&td.events[i]))
	}
	p.State = d.stateView(td)
	p.Artifacts = d.artifactsView(td, sel)
	p.Interrupt = d.interruptView(ctx, td, who)
	p.Decisions = decisionRows(td)
	p.NoDecisions = "No decisions yet."
	if t.Status.Terminal() && len(td.interrupts) == 0 {
		p.NoDecisions = "This task had no gates: it ran to the end without waiting for anyone."
	}
	if t.Status == graph.StatusSucceeded {
		p.Deliverable = d.deliverable(td)
	}
	p.DemoModel = d.s.llmProvider == "scripted" && slices.Contains(d.s.modelWorkflows, t.Workflow)
	return p
}

// deliverableName is the document td's workflow declares it makes for
// people (graph.Builder.Deliverable) when td has it: what a finished task
// shows first and what its artifact viewer opens on (the slogan, not its
// review). "" for none.
func deliverableName(td *taskData) string {
	if td.desc == nil || td.desc.Deliverable == "" {
		return ""
	}
	for i := range td.artifacts {
		if td.artifacts[i].Name == td.desc.Deliverable {
			return td.desc.Deliverable
		}
	}
	return ""
}

// deliverable is the latest version of td's deliverable, rendered.
func (d *desk) deliverable(td *taskData) *views.Deliverable {
	name := deliverableName(td)
	if name == "" {
		return nil
	}
	var cur *graph.Artifact
	for i := range td.artifacts {
		if a := &td.artifacts[i]; a.Name == name && (cur == nil || a.Version > cur.Version) {
			cur = a
		}
	}
	return &views.Deliverable{Name: cur.Name, ContentType: cur.ContentType, Version: cur.Version,
		Rendered: d.render.document(cur.ContentType, cur.Content),
		URL:      "/tasks/" + td.task.ID + "?" + url.Values{"artifact": {cur.Name}}.Encode() + "#artifacts-title"}
}

func (d *desk) taskHead(td *taskData) views.TaskHead {
	t := td.task
	h := views.TaskHead{ID: t.ID, Title: t.Title, Workflow: t.Workflow, WorkflowTitle: t.Workflow, Status: string(t.Status),
		CurrentNode: t.CurrentNode, Error: t.Error, CreatedBy: t.CreatedBy, Created: t.CreatedAt, Updated: t.UpdatedAt,
		Completed: t.CompletedAt, CanCancel: !t.Status.Terminal(), CanRetry: t.Status == graph.StatusFailed,
		Via: response.Via(t)}
	if td.desc != nil {
		h.WorkflowTitle = td.desc.Title
	}
	if t.CompletedAt != nil {
		h.Elapsed = "took " + humanDuration(t.CompletedAt.Sub(t.CreatedAt))
	}
	if len(t.Result) > 0 && string(t.Result) != "null" {
		h.Result = d.render.json(t.Result)
	}
	return h
}

// nodeRuns derives each node's status and runs so far from the events.
func nodeRuns(td *taskData) map[string]nodeRun {
	runs := map[string]nodeRun{}
	open := map[string]bool{}
	for _, ev := range td.events {
		if ev.Type == graph.EventTaskForked {
			// A fork starts with the runs of its source up to the fork
			// point: the event carries them.
			var f struct {
				Iterations map[string]int `json:"iterations"`
			}
			_ = json.Unmarshal(ev.Data, &f)
			for name, n := range f.Iterations {
				if n > 0 {
					runs[name] = nodeRun{Status: "done", Iteration: n}
				}
			}
			continue
		}
		if ev.Node == "" {
			continue
		}
		r := runs[ev.Node]
		switch ev.Type {
		case graph.EventNodeStarted:
			r.Iteration = max(r.Iteration, ev.Iteration)
			r.Status = "running"
			open[ev.Node] = true
		case graph.EventNodeCompleted:
			r.Iteration = max(r.Iteration, ev.Iteration)
			r.Status = "done"
			open[ev.Node] = false
		case graph.EventNodeFailed:
			r.Iteration = max(r.Iteration, ev.Iteration)
			r.Status = "failed"
			open[ev.Node] = false
		}
		runs[ev.Node] = r
	}
	status := td.task.Status
	for name, r := range runs {
		if r.Status == "running" && status != graph.StatusRunning {
			// A run that started but is not going on now: asked a
			// question (waiting), lost to a crash or cancelled.
			switch {
			case status == graph.StatusWaiting && td.pending != nil && td.pending.Node == name:
				r.Status = "waiting"
			case status == graph.StatusFailed:
				r.Status = "failed"
			case r.Iteration > 1:
				r.Status = "done"
			default:
				r.Status = "pending"
			}
		}
		runs[name] = r
	}
	if td.pending != nil {
		r := runs[td.pending.Node]
		r.Status = "waiting"
		runs[td.pending.Node] = r
	}
	if status == graph.StatusRunning && td.task.CurrentNode != "" {
		if r, ok := runs[td.task.CurrentNode]; ok && open[td.task.CurrentNode] {
			r.Status = "running"
			runs[td.task.CurrentNode] = r
		}
	}
	return runs
}

func (d *desk) taskGraph(td *taskData) views.Graph {
	if td.desc == nil {
		return views.Graph{}
	}
	return layoutGraph(*td.desc, nodeRuns(td))
}

func (d *desk) stateView(td *taskData) views.StateView {
	cp := td.checkpoint
	if cp == nil {
		return views.StateView{}
	}
	return views.StateView{Present: true, Step: cp.Step, LastNode: cp.LastNode, NextNode: cp.NextNode, Updated: cp.UpdatedAt,
		JSON: d.render.state(cp.State), Size: byteSize(len(cp.State))}
}

// artifactsView lists the artifacts and picks the one shown: the
// selection, else the document under decision, else the newest.
func (d *desk) artifactsView(td *taskData, sel artifactSel) views.ArtifactsView {
	t := td.task
	av := views.ArtifactsView{TaskID: t.ID}
	follows := sel == artifactSel{}
	byName := map[string][]graph.Artifact{}
	var names []string
	var newest *graph.Artifact
	for i := range td.artifacts {
		a := td.artifacts[i]
		if _, ok := byName[a.Name]; !ok {
			names = append(names, a.Name)
		}
		byName[a.Name] = append(byName[a.Name], a)
		if newest == nil || a.CreatedAt.After(newest.CreatedAt) {
			newest = &td.artifacts[i]
		}
	}
	if len(names) == 0 {
		av.View.Follows = follows // filled in live once there is one
		return av
	}
	for _, vs := range byName {
		sort.Slice(vs, func(i, j int) bool { return vs[i].Version < vs[j].Version })
	}
	chosen := sel.Name
	if _, ok := byName[chosen]; !ok {
		chosen = ""
		if td.pending != nil && td.pending.Payload.Artifact != nil {
			if _, ok := byName[td.pending.Payload.Artifact.Name]; ok {
				chosen = td.pending.Payload.Artifact.Name
			}
		}
		if chosen == "" && td.task.Status.Terminal() {
			chosen = deliverableName(td)
		}
		if chosen == "" {
			chosen = newest.Name
		}
		sel = artifactSel{Name: chosen}
	}
	vs := byName[chosen]
	cur := vs[len(vs)-1]
	for _, a := range vs {
		if a.Version == sel.Version {
			cur = a
		}
	}
	base := "/tasks/" + t.ID
	link := func(name string, v, from int) string {
		q := url.Values{"artifact": {name}}
		if v > 0 {
			q.Set("v", strconv.Itoa(v))
		}
		if from > 0 {
			q.Set("from", strconv.Itoa(from))
		}
		return base + "?" + q.Encode()
	}
	for _, name := range names {
		an := views.ArtifactName{Name: name, Selected: name == chosen, URL: link(name, 0, 0)}
		for _, a := range byName[name] {
			an.Latest = a.Version
			an.Versions = append(an.Versions, views.ArtifactVersion{Version: a.Version, Node: a.Node, Iteration: a.Iteration,
				Created: a.CreatedAt, URL: link(name, a.Version, 0), Selected: name == chosen && a.Version == cur.Version})
		}
		av.Names = append(av.Names, an)
	}
	doc := views.ArtifactDoc{Present: true, TaskID: t.ID, Name: cur.Name, ContentType: cur.ContentType,
		Version: cur.Version, Node: cur.Node, Iteration: cur.Iteration, Created: cur.CreatedAt,
		ViewURL: link(cur.Name, cur.Version, 0), Endpoint: base, Follows: follows}
	for _, a := range vs {
		doc.Versions = append(doc.Versions, a.Version)
	}
	if cur.Version > 1 {
		doc.DiffURL = link(cur.Name, cur.Version, cur.Version-1)
	}
	var from *graph.Artifact
	for i := range vs {
		if sel.From > 0 && vs[i].Version == sel.From && sel.From != cur.Version {
			from = &vs[i]
		}
	}
	underDecision := sel.Version == 0 && sel.From == 0 && td.pending != nil && td.pending.Payload.Artifact != nil &&
		td.pending.Payload.Artifact.Name == cur.Name && td.pending.Payload.Artifact.Content == cur.Content
	switch {
	case from != nil:
		doc.From = from.Version
		doc.Diff = lineDiff(from.Content, cur.Content)
	case underDecision:
		doc.ShownAbove = true
	default:
		doc.Rendered = d.render.document(cur.ContentType, cur.Content)
	}
	av.View = doc
	return av
}

// interruptKey identifies what the decision area shows (the approvals
// so far included: each one changes it).
func interruptKey(td *taskData) string {
	if td.pending != nil {
		// What the area shows of the interrupt in time: its claim, its
		// overdue mark and escalation level.
		k := "p:" + td.pending.ID + ":" + td.pending.ClaimedBy + ":" + strconv.FormatBool(td.pending.Overdue) + ":" +
			strconv.Itoa(td.pending.EscalationLevel)
		if n := len(td.approvals[td.pending.ID]); n > 0 {
			return k + ":" + strconv.Itoa(n)
		}
		return k
	}
	if n := len(td.decisions); n > 0 {
		return "d:" + td.decisions[n-1].ID + ":" + string(td.task.Status)
	}
	return "s:" + string(td.task.Status)
}

// interruptView is the decision area as who sees it: only the forms they
// may use, with the session's CSRF token.
func (d *desk) interruptView(ctx context.Context, td *taskData, who deskUser) views.InterruptView {
	return d.interruptViewCaps(td, who.p.Name, d.capsFor(ctx, who.p, td), who.csrf)
}

// interruptViewCaps is the decision area for caps; csrf "" leaves the
// token to the page's script (the copy live pages share).
func (d *desk) interruptViewCaps(td *taskData, name string, caps areaCaps, csrf string) views.InterruptView {
	v := views.InterruptView{TaskID: td.task.ID, Key: interruptKey(td), Reviewer: name, Status: string(td.task.Status)}
	if n := len(td.decisions); n > 0 {
		o := outcomeOf(td, &td.decisions[n-1])
		v.Outcome = &o
	}
	v.Thread = thread(td, d.render.md)
	if td.pending != nil {
		v.Pending = d.pendingForm(td, td.pending)
		withCaps(v.Pending, caps)
		v.Pending.Approvals = d.approvalsLine(td)
		v.Pending.CSRF = csrf
	}
	return v
}

// outcomeOf reports a decision.
func outcomeOf(td *taskData, dec *graph.Decision) views.Outcome {
	o := views.Outcome{InterruptID: dec.InterruptID, Action: dec.Action, Verb: response.Verb(dec.Action), By: dec.DecidedBy,
		At: dec.DecidedAt, Feedback: dec.Feedback, Title: "Decision"}
	for _, itr := range td.interrupts {
		if itr.ID == dec.InterruptID {
			o.Title = itr.Payload.Title
		}
	}
	if dec.Action == graph.ActionRespond && o.Feedback == "" {
		// A request's typed answer (SPEC §17), as a line to read.
		if f, _ := response.FormOf(td.task); f != nil {
			o.Feedback = answerOf(td, dec)
		}
	}
	return o
}

// pendingForm shapes the open interrupt, with the changes since the
// version the reviewer rejected.
func (d *desk) pendingForm(td *taskData, itr *graph.Interrupt) *views.PendingForm {
	p := &views.PendingForm{InterruptID: itr.ID, Kind: itr.Kind, Node: itr.Node, Type: itr.Payload.Type,
		Title: itr.Payload.Title, Question: itr.Payload.Question, Iteration: itr.Iteration, Created: itr.CreatedAt,
		Errors: map[string]string{}, Deadline: itr.Deadline, Overdue: itr.Overdue, Level: itr.EscalationLevel,
		ClaimedBy: itr.ClaimedBy, PayloadSHA256: itr.PayloadSHA256}
	if itr.Deadline != nil {
		p.DueIn = dueIn(time.Until(*itr.Deadline))
		if td.pending != nil && td.pending.ID == itr.ID {
			p.OnTimeout = td.deadlineAction
		}
	}
	for _, a := range itr.Payload.Actions {
		switch a {
		case graph.ActionApprove:
			p.CanApprove = true
		case graph.ActionReject:
			p.CanReject = true
		case graph.ActionEdit:
			p.CanEdit = true
		case graph.ActionRespond:
			p.CanRespond = true
		}
	}
	// An approval request (SPEC §16–17): who asked, its description, the
	// controls of its typed answer.
	if asked, err := response.AskedOf(td.task, d.render.md); err != nil {
		d.s.log.Warn("reading an approval request", "task", td.task.ID, "error", err)
	} else if asked != nil {
		p.Request = &asked.Info
		if p.CanRespond {
			p.Fields = response.AnswerFields(asked.Form, nil, nil)
		}
	}
	if a := itr.Payload.Artifact; a != nil {
		p.ArtifactName, p.ContentType, p.Raw = a.Name, a.ContentType, a.Content
		p.Rendered = d.render.document(a.ContentType, a.Content)
		// The previous gate of this node: what the reviewer rejected.
		for i := len(td.interrupts) - 1; i >= 0; i-- {
			prev := td.interrupts[i]
			if prev.ID == itr.ID || prev.Node != itr.Node || prev.Iteration >= itr.Iteration || prev.Payload.Artifact == nil {
				continue
			}
			if prev.Payload.Artifact.Name == a.Name {
				diff := lineDiff(prev.Payload.Artifact.Content, a.Content)
				p.Changes, p.ChangesFrom = &diff, prev.Iteration
			}
			break
		}
	}
	return p
}

// thread is the questions asked and answered in this task, in order.
func thread(td *taskData, md *markdown.Renderer) []views.ThreadMessage {
	byItr := map[string]*graph.Decision{}
	for i := range td.decisions {
		byItr[td.decisions[i].InterruptID] = &td.decisions[i]
	}
	var out []views.ThreadMessage
	for _, itr := range td.interrupts {
		if itr.Payload.Type != graph.InterruptQuestion || itr.Payload.Question == "" {
			continue
		}
		if itr.Status == graph.InterruptPending {
			continue // shown with the form
		}
		out = append(out, views.ThreadMessage{From: nodeLabelOf(itr.Node), Text: itr.Payload.Question,
			HTML: response.QuestionHTML(td.task.Workflow, itr.Payload.Question, md), At: itr.CreatedAt})
		if dec := byItr[itr.ID]; dec != nil {
			text := answerOf(td, dec)
			if text == "" {
				text = response.Verb(dec.Action)
			}
			// People's answers on the right, the agent's questions on the left.
			out = append(out, views.ThreadMessage{From: dec.DecidedBy, Mine: true, Text: text, At: dec.DecidedAt})
		}
	}
	return out
}

// answerOf is the text of a decision's value (a JSON string; a request's
// typed answer as "Label: value" parts) or its feedback.
func answerOf(td *taskData, dec *graph.Decision) string {
	if len(dec.Value) > 0 && string(dec.Value) != "null" {
		var s string
		if json.Unmarshal(dec.Value, &s) == nil {
			return s
		}
		if f, err := response.FormOf(td.task); err == nil && f != nil {
			return response.AnswerText(f, dec.Value)
		}
		return string(dec.Value)
	}
	return dec.Feedback
}

func decisionRows(td *taskData) []views.DecisionRow {
	titles := map[string]graph.Interrupt{}
	for _, itr := range td.interrupts {
		titles[itr.ID] = itr
	}
	var out []views.DecisionRow
	for i := len(td.decisions) - 1; i >= 0; i-- { // newest first
		dec := td.decisions[i]
		itr := titles[dec.InterruptID]
		fb := dec.Feedback
		if dec.Action == graph.ActionRespond {
			fb = answerOf(td, &dec)
		}
		out = append(out, views.DecisionRow{InterruptID: dec.InterruptID, Title: itr.Payload.Title, Kind: itr.Kind, Node: itr.Node, Iteration: itr.Iteration,
			Action: dec.Action, Verb: response.Sentence(response.Verb(dec.Action)), By: dec.DecidedBy, At: dec.DecidedAt, Feedback: fb,
			Edited: dec.Action == graph.ActionEdit})
	}
	for i := range out {
		out[i].Verb = strings.TrimSuffix(out[i].Verb, ".")
	}
	return out
}

// timelineItem shapes one event.
func timelineItem(ev *graph.Event) views.TimelineItem {
	it := views.TimelineItem{Seq: ev.Seq, Type: ev.Type, Node: ev.Node, Phase: ev.Phase, Iteration: ev.Iteration, At: ev.At,
		Tone: "info"}
	var data map[string]any
	_ = json.Unmarshal(ev.Data, &data)
	str := func(k string) string { s, _ := data[k].(string); return s }
	node := nodeLabelOf(ev.Node)
	switch ev.Type {
	case graph.EventTaskCreated:
		it.Summary, it.Who = "Task created", str("created_by")
	case graph.EventTaskForked:
		step, _ := data["step"].(float64)
		it.Summary, it.Who = fmt.Sprintf("Forked from task %s at step %d", shortTaskID(str("source_task_id")), int(step)), str("created_by")
		if p, ok := data["patch"]; ok {
			if b, err := json.MarshalIndent(p, "", "  "); err == nil {
				it.Detail = []views.DetailPart{{Label: "State patch (JSON merge patch)", Text: string(b)}}
			}
		}
	case graph.EventNodeStarted:
		it.Summary = "Started " + node
		if ev.Iteration > 1 {
			it.Summary = fmt.Sprintf("Started %s again (iteration %d)", node, ev.Iteration)
		}
	case graph.EventNodeCompleted:
		it.Summary, it.Tone = "Completed "+node, "good"
	case graph.EventNodeFailed:
		it.Summary, it.Tone, it.Quote = node+" failed", "bad", str("error")
	case graph.EventNodeRetrying:
		it.Summary, it.Tone, it.Quote = "Retrying "+node, "warn", str("error")
	case graph.EventLLMCall:
		it.Tone = "muted"
		it.Summary = "LLM call"
		if r := str("role"); r != "" {
			it.Summary += " · " + r
		}
		if m := str("model"); m != "" {
			it.Summary += " · " + m
		}
		if ms, ok := data["duration_ms"].(float64); ok {
			it.Duration, it.BarPct = humanMillis(int64(ms)), barPct(int64(ms))
		}
		if e := str("error"); e != "" {
			it.Quote, it.Tone = e, "warn"
		}
		if p := str("prompt"); p != "" {
			it.Detail = append(it.Detail, views.DetailPart{Label: "Prompt", Text: p})
		}
		if r := str("reply"); r != "" {
			it.Detail = append(it.Detail, views.DetailPart{Label: "Reply", Text: r})
		}
	case graph.EventInterruptRaised:
		it.Tone = "warn"
		it.Summary = "Waiting: " + str("title")
	case graph.EventDecisionRecorded:
		a := str("action")
		it.Summary = response.Sentence(response.Verb(a))
		it.Summary = strings.TrimSuffix(it.Summary, ".")
		it.Who, it.Quote = str("decided_by"), str("feedback")
		it.Tone = "good"
		if a == graph.ActionReject {
			it.Tone = "bad"
		}
	case graph.EventApprovalRecorded:
		n, _ := data["approvals"].(float64)
		req, _ := data["required"].(float64)
		it.Summary, it.Who, it.Tone = "Approved ("+auth.Progress(int(n), int(req))+")", str("approved_by"), "good"
	case graph.EventTaskWaiting:
		it.Summary, it.Tone = "Task waits for a decision", "muted"
	case graph.EventTaskCompleted:
		it.Summary, it.Tone = "Task succeeded", "good"
	case graph.EventTaskFailed:
		it.Summary, it.Tone, it.Quote = "Task failed", "bad", str("error")
	case graph.EventTaskCancelled:
		// reason: "resolved by alice" when a LangGraph client marked it resolved.
		it.Summary, it.Tone, it.Who, it.Quote = "Task cancelled", "bad", str("cancelled_by"), str("reason")
	case graph.EventTaskRetried:
		it.Summary, it.Who = "Task retried", str("retried_by")
	case graph.EventArtifactCreated:
		it.Summary, it.Tone = "Produced "+str("name"), "muted"
	case postgres.EventInterruptClaimed:
		it.Summary, it.Who, it.Tone = "Claimed", str("actor"), "muted"
	case postgres.EventInterruptReleased:
		it.Summary, it.Who, it.Tone = "Claim released", str("actor"), "muted"
	case postgres.EventInterruptTakenOver:
		it.Summary, it.Who, it.Quote = "Claim taken over from "+str("previous"), str("actor"), str("reason")
	case postgres.EventInterruptReminder:
		it.Summary, it.Tone = "Reminder: "+str("offset")+" before the deadline", "muted"
	case postgres.EventInterruptEscalated:
		it.Summary = "Escalated: " + escalatedTo(data)
	case postgres.EventInterruptOverdue:
		it.Summary, it.Tone = "Overdue: the deadline passed (waited "+str("waited")+")", "bad"
	case postgres.EventInterruptExpired:
		it.Summary, it.Tone, it.Who = "Expired: the deadline passed ("+str("on_timeout")+")", "bad", str("actor")
	default:
		it.Summary = ev.Type
	}
	if ev.DurationMS != nil {
		it.Duration, it.BarPct = humanMillis(*ev.DurationMS), barPct(*ev.DurationMS)
	}
	return it
}

// barPct places a duration on a log scale: 10 ms → 0, 1 s → 40, 10 min → 100.
func barPct(ms int64) int {
	if ms <= 10 {
		return 0
	}
	p := (math.Log10(float64(ms)) - 1) / (math.Log10(600000) - 1) * 100
	return int(min(100, max(0, p)))
}

func humanMillis(ms int64) string {
	if ms < 1000 {
		return fmt.Sprintf("%d ms", ms)
	}
	return humanDuration(time.Duration(ms) * time.Millisecond)
}

func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

func byteSize(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}

// --- forms ---

// decideForm: POST /tasks/:id/decide — records a decision from the page.
// An htmx submit gets the decision area back: the outcome, or the form
// with its errors and input kept (422), or, when someone decided first,
// their decision (409) — never an error page.
func (d *desk) decideForm(c echo.Context) error {
	id, err := request.PathID(c)
	if err != nil {
		return response.NotFound("task")
	}
	ctx := c.Request().Context()
	itrID := strings.TrimSpace(c.FormValue("interrupt_id"))
	action := strings.TrimSpace(c.FormValue("action"))
	feedback := c.FormValue("feedback")
	value := c.FormValue("value")
	seen := strings.TrimSpace(c.FormValue("payload_sha256"))
	who := userOf(ctx)
	// The task and the interrupt named, in one statement: the Decider
	// checks and records on them without reading either again.
	t, itr, err := d.s.store.DecisionSubject(ctx, id, itrID)
	if err != nil {
		return err
	}
	if err := request.MayRead(who.p, t); err != nil {
		return err
	}
	fieldErrs := map[string]string{}
	var raw json.RawMessage
	if strings.TrimSpace(value) != "" {
		raw, _ = json.Marshal(value)
	}
	// A typed answer's controls (SPEC §17), read into typed JSON: the
	// Decider checks it against the request's schema.
	var (
		asked *response.Asked
		conv  map[string]string
	)
	if action == graph.ActionRespond {
		if asked, err = response.AskedOf(t, d.render.md); err != nil {
			return err
		}
		if asked != nil && asked.Form != nil {
			raw, conv = asked.Form.Collect(c.Request().Form)
		}
	}
	// The decision is the signed-in principal's, under the approval policy.
	_, decideErr := d.s.decider.DecideOn(ctx, who.p, auth.Subject{Task: t, Interrupt: itr},
		graph.DecisionInput{InterruptID: itrID, Action: action, Feedback: feedback, Value: raw,
			PayloadSHA256: seen})
	var (
		ve       *graph.ValidationError
		cf       *graph.ConflictError
		fb       *auth.ForbiddenError
		ae       *auth.AnswerError
		problems map[string]string
		late     bool
	)
	status := http.StatusOK
	switch {
	case decideErr == nil:
		if !request.IsHX(c) {
			return c.Redirect(http.StatusSeeOther, "/tasks/"+id+"#decide")
		}
	case errors.As(decideErr, &fb):
		// Refused with the reason (separation of duties, the same approver
		// twice, another kind): the area says why, and changes nothing.
		status = http.StatusForbidden
		fieldErrs[""] = fb.Reason
	case errors.As(decideErr, &ae) && asked != nil && asked.Form != nil:
		// A typed answer that fails its schema: each control says why.
		status = http.StatusUnprocessableEntity
		problems = response.AnswerProblems(asked.Form, ae, conv)
		fieldErrs[""] = problems[""]
		if fieldErrs[""] == "" {
			fieldErrs[""] = response.AnswerNotRecorded
		}
	case errors.As(decideErr, &ve):
		status = http.StatusUnprocessableEntity
		field := ve.Field
		if field != "feedback" && field != "value" {
			field = ""
		}
		fieldErrs[field] = response.DecisionMessage(ve)
	case errors.As(decideErr, &cf), errors.Is(decideErr, graph.ErrInterruptNotFound):
		if errors.Is(decideErr, graph.ErrInterruptNotFound) {
			if _, err := d.s.store.Task(ctx, id); err != nil {
				return err
			}
		}
		status, late = http.StatusConflict, true
	default:
		return decideErr
	}
	td, err := d.loadTask(ctx, id)
	if err != nil {
		return err
	}
	v := d.interruptView(ctx, td, who)
	if late {
		v.Outcome = nil
		for i := range td.decisions {
			if td.decisions[i].InterruptID == itrID {
				o := outcomeOf(td, &td.decisions[i])
				o.Late = true
				v.Outcome = &o
			}
		}
		if v.Outcome == nil && v.Pending != nil {
			v.Pending.Errors[""] = "That decision is no longer open; here is the one that waits now."
		} else if v.Outcome == nil {
			v.Pending = nil
			v.Outcome = &views.Outcome{Title: "Decision", Verb: "closed", By: "the system", Late: true, At: td.task.UpdatedAt}
			if td.task.Status == graph.StatusCancelled {
				v.Outcome.Verb = "withdrawn: the task was cancelled"
			}
		}
	}
	if len(fieldErrs) > 0 && v.Pending != nil && v.Pending.InterruptID == itrID {
		v.Pending.Errors = fieldErrs
		v.Pending.Feedback, v.Pending.Value = feedback, value
		if action == graph.ActionEdit && value != "" {
			v.Pending.Value = value
		}
		if problems != nil && len(v.Pending.Fields) > 0 {
			v.Pending.Fields = response.AnswerFields(asked.Form, c.Request().Form, problems)
		}
	}
	if !request.IsHX(c) {
		page := d.buildTaskPage(ctx, td, artifactSel{}, who)
		page.Page = d.pageMeta(ctx, td.task.Title, "")
		page.Interrupt = v
		return response.Page(c, status, views.TaskView(page))
	}
	return response.Page(c, status, views.InterruptArea(v, false))
}

// cancelForm: POST /tasks/:id/cancel.
func (d *desk) cancelForm(c echo.Context) error {
	return d.transition(c, func(ctx context.Context, id, who string) error { return d.s.store.Cancel(ctx, id, who) })
}

// retryForm: POST /tasks/:id/retry.
func (d *desk) retryForm(c echo.Context) error {
	return d.transition(c, func(ctx context.Context, id, who string) error {
		t, err := d.s.store.Task(ctx, id)
		if err != nil {
			return err
		}
		if err := d.s.engine.ResumableTask(ctx, t); err != nil {
			return err
		}
		if err := d.s.store.Retry(ctx, id, who); err != nil {
			return err
		}
		d.s.wakeRunner()
		return nil
	})
}

// transition runs a cancel or retry; the page learns the outcome live.
func (d *desk) transition(c echo.Context, do func(ctx context.Context, id, who string) error) error {
	id, err := request.PathID(c)
	if err != nil {
		return response.NotFound("task")
	}
	t, err := d.s.store.Task(c.Request().Context(), id)
	if err != nil {
		return err
	}
	if err := request.MayRead(request.Principal(c), t); err != nil {
		return err
	}
	if err := do(c.Request().Context(), id, request.Principal(c).Name); err != nil {
		return err
	}
	if request.IsHX(c) {
		return c.NoContent(http.StatusNoContent)
	}
	return c.Redirect(http.StatusSeeOther, "/tasks/"+id)
}

// artifactsIndex lists the artifacts and their versions with nothing
// selected (the live copy: each page keeps its own selection).
func (d *desk) artifactsIndex(td *taskData) views.ArtifactsView {
	t := td.task
	av := views.ArtifactsView{TaskID: t.ID}
	byName := map[string][]graph.Artifact{}
	var names []string
	for _, a := range td.artifacts {
		if _, ok := byName[a.Name]; !ok {
			names = append(names, a.Name)
		}
		byName[a.Name] = append(byName[a.Name], a)
	}
	base := "/tasks/" + t.ID + "?"
	for _, name := range names {
		vs := byName[name]
		sort.Slice(vs, func(i, j int) bool { return vs[i].Version < vs[j].Version })
		an := views.ArtifactName{Name: name, URL: base + url.Values{"artifact": {name}}.Encode()}
		for _, a := range vs {
			an.Latest = a.Version
			an.Versions = append(an.Versions, views.ArtifactVersion{Version: a.Version, Node: a.Node, Iteration: a.Iteration,
				Created: a.CreatedAt, URL: base + url.Values{"artifact": {name}, "v": {strconv.Itoa(a.Version)}}.Encode()})
		}
		av.Names = append(av.Names, an)
	}
	return av
}

// escalatedTo words an escalation's added deciders.
func escalatedTo(data map[string]any) string {
	var added []string
	if a, ok := data["added"].([]any); ok {
		for _, x := range a {
			if v, ok := x.(string); ok {
				added = append(added, v)
			}
		}
	}
	if len(added) == 0 {
		return "level raised"
	}
	return "now also " + strings.Join(added, ", ")
}
