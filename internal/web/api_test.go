package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/web/api"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
)

// TestHappyPath walks a feature task through its three gates over the API,
// with one rejection, advancing it with engine.Run as a worker would.
func TestHappyPath(t *testing.T) {
	t.Parallel()
	b := setup(t)

	r := b.do(t, http.MethodPost, "/api/v1/tasks", featureTask(map[string]bool{}))
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var raw map[string]json.RawMessage
	r.json(t, &raw)
	for _, k := range []string{"id", "workflow", "title", "status", "current_node", "input", "options", "pending_interrupt",
		"result", "error", "created_at", "updated_at", "completed_at", "definition_version", "definition_changed", "forked_from"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("task JSON lacks %q: %s", k, r.body)
		}
	}
	if len(raw) != 16 {
		t.Errorf("task JSON has %d keys, want 16: %s", len(raw), r.body)
	}
	var task api.Task
	r.json(t, &task)
	if task.Status != "queued" || task.Workflow != "feature" || task.CurrentNode != feature.NodeAnalyze ||
		task.PendingInterrupt != nil || string(task.Result) != "null" || task.Error != nil || task.CompletedAt != nil {
		t.Errorf("created task = %+v", task)
	}
	if want := graph.DefaultTitle("feature", json.RawMessage(`{"description":`+strconv.Quote(featuretest.DefaultDescription)+`}`)); task.Title != want {
		t.Errorf("default title = %q, want %q", task.Title, want)
	}
	if loc := r.header.Get("Location"); loc != "/api/v1/tasks/"+task.ID {
		t.Errorf("Location = %q", loc)
	}
	if _, err := time.Parse(time.RFC3339Nano, task.CreatedAt); err != nil || !strings.HasSuffix(task.CreatedAt, "Z") {
		t.Errorf("created_at %q is not RFC 3339 UTC: %v", task.CreatedAt, err)
	}
	if b.wakes.Load() != 1 {
		t.Errorf("wakes after create = %d, want 1", b.wakes.Load())
	}

	gates := []struct {
		kind, node, artifact string
		reject               bool
	}{
		{feature.GatePRD, feature.NodeRequirements, feature.SpecFile, false},
		{feature.GatePlan, feature.NodePlan, feature.PlanFile, true},
		{feature.GatePlan, feature.NodePlan, feature.PlanFile, false},
		{feature.GateMerge, feature.NodeMerge, feature.MergeFile, false},
	}
	for i, g := range gates {
		if out := b.run(t, task.ID); out.Status != graph.StatusWaiting {
			t.Fatalf("gate %d: run = %+v, want waiting", i, out)
		}
		got := b.getTask(t, task.ID)
		p := got.PendingInterrupt
		if got.Status != "waiting" || p == nil {
			t.Fatalf("gate %d: task = %+v, want waiting with an interrupt", i, got)
		}
		if p.Kind != g.kind || p.Node != g.node || p.Status != "pending" || p.TaskID != task.ID ||
			p.Payload.Artifact == nil || p.Payload.Artifact.Name != g.artifact || !slices.Contains(p.Payload.Actions, "approve") {
			t.Fatalf("gate %d: interrupt = %+v", i, p)
		}
		// The inbox shows it with its task.
		r := b.do(t, http.MethodGet, "/api/v1/interrupts", nil)
		var inbox struct{ Interrupts []api.Interrupt }
		r.json(t, &inbox)
		if len(inbox.Interrupts) != 1 || inbox.Interrupts[0].ID != p.ID || inbox.Interrupts[0].Task == nil ||
			*inbox.Interrupts[0].Task != (api.TaskRef{ID: task.ID, Title: task.Title, Workflow: "feature"}) {
			t.Fatalf("gate %d: inbox = %s", i, r.body)
		}

		body := map[string]any{"interrupt_id": p.ID, "action": "approve"}
		if g.reject {
			body = map[string]any{"interrupt_id": p.ID, "action": "reject", "feedback": "Split phase 2 in two."}
		}
		after := b.decide(t, task.ID, body)
		if after.Status != "queued" || after.PendingInterrupt != nil {
			t.Fatalf("gate %d: task after decision = %+v, want queued without interrupt", i, after)
		}
	}
	if out := b.run(t, task.ID); out.Status != graph.StatusSucceeded {
		t.Fatalf("last run = %+v, want succeeded", out)
	}
	done := b.getTask(t, task.ID)
	if done.Status != "succeeded" || done.CompletedAt == nil || string(done.Result) == "null" || done.PendingInterrupt != nil {
		t.Fatalf("finished task = %+v", done)
	}
	if w := b.wakes.Load(); w != 5 {
		t.Errorf("wakes = %d, want 5 (create + 4 decisions)", w)
	}

	t.Run("Events", func(t *testing.T) {
		var evs struct{ Events []api.Event }
		b.do(t, http.MethodGet, "/api/v1/tasks/"+task.ID+"/events", nil).json(t, &evs)
		if len(evs.Events) < 10 || evs.Events[0].Type != graph.EventTaskCreated ||
			evs.Events[len(evs.Events)-1].Type != graph.EventTaskCompleted {
			t.Fatalf("events: %d, first/last wrong", len(evs.Events))
		}
		for i, ev := range evs.Events {
			if ev.Seq != int64(i+1) || ev.TaskID != task.ID {
				t.Fatalf("event %d = %+v", i, ev)
			}
		}
		var page struct{ Events []api.Event }
		b.do(t, http.MethodGet, "/api/v1/tasks/"+task.ID+"/events?after=3&limit=2", nil).json(t, &page)
		if len(page.Events) != 2 || page.Events[0].Seq != 4 || page.Events[1].Seq != 5 {
			t.Fatalf("after=3&limit=2: %+v", page.Events)
		}
	})
	t.Run("Artifacts", func(t *testing.T) {
		var arts struct{ Artifacts []api.Artifact }
		b.do(t, http.MethodGet, "/api/v1/tasks/"+task.ID+"/artifacts", nil).json(t, &arts)
		plans := 0
		for _, a := range arts.Artifacts {
			if a.Name == feature.PlanFile {
				plans++
			}
		}
		if plans < 2 {
			t.Fatalf("want every version of plan.yaml (rejected once), got %d in %d artifacts", plans, len(arts.Artifacts))
		}
	})
	t.Run("Decisions", func(t *testing.T) {
		var ds struct{ Decisions []api.Decision }
		b.do(t, http.MethodGet, "/api/v1/tasks/"+task.ID+"/decisions", nil).json(t, &ds)
		var actions []string
		for _, d := range ds.Decisions {
			actions = append(actions, d.Action)
			if d.DecidedBy != auth.BootstrapName {
				t.Errorf("decided_by = %q", d.DecidedBy)
			}
		}
		if want := []string{"approve", "reject", "approve", "approve"}; !slices.Equal(actions, want) {
			t.Fatalf("decisions = %v, want %v", actions, want)
		}
	})
	t.Run("Checkpoints", func(t *testing.T) {
		var cps struct{ Checkpoints []api.Checkpoint }
		b.do(t, http.MethodGet, "/api/v1/tasks/"+task.ID+"/checkpoints", nil).json(t, &cps)
		if len(cps.Checkpoints) < 10 || cps.Checkpoints[0].Reason != "start" {
			t.Fatalf("checkpoints = %+v", cps.Checkpoints)
		}
		for _, cp := range cps.Checkpoints {
			if cp.State != nil {
				t.Fatalf("list carries state: %+v", cp)
			}
		}
		step := cps.Checkpoints[2].Step
		var one api.Checkpoint
		r := b.do(t, http.MethodGet, fmt.Sprintf("/api/v1/tasks/%s/checkpoints/%d", task.ID, step), nil)
		r.json(t, &one)
		if one.Step != step || len(one.State) == 0 || !json.Valid(one.State) {
			t.Fatalf("checkpoint %d: %s", step, r.body)
		}
		var st struct {
			State      map[string]any `json:"state"`
			LastNodeID string         `json:"last_node_id"`
			Step       int            `json:"step"`
			UpdatedAt  string         `json:"updated_at"`
		}
		b.do(t, http.MethodGet, "/api/v1/tasks/"+task.ID+"/state", nil).json(t, &st)
		if st.LastNodeID != feature.NodeMerge || st.Step != cps.Checkpoints[len(cps.Checkpoints)-1].Step ||
			st.State["description"] != featuretest.DefaultDescription {
			t.Fatalf("state = %+v", st)
		}
	})
	t.Run("Workflows", func(t *testing.T) {
		r := b.do(t, http.MethodGet, "/api/v1/workflows", nil)
		var wf struct {
			Workflows []struct {
				Name        string            `json:"name"`
				Title       string            `json:"title"`
				Description string            `json:"description"`
				Nodes       []json.RawMessage `json:"nodes"`
				Edges       []struct{ From, To, Condition string }
				Gates       []struct{ Node, Kind, Option string }
				InputSchema map[string]any `json:"input_schema"`
				Mermaid     string         `json:"mermaid"`
			}
		}
		r.json(t, &wf)
		// request is served but unlisted: its tasks are made by
		// /api/v1/requests.
		if len(wf.Workflows) != 2 || wf.Workflows[0].Name != "feature" || wf.Workflows[1].Name == "request" {
			t.Fatalf("workflows: %s", r.body)
		}
		f := wf.Workflows[0]
		if len(f.Nodes) != 10 || len(f.Edges) != 10 || len(f.Gates) != 3 || f.InputSchema["type"] != "object" ||
			!strings.Contains(f.Mermaid, "requirements") || f.Title == "" {
			t.Fatalf("feature workflow: %+v", f)
		}
	})
	t.Run("ResolvedInbox", func(t *testing.T) {
		var inbox struct{ Interrupts []api.Interrupt }
		b.do(t, http.MethodGet, "/api/v1/interrupts?status=resolved", nil).json(t, &inbox)
		if len(inbox.Interrupts) != 4 {
			t.Fatalf("resolved interrupts = %d, want 4", len(inbox.Interrupts))
		}
		for i := 1; i < len(inbox.Interrupts); i++ {
			if inbox.Interrupts[i].CreatedAt < inbox.Interrupts[i-1].CreatedAt {
				t.Fatalf("inbox not oldest first")
			}
		}
		b.do(t, http.MethodGet, "/api/v1/interrupts?status=resolved&kind=plan", nil).json(t, &inbox)
		if len(inbox.Interrupts) != 2 {
			t.Fatalf("resolved plan interrupts = %d, want 2", len(inbox.Interrupts))
		}
		b.do(t, http.MethodGet, "/api/v1/interrupts?status=resolved&limit=1", nil).json(t, &inbox)
		if len(inbox.Interrupts) != 1 || inbox.Interrupts[0].Kind != "prd" {
			t.Fatalf("limit=1: %+v", inbox.Interrupts)
		}
	})
}

