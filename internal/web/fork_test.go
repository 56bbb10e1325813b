package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/web/api"
)

// taskRows is every row of one task in every table, as JSON text: what
// "the source is untouched" compares.
func (b *bundle) taskRows(t *testing.T, id string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for table, order := range map[string]string{
		"tasks": "id", "workflow_checkpoints": "id", "checkpoint_history": "step", "interrupts": "created_at, id",
		"decisions": "decided_at, id", "task_events": "seq", "artifacts": "name, version", "approvals": "approver",
	} {
		key := "task_id"
		if table == "tasks" {
			key = "id"
		}
		var rows string
		var n int
		err := b.pool.QueryRow(context.Background(),
			`SELECT count(*), coalesce(json_agg(r ORDER BY `+order+`)::text, '') FROM `+table+` r WHERE `+key+` = $1`, id).Scan(&n, &rows)
		if err != nil {
			t.Fatalf("rows of %s: %v", table, err)
		}
		if (table == "tasks" || table == "task_events" || table == "checkpoint_history") && n == 0 {
			t.Fatalf("task %s has no %s rows", id, table)
		}
		out[table] = rows
	}
	return out
}

func (b *bundle) checkpoints(t *testing.T, id string) []api.Checkpoint {
	t.Helper()
	r := b.do(t, http.MethodGet, "/api/v1/tasks/"+id+"/checkpoints", nil)
	if r.status != http.StatusOK {
		t.Fatalf("checkpoints: %d %s", r.status, r.body)
	}
	var out struct{ Checkpoints []api.Checkpoint }
	r.json(t, &out)
	return out.Checkpoints
}

func (b *bundle) events(t *testing.T, id string) []api.Event {
	t.Helper()
	r := b.do(t, http.MethodGet, "/api/v1/tasks/"+id+"/events", nil)
	if r.status != http.StatusOK {
		t.Fatalf("events: %d %s", r.status, r.body)
	}
	var out struct{ Events []api.Event }
	r.json(t, &out)
	return out.Events
}

func TestForkAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := b.waitingTask(t) // at the PRD gate
	// The step before the PRD gate: the checkpoint whose next node is
	// requirements, the gated node.
	step := -1
	for _, cp := range b.checkpoints(t, src.ID) {
		if cp.NextNodeID == "requirements" && cp.LastNodeID != "requirements" {
			step = cp.Step
		}
	}
	if step < 0 {
		t.Fatalf("no checkpoint before the PRD gate in %+v", b.checkpoints(t, src.ID))
	}
	before := b.taskRows(t, src.ID)
	const patched = "PATCHED: let users export their reports as Parquet files"

	r := b.do(t, http.MethodPost, "/api/v1/tasks/"+src.ID+"/fork", map[string]any{
		"step": step, "state": map[string]any{"description": patched}, "title": "Parquet instead"})
	if r.status != http.StatusCreated {
		t.Fatalf("fork: %d %s", r.status, r.body)
	}
	var fork api.Task
	r.json(t, &fork)
	if fork.ID == src.ID || fork.Workflow != "feature" || fork.Title != "Parquet instead" || fork.Status != "queued" ||
		fork.ForkedFrom == nil || *fork.ForkedFrom != (api.ForkRef{TaskID: src.ID, Step: step}) ||
		fork.DefinitionVersion == "" || fork.DefinitionChanged || string(fork.Input) != string(src.Input) {
		t.Fatalf("fork %+v", fork)
	}
	if loc := r.header.Get("Location"); loc != "/api/v1/tasks/"+fork.ID {
		t.Errorf("Location %q", loc)
	}
	if cps := b.checkpoints(t, fork.ID); len(cps) != 1 || cps[0].Step != step || cps[0].Reason != "fork" {
		t.Errorf("fork's first checkpoint: %+v, want step %d", cps, step)
	}

	// The fork runs the PRD with the patched request and waits at its gate.
	if out := b.run(t, fork.ID); out.Status != graph.StatusWaiting || out.Interrupt == nil || out.Interrupt.Kind != "prd" {
		t.Fatalf("fork run: %+v", out)
	}
	got := b.getTask(t, fork.ID)
	if got.PendingInterrupt == nil || got.PendingInterrupt.Kind != "prd" || got.PendingInterrupt.ID == src.PendingInterrupt.ID {
		t.Fatalf("fork waits on %+v", got.PendingInterrupt)
	}
	evs := b.events(t, fork.ID)
	if evs[0].Seq != 1 || evs[0].Type != graph.EventTaskForked {
		t.Fatalf("fork's first event %+v", evs[0])
	}
	var fd struct {
		SourceTaskID string          `json:"source_task_id"`
		Step         int             `json:"step"`
		Patch        json.RawMessage `json:"patch"`
	}
	if err := json.Unmarshal(evs[0].Data, &fd); err != nil || fd.SourceTaskID != src.ID || fd.Step != step || !strings.Contains(string(fd.Patch), "PATCHED") {
		t.Errorf("task.forked data %s", evs[0].Data)
	}
	prompted := false
	for _, e := range evs {
		var d struct{ Role, Prompt string }
		_ = json.Unmarshal(e.Data, &d)
		if e.Type == graph.EventLLMCall && d.Role == "feature.requirements" {
			prompted = strings.Contains(d.Prompt, patched)
		}
	}
	if !prompted {
		t.Errorf("the fork's requirements prompt lacks the patched request")
	}

	// The source: every row as it was, and it links to its fork.
	after := b.taskRows(t, src.ID)
	for table := range before {
		if before[table] != after[table] {
			t.Errorf("the fork changed the source's %s rows:\nbefore %s\nafter  %s", table, before[table], after[table])
		}
	}
	r = b.do(t, http.MethodGet, "/api/v1/tasks/"+src.ID+"/forks", nil)
	var forks api.TaskList
	r.json(t, &forks)
	if r.status != http.StatusOK || len(forks.Tasks) != 1 || forks.Tasks[0].ID != fork.ID {
		t.Errorf("forks of the source: %d %s", r.status, r.body)
	}

	t.Run("AtTheGate", func(t *testing.T) {
		gate := step + 1
		r := b.do(t, http.MethodPost, "/api/v1/tasks/"+src.ID+"/fork", map[string]any{"step": gate})
		var f api.Task
		r.json(t, &f)
		if r.status != http.StatusCreated || f.Status != "waiting" || f.PendingInterrupt == nil ||
			f.PendingInterrupt.Kind != "prd" || f.PendingInterrupt.ID == src.PendingInterrupt.ID ||
			!strings.HasSuffix(f.Title, "(fork of step "+strconv.Itoa(gate)+")") {
			t.Fatalf("fork at the gate: %d %s", r.status, r.body)
		}
		r = b.do(t, http.MethodGet, "/api/v1/tasks/"+src.ID+"/forks", nil)
		var forks api.TaskList
		r.json(t, &forks)
		if len(forks.Tasks) != 2 || forks.Tasks[1].PendingInterrupt == nil || forks.Tasks[1].PendingInterrupt.ID != f.PendingInterrupt.ID {
			t.Errorf("forks list: %s", r.body)
		}
		b.decide(t, f.ID, map[string]any{"interrupt_id": f.PendingInterrupt.ID, "action": "approve"})
	})

	t.Run("Refusals", func(t *testing.T) {
		fp := b.fingerprint(t)
		for _, c := range []struct {
			name   string
			path   string
			body   any
			status int
			field  string
		}{
			{"NoSuchStep", src.ID, map[string]any{"step": 999}, http.StatusNotFound, "step"},
			{"NoSuchTask", graph.NewID(), map[string]any{"step": 1}, http.StatusNotFound, ""},
			{"WrongType", src.ID, map[string]any{"step": step, "state": map[string]any{"description": 42}}, http.StatusUnprocessableEntity, "state.description"},
			{"UnknownField", src.ID, map[string]any{"step": step, "state": map[string]any{"descriptoin": "x"}}, http.StatusUnprocessableEntity, "state.descriptoin"},
			{"EmptyRequest", src.ID, map[string]any{"step": step, "state": map[string]any{"description": nil}}, http.StatusUnprocessableEntity, "state.description"},
			{"NotAnObject", src.ID, map[string]any{"step": step, "state": []int{1}}, http.StatusUnprocessableEntity, "state"},
			{"NoStep", src.ID, map[string]any{"state": map[string]any{}}, http.StatusBadRequest, "step"},
			{"NegativeStep", src.ID, map[string]any{"step": -1}, http.StatusBadRequest, "step"},
			{"LongTitle", src.ID, map[string]any{"step": step, "title": strings.Repeat("x", 201)}, http.StatusBadRequest, "title"},
		} {
			r := b.do(t, http.MethodPost, "/api/v1/tasks/"+c.path+"/fork", c.body)
			if r.status != c.status || r.apiErr(t).Field != c.field {
				t.Errorf("%s: %d %s, want %d naming %q", c.name, r.status, r.body, c.status, c.field)
			}
		}
		if b.fingerprint(t) != fp {
			t.Error("a refused fork changed the database")
		}
	})

	t.Run("RunningSourceConflicts", func(t *testing.T) {
		task := b.create(t, featureTask(map[string]bool{}))
		if _, err := b.store.ClaimTask(context.Background(), "test-worker", task.ID, time.Minute); err != nil {
			t.Fatal(err)
		}
		r := b.do(t, http.MethodPost, "/api/v1/tasks/"+task.ID+"/fork", map[string]any{"step": 0})
		if r.status != http.StatusConflict || !strings.Contains(r.apiErr(t).Message, "running") {
			t.Errorf("fork of a running task: %d %s", r.status, r.body)
		}
	})
}