// TestCancelAndRetry: cancel cancels the pending interrupt; retry resumes a
// failed task.
func TestCancelAndRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)

	w := b.waitingTask(t)
	r := b.do(t, http.MethodPost, "/api/v1/tasks/"+w.ID+"/cancel", nil)
	var got api.Task
	r.json(t, &got)
	if r.status != http.StatusAccepted || got.Status != "cancelled" || got.PendingInterrupt != nil || got.CompletedAt == nil {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	var inbox struct{ Interrupts []api.Interrupt }
	b.do(t, http.MethodGet, "/api/v1/interrupts?status=cancelled", nil).json(t, &inbox)
	if len(inbox.Interrupts) != 1 || inbox.Interrupts[0].ID != w.PendingInterrupt.ID {
		t.Fatalf("cancelled inbox: %+v", inbox.Interrupts)
	}

	b.stub.Fail(feature.RoleAnalyze, nil, 0)
	f := b.create(t, featureTask(nil))
	if out := b.run(t, f.ID); out.Status != graph.StatusFailed {
		t.Fatalf("run: %+v, want failed", out)
	}
	failed := b.getTask(t, f.ID)
	if failed.Error == nil || *failed.Error == "" {
		t.Fatalf("failed task has no error: %+v", failed)
	}
	b.stub.Recover(feature.RoleAnalyze)
	wakes := b.wakes.Load()
	r = b.do(t, http.MethodPost, "/api/v1/tasks/"+f.ID+"/retry", nil)
	r.json(t, &got)
	if r.status != http.StatusAccepted || got.Status != "queued" || got.Error != nil {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	if b.wakes.Load() != wakes+1 {
		t.Errorf("retry did not wake the runner")
	}
	if out := b.run(t, f.ID); out.Status != graph.StatusSucceeded {
		t.Fatalf("run after retry: %+v", out)
	}
}

// TestBadInput: every bad request gets its status, code and field, and
// changes nothing in the database.
func TestBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)

	waiting := b.waitingTask(t)
	other := b.waitingTask(t)
	// A resolved interrupt: decided, not yet run.
	decided := b.waitingTask(t)
	b.decide(t, decided.ID, map[string]any{"interrupt_id": decided.PendingInterrupt.ID, "action": "approve"})
	finished := b.create(t, featureTask(nil))
	if out := b.run(t, finished.ID); out.Status != graph.StatusSucceeded {
		t.Fatalf("run: %+v", out)
	}
	itr := waiting.PendingInterrupt.ID
	tasks := "/api/v1/tasks"
	decisions := tasks + "/" + waiting.ID + "/decisions"
	desc := featuretest.DefaultDescription

	cases := []struct {
		name         string
		method, path string
		body         any
		status       int
		code, field  string
	}{
		{"UnknownWorkflow", "POST", tasks, `{"workflow":"nope","input":{}}`, 400, response.CodeUnknownWorkflow, "workflow"},
		{"MissingWorkflow", "POST", tasks, `{"input":{"description":"x"}}`, 400, response.CodeBadRequest, "workflow"},
		{"MissingInputField", "POST", tasks, `{"workflow":"feature","input":{}}`, 422, response.CodeInvalidInput, "input.description"},
		{"NoInput", "POST", tasks, `{"workflow":"feature"}`, 422, response.CodeInvalidInput, "input.description"},
		{"EmptyDescription", "POST", tasks, `{"workflow":"feature","input":{"description":"  "}}`, 422, response.CodeInvalidInput, "input.description"},
		{"InputWrongType", "POST", tasks, `{"workflow":"feature","input":{"description":5}}`, 422, response.CodeInvalidInput, "input.description"},
		{"InputNotObject", "POST", tasks, `{"workflow":"feature","input":"text"}`, 422, response.CodeInvalidInput, "input"},
		{"InputUnknownField", "POST", tasks, `{"workflow":"feature","input":{"description":"x","colour":"red"}}`, 422, response.CodeInvalidInput, "input.colour"},
		{"WrongType", "POST", tasks, `{"workflow":5,"input":{}}`, 400, response.CodeBadRequest, "workflow"},
		{"TitleWrongType", "POST", tasks, `{"workflow":"feature","title":["a"],"input":{"description":"x"}}`, 400, response.CodeBadRequest, "title"},
		{"UnknownField", "POST", tasks, fmt.Sprintf(`{"workflow":"feature","input":{"description":%q},"priority":1}`, desc), 400, response.CodeBadRequest, "priority"},
		{"UnknownGate", "POST", tasks, fmt.Sprintf(`{"workflow":"feature","input":{"description":%q},"options":{"gates":{"allowAll":true}}}`, desc), 400, response.CodeBadRequest, "options.gates.allowAll"},
		{"OptionsWrongType", "POST", tasks, fmt.Sprintf(`{"workflow":"feature","input":{"description":%q},"options":{"gates":true}}`, desc), 400, response.CodeBadRequest, "options"},
		{"TitleTooLong", "POST", tasks, map[string]any{"workflow": "feature", "title": strings.Repeat("t", 201), "input": map[string]any{"description": desc}}, 400, response.CodeBadRequest, "title"},
		{"TrailingData", "POST", tasks, fmt.Sprintf(`{"workflow":"feature","input":{"description":%q}} {}`, desc), 400, response.CodeBadRequest, ""},
		{"NotJSON", "POST", tasks, `{"workflow":`, 400, response.CodeBadRequest, ""},
		{"EmptyBody", "POST", tasks, "", 400, response.CodeBadRequest, ""},
		{"ArrayBody", "POST", tasks, `[]`, 400, response.CodeBadRequest, ""},
		{"OversizedBody", "POST", tasks, map[string]any{"workflow": "feature", "input": map[string]any{"description": strings.Repeat("x", response.MaxBody)}}, 413, response.CodeTooLarge, ""},
		{"OversizedChunkedBody", "POST", tasks, &chunked{s: fmt.Sprintf(`{"workflow":"feature","input":{"description":%q}}`, strings.Repeat("x", response.MaxBody))}, 413, response.CodeTooLarge, ""},

		{"UnknownAction", "POST", decisions, map[string]any{"interrupt_id": itr, "action": "maybe"}, 400, response.CodeBadRequest, "action"},
		{"MissingAction", "POST", decisions, map[string]any{"interrupt_id": itr}, 400, response.CodeBadRequest, "action"},
		{"RejectWithoutFeedback", "POST", decisions, map[string]any{"interrupt_id": itr, "action": "reject"}, 400, response.CodeBadRequest, "feedback"},
		{"RejectBlankFeedback", "POST", decisions, map[string]any{"interrupt_id": itr, "action": "reject", "feedback": "  "}, 400, response.CodeBadRequest, "feedback"},
		{"EditWithoutValue", "POST", decisions, map[string]any{"interrupt_id": itr, "action": "edit"}, 400, response.CodeBadRequest, "value"},
		{"EditBrokenSpec", "POST", decisions, map[string]any{"interrupt_id": itr, "action": "edit", "value": "not: [yaml"}, 400, response.CodeBadRequest, "value"},
		{"ActionNotOffered", "POST", decisions, map[string]any{"interrupt_id": itr, "action": "respond", "value": "x"}, 400, response.CodeBadRequest, "action"},
		{"MissingInterruptID", "POST", decisions, map[string]any{"action": "approve"}, 400, response.CodeBadRequest, "interrupt_id"},
		{"MalformedInterruptID", "POST", decisions, map[string]any{"interrupt_id": "nope", "action": "approve"}, 400, response.CodeBadRequest, "interrupt_id"},
		{"DecisionUnknownField", "POST", decisions, map[string]any{"interrupt_id": itr, "action": "approve", "by": "me"}, 400, response.CodeBadRequest, "by"},
		{"DecisionWrongType", "POST", decisions, map[string]any{"interrupt_id": itr, "action": "reject", "feedback": 3}, 400, response.CodeBadRequest, "feedback"},
		{"OtherTasksInterrupt", "POST", decisions, map[string]any{"interrupt_id": other.PendingInterrupt.ID, "action": "approve"}, 404, response.CodeNotFound, "interrupt_id"},
		{"UnknownInterrupt", "POST", decisions, map[string]any{"interrupt_id": graph.NewID(), "action": "approve"}, 404, response.CodeNotFound, "interrupt_id"},
		{"DecisionUnknownTask", "POST", tasks + "/" + graph.NewID() + "/decisions", map[string]any{"interrupt_id": itr, "action": "approve"}, 404, response.CodeNotFound, ""},
		{"ResolvedInterrupt", "POST", tasks + "/" + decided.ID + "/decisions", map[string]any{"interrupt_id": decided.PendingInterrupt.ID, "action": "approve"}, 409, response.CodeConflict, "interrupt_id"},
		{"DecisionMalformedTask", "POST", tasks + "/x/decisions", map[string]any{"interrupt_id": itr, "action": "approve"}, 400, response.CodeBadRequest, "id"},

		{"MalformedID", "GET", tasks + "/not-a-uuid", nil, 400, response.CodeBadRequest, "id"},
		{"UnknownTask", "GET", tasks + "/" + graph.NewID(), nil, 404, response.CodeNotFound, ""},
		{"UnknownTaskEvents", "GET", tasks + "/" + graph.NewID() + "/events", nil, 404, response.CodeNotFound, ""},
		{"UnknownTaskState", "GET", tasks + "/" + graph.NewID() + "/state", nil, 404, response.CodeNotFound, ""},
		{"UnknownTaskArtifacts", "GET", tasks + "/" + graph.NewID() + "/artifacts", nil, 404, response.CodeNotFound, ""},
		{"UnknownTaskCheckpoints", "GET", tasks + "/" + graph.NewID() + "/checkpoints", nil, 404, response.CodeNotFound, ""},
		{"UnknownTaskCheckpoint", "GET", tasks + "/" + graph.NewID() + "/checkpoints/1", nil, 404, response.CodeNotFound, ""},
		{"UnknownTaskStream", "GET", tasks + "/" + graph.NewID() + "/stream", nil, 404, response.CodeNotFound, ""},
		{"StreamWithoutUpgrade", "GET", tasks + "/" + waiting.ID + "/stream", nil, 400, response.CodeBadRequest, ""},
		{"BadStep", "GET", tasks + "/" + waiting.ID + "/checkpoints/first", nil, 400, response.CodeBadRequest, "step"},
		{"UnknownStep", "GET", tasks + "/" + waiting.ID + "/checkpoints/9999", nil, 404, response.CodeNotFound, "step"},
		{"BadAfter", "GET", tasks + "/" + waiting.ID + "/events?after=-1", nil, 400, response.CodeBadRequest, "after"},
		{"BadEventLimit", "GET", tasks + "/" + waiting.ID + "/events?limit=0", nil, 400, response.CodeBadRequest, "limit"},
		{"CancelFinished", "POST", tasks + "/" + finished.ID + "/cancel", nil, 409, response.CodeConflict, ""},
		{"CancelUnknown", "POST", tasks + "/" + graph.NewID() + "/cancel", nil, 404, response.CodeNotFound, ""},
		{"CancelMalformed", "POST", tasks + "/12/cancel", nil, 400, response.CodeBadRequest, "id"},
		{"RetryWaiting", "POST", tasks + "/" + waiting.ID + "/retry", nil, 409, response.CodeConflict, ""},
		{"RetrySucceeded", "POST", tasks + "/" + finished.ID + "/retry", nil, 409, response.CodeConflict, ""},
		{"BadStatusFilter", "GET", tasks + "?status=done", nil, 400, response.CodeBadRequest, "status"},
		{"BadLimit", "GET", tasks + "?limit=abc", nil, 400, response.CodeBadRequest, "limit"},
		{"LimitTooLarge", "GET", tasks + "?limit=201", nil, 400, response.CodeBadRequest, "limit"},
		{"LimitZero", "GET", tasks + "?limit=0", nil, 400, response.CodeBadRequest, "limit"},
		{"BadCursor", "GET", tasks + "?cursor=bm9wZQ", nil, 400, response.CodeBadRequest, "cursor"},
		{"GarbageCursor", "GET", tasks + "?cursor=***", nil, 400, response.CodeBadRequest, "cursor"},
		{"BadInboxStatus", "GET", "/api/v1/interrupts?status=open", nil, 400, response.CodeBadRequest, "status"},
		{"BadInboxLimit", "GET", "/api/v1/interrupts?limit=501", nil, 400, response.CodeBadRequest, "limit"},
		{"UnknownRoute", "GET", "/api/v1/nothing", nil, 404, response.CodeNotFound, ""},
		{"WrongMethod", "DELETE", tasks + "/" + waiting.ID, nil, 405, response.CodeMethodNotAllowed, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := b.fingerprint(t)
			r := b.do(t, tc.method, tc.path, tc.body)
			if r.status != tc.status {
				t.Fatalf("status = %d, want %d: %s", r.status, tc.status, r.body)
			}
			e := r.apiErr(t)
			if e.Code != tc.code || e.Field != tc.field || e.Message == "" {
				t.Errorf("error = %+v, want code %q field %q", e, tc.code, tc.field)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q", ct)
			}
			if after := b.fingerprint(t); after != before {
				t.Errorf("rows changed:\n before %s\n after  %s", before, after)
			}
		})
	}
	// Nothing wrote a decision on the waiting task, nor woke a runner for
	// a refused request.
	if got := b.getTask(t, waiting.ID); got.Status != "waiting" || got.PendingInterrupt == nil || got.PendingInterrupt.ID != itr {
		t.Fatalf("waiting task changed: %+v", got)
	}
}

// chunked is a body of unknown length (sent chunked, no Content-Length).
type chunked struct {
	s   string
	off int
}

func (c *chunked) Read(p []byte) (int, error) {
	if c.off >= len(c.s) {
		return 0, io.EOF
	}
	n := copy(p, c.s[c.off:])
	c.off += n
	return n, nil
}

// TestAuth: every /api/v1 route refuses requests without the token or with
// a wrong one; the probes are open.
func TestAuth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	routes := apiRoutes(b.srv)
	if len(routes) < 15 {
		t.Fatalf("only %d routes", len(routes))
	}
	for _, rt := range routes {
		path := strings.NewReplacer(":id", graph.NewID(), ":step", "1").Replace(rt.path)
		for _, auth := range []string{"", "Bearer wrong-token", "Bearer " + testToken + "x", "Basic " + testToken, testToken, "Bearer"} {
			var body any
			if rt.method == http.MethodPost {
				body = "{}"
			}
			r := b.doAuth(t, rt.method, path, body, auth)
			if r.status != http.StatusUnauthorized {
				t.Errorf("%s %s with %q: %d, want 401", rt.method, rt.path, auth, r.status)
				continue
			}
			if e := r.apiErr(t); e.Code != response.CodeUnauthorized {
				t.Errorf("%s %s: code %q", rt.method, rt.path, e.Code)
			}
			if r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s: no WWW-Authenticate", rt.method, rt.path)
			}
		}
	}
	// An unknown route under /api/v1 is 401 too: authentication comes first.
	if r := b.doAuth(t, "GET", "/api/v1/nothing", nil, ""); r.status != http.StatusUnauthorized {
		t.Errorf("unknown route without token: %d", r.status)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		r := b.doAuth(t, "GET", p, nil, "")
		var body map[string]string
		r.json(t, &body)
		if r.status != http.StatusOK || body["status"] != "ok" {
			t.Errorf("%s: %d %s", p, r.status, r.body)
		}
	}
	// The right token works.
	if r := b.do(t, "GET", "/api/v1/tasks", nil); r.status != http.StatusOK {
		t.Errorf("with token: %d %s", r.status, r.body)
	}

	t.Run("NoTokenConfigured", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{token: ""})
		for _, auth := range []string{"", "Bearer ", "Bearer " + testToken} {
			if r := b.doAuth(t, "GET", "/api/v1/tasks", nil, auth); r.status != http.StatusUnauthorized {
				t.Errorf("with %q: %d, want 401", auth, r.status)
			}
		}
		if r := b.doAuth(t, "GET", "/healthz", nil, ""); r.status != http.StatusOK {
			t.Errorf("healthz: %d", r.status)
		}
	})
}