// serverOver is a second server over b's database with another engine: a
// replica that runs another build of the workflows.
func (b *bundle) serverOver(t *testing.T, engine *graph.Engine, policy ...auth.Policy) string {
	t.Helper()
	p := auth.NewPolicy(nil, nil)
	if len(policy) > 0 {
		p = policy[0]
	}
	srv := New(Deps{Engine: engine, Store: b.store, Hub: b.hub, BootstrapToken: testToken,
		Decider: auth.NewDecider(engine, b.store, p, nil), Version: "test"})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		ts.Close()
	})
	return ts.URL
}

func TestDefinitionChanged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v1, err := graph.NewEngine(b.store, []graph.Workflow{graphtest.Review(1)})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := graph.NewEngine(b.store, []graph.Workflow{graphtest.Review(2)})
	if err != nil {
		t.Fatal(err)
	}
	old, cur := b.serverOver(t, v1), b.serverOver(t, v2)
	at := func(base string) *bundle { return &bundle{pool: b.pool, store: b.store, hub: b.hub, base: base} }

	task := at(old).create(t, map[string]any{"workflow": graphtest.ReviewName, "options": map[string]any{"gates": map[string]any{}}})
	out, err := v1.Run(context.Background(), task.ID, 0)
	if err != nil || out.Interrupt == nil {
		t.Fatalf("run under v1: %+v %v", out, err)
	}
	if got := at(old).getTask(t, task.ID); got.DefinitionChanged || got.DefinitionVersion != graphtest.Review(1).Version() {
		t.Errorf("under v1: changed %v, version %q", got.DefinitionChanged, got.DefinitionVersion)
	}
	got := at(cur).getTask(t, task.ID)
	if !got.DefinitionChanged || got.DefinitionVersion != graphtest.Review(1).Version() {
		t.Errorf("under v2: changed %v, version %q", got.DefinitionChanged, got.DefinitionVersion)
	}

	fp := b.fingerprint(t)
	r := at(cur).do(t, http.MethodPost, "/api/v1/tasks/"+task.ID+"/decisions", map[string]any{
		"interrupt_id": out.Interrupt.ID, "action": "approve"})
	if e := r.apiErr(t); r.status != http.StatusConflict || !strings.Contains(e.Message, `node "review" no longer exists`) {
		t.Fatalf("decision on the removed node: %d %s", r.status, r.body)
	}
	if b.fingerprint(t) != fp {
		t.Error("the refused decision changed the database")
	}
	// Where a review needs two approvers, the first approval is refused
	// too, before it is recorded.
	two := b.serverOver(t, v2, auth.NewPolicy(map[string]int{"review": 2}, nil))
	r = at(two).do(t, http.MethodPost, "/api/v1/tasks/"+task.ID+"/decisions", map[string]any{
		"interrupt_id": out.Interrupt.ID, "action": "approve"})
	if r.status != http.StatusConflict || b.count(t, "approvals") != 0 || b.fingerprint(t) != fp {
		t.Errorf("first of two approvals on the removed node: %d %s, %d approvals recorded", r.status, r.body, b.count(t, "approvals"))
	}
	// A fork from the step before the removed node runs under v2 …
	r = at(cur).do(t, http.MethodPost, "/api/v1/tasks/"+task.ID+"/fork", map[string]any{"step": 1})
	if r.status != http.StatusConflict || !strings.Contains(r.apiErr(t).Message, `"review"`) {
		t.Errorf("fork whose next node is gone: %d %s", r.status, r.body)
	}
	r = at(cur).do(t, http.MethodPost, "/api/v1/tasks/"+task.ID+"/fork", map[string]any{"step": 0})
	var f api.Task
	r.json(t, &f)
	if r.status != http.StatusCreated || f.DefinitionChanged || f.DefinitionVersion != graphtest.Review(2).Version() {
		t.Fatalf("fork from the start under v2: %d %s", r.status, r.body)
	}
	if out, err := v2.Run(context.Background(), f.ID, 0); err != nil || out.Status != graph.StatusSucceeded {
		t.Errorf("fork run under v2: %+v %v", out, err)
	}
}