// TestReadyz: 503 with the error when the check fails.
func TestReadyz(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: testToken, tweak: func(s *Server) {
		s.ready = func(context.Context) error { return fmt.Errorf("database unreachable: boom") }
	}})
	r := b.doAuth(t, "GET", "/readyz", nil, "")
	var body map[string]string
	r.json(t, &body)
	if r.status != http.StatusServiceUnavailable || body["status"] != "unavailable" || !strings.Contains(body["error"], "boom") {
		t.Fatalf("readyz: %d %s", r.status, r.body)
	}
}

type route struct{ method, path string }

// apiRoutes lists the routes under /api/v1 (not echo's not-found catch-alls).
func apiRoutes(s *Server) []route {
	var out []route
	for _, r := range s.Echo().Routes() {
		if strings.HasPrefix(r.Path, "/api/v1/") && !strings.HasSuffix(r.Path, "*") && r.Method != "echo_route_not_found" {
			out = append(out, route{r.Method, r.Path})
		}
	}
	return out
}

// TestConcurrentDecisions: twenty decisions race on one interrupt over real
// HTTP; exactly one wins.
func TestConcurrentDecisions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.waitingTask(t)
	const n = 20
	start := make(chan struct{})
	statuses := make([]int, n)
	codes := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			r := b.do(t, http.MethodPost, "/api/v1/tasks/"+w.ID+"/decisions",
				map[string]any{"interrupt_id": w.PendingInterrupt.ID, "action": "approve"})
			statuses[i] = r.status
			if r.status != http.StatusAccepted {
				codes[i] = r.apiErr(t).Code
			}
		})
	}
	close(start)
	wg.Wait()
	won, lost := 0, 0
	for i, s := range statuses {
		switch {
		case s == http.StatusAccepted:
			won++
		case s == http.StatusConflict && codes[i] == response.CodeConflict:
			lost++
		default:
			t.Errorf("request %d: %d %s", i, s, codes[i])
		}
	}
	if won != 1 || lost != n-1 {
		t.Fatalf("202s = %d, 409s = %d; want 1 and %d", won, lost, n-1)
	}
	if got := b.count(t, "decisions"); got != 1 {
		t.Fatalf("decisions rows = %d, want 1", got)
	}
	var events int
	if err := b.pool.QueryRow(context.Background(),
		"SELECT count(*) FROM task_events WHERE type = 'decision.recorded'").Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 1 {
		t.Fatalf("decision.recorded events = %d, want 1", events)
	}
}

// TestPagination: keyset pages, newest first, no repeats; filters.
func TestPagination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var created []api.Task
	for i := range 7 {
		req := featureTask(nil)
		if i%3 == 2 {
			req = map[string]any{"workflow": "linear", "title": fmt.Sprintf("linear %d", i)}
		}
		created = append(created, b.create(t, req))
	}
	// Cancel two feature tasks.
	for _, i := range []int{0, 4} {
		if r := b.do(t, http.MethodPost, "/api/v1/tasks/"+created[i].ID+"/cancel", nil); r.status != http.StatusAccepted {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
	}
	// The order the database defines: created_at, then id, descending.
	rows, err := b.pool.Query(context.Background(), "SELECT id::text FROM tasks ORDER BY created_at DESC, id DESC")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	rows.Close()

	pages := func(t *testing.T, query string, limit int) ([]int, []api.Task) {
		t.Helper()
		var sizes []int
		var all []api.Task
		cursor := ""
		for range 20 {
			path := fmt.Sprintf("/api/v1/tasks?limit=%d%s", limit, query)
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			r := b.do(t, "GET", path, nil)
			if r.status != http.StatusOK {
				t.Fatalf("%s: %d %s", path, r.status, r.body)
			}
			var page struct {
				Tasks      []api.Task `json:"tasks"`
				NextCursor *string    `json:"next_cursor"`
			}
			r.json(t, &page)
			sizes = append(sizes, len(page.Tasks))
			all = append(all, page.Tasks...)
			if page.NextCursor == nil {
				return sizes, all
			}
			cursor = *page.NextCursor
		}
		t.Fatal("pagination does not end")
		return nil, nil
	}
	ids := func(ts []api.Task) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}

	sizes, all := pages(t, "", 3)
	if !slices.Equal(sizes, []int{3, 3, 1}) {
		t.Fatalf("page sizes = %v, want [3 3 1]", sizes)
	}
	if !slices.Equal(ids(all), want) {
		t.Fatalf("order = %v, want %v", ids(all), want)
	}
	for i := 1; i < len(all); i++ {
		if all[i].CreatedAt > all[i-1].CreatedAt {
			t.Fatalf("not newest first at %d", i)
		}
	}

	// Exactly the limit: the last page says there is no next one.
	if sizes, _ := pages(t, "", 7); !slices.Equal(sizes, []int{7}) {
		t.Errorf("limit 7: page sizes %v, want [7]", sizes)
	}
	if sizes, all := pages(t, "&status=cancelled", 1); !slices.Equal(sizes, []int{1, 1}) || all[0].Status != "cancelled" {
		t.Errorf("status=cancelled: %v", sizes)
	}
	if sizes, all := pages(t, "&status=queued", 2); !slices.Equal(sizes, []int{2, 2, 1}) ||
		slices.ContainsFunc(all, func(t api.Task) bool { return t.Status != "queued" }) {
		t.Errorf("status=queued: %v", sizes)
	}
	if sizes, all := pages(t, "&workflow=linear", 50); !slices.Equal(sizes, []int{2}) || all[0].Workflow != "linear" ||
		all[0].Title != "linear 5" {
		t.Errorf("workflow=linear: %v %+v", sizes, all)
	}
	if sizes, _ := pages(t, "&workflow=feature&status=queued", 50); !slices.Equal(sizes, []int{3}) {
		t.Errorf("workflow=feature&status=queued: %v", sizes)
	}
	if sizes, _ := pages(t, "&workflow=nothing", 50); !slices.Equal(sizes, []int{0}) {
		t.Errorf("workflow=nothing: %v", sizes)
	}

	// A waiting task carries its pending interrupt in the list too.
	w := b.waitingTask(t)
	var page struct{ Tasks []api.Task }
	b.do(t, "GET", "/api/v1/tasks?status=waiting", nil).json(t, &page)
	if len(page.Tasks) != 1 || page.Tasks[0].ID != w.ID || page.Tasks[0].PendingInterrupt == nil ||
		page.Tasks[0].PendingInterrupt.Kind != feature.GatePRD {
		t.Fatalf("waiting list: %+v", page.Tasks)
	}
}

// TestOpenAPICoversRoutes: every route of the router is in the document.
func TestOpenAPICoversRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "GET", "/api/v1/openapi.json", nil)
	if r.status != http.StatusOK {
		t.Fatalf("openapi: %d", r.status)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Info    struct{ Version string }              `json:"info"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	r.json(t, &doc)
	if doc.OpenAPI != "3.1.0" || doc.Info.Version != "test" {
		t.Fatalf("openapi %q version %q", doc.OpenAPI, doc.Info.Version)
	}
	n := 0
	for _, rt := range b.srv.Echo().Routes() {
		if rt.Method == "echo_route_not_found" || strings.HasSuffix(rt.Path, "*") {
			continue
		}
		if !strings.HasPrefix(rt.Path, "/api/v1/") && rt.Path != "/healthz" && rt.Path != "/readyz" {
			continue
		}
		n++
		p := openAPIPath(rt.Path)
		ops, ok := doc.Paths[p]
		if !ok {
			t.Errorf("path %s (%s) missing from the document", p, rt.Path)
			continue
		}
		if _, ok := ops[strings.ToLower(rt.Method)]; !ok {
			t.Errorf("%s %s missing from the document", rt.Method, p)
		}
	}
	if n < 17 {
		t.Errorf("only %d routes checked", n)
	}
	// And the document names no route that does not exist.
	routes := map[string]bool{}
	for _, rt := range b.srv.Echo().Routes() {
		routes[strings.ToLower(rt.Method)+" "+openAPIPath(rt.Path)] = true
	}
	for p, ops := range doc.Paths {
		for m := range ops {
			if m == "parameters" {
				continue
			}
			if !routes[m+" "+p] {
				t.Errorf("document has %s %s, the router does not", m, p)
			}
		}
	}
}

// openAPIPath turns echo's /tasks/:id into OpenAPI's /tasks/{id}.
func openAPIPath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, ":") {
			parts[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}
