package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/config"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/workflows/builtin"
)

// stateBlobsVersion is the migration that moved large state fields out of
// the checkpoint rows (00050_state_blobs.sql).
const stateBlobsVersion = 50

// Tasks of every workflow that stops for a person (slogan does not with
// the scripted LLM) wait, some with state fields large
// enough to live in state_blobs. The database goes back to the schema
// before 00050 (its down migration writes every state whole into `state`,
// as rows were before), is checked to be that schema, and is migrated up
// again; every task then resumes on its decision and reaches its next
// wait or its end, and the checkpoints it writes store large fields apart.
func TestMigrationStateBlobsResumesWaitingTasks(t *testing.T) {
	r := newMigrationRig(t)
	ctx, pool := r.ctx, r.pool
	store := postgres.NewStore(pool, postgres.Options{})
	e := r.engine(t, store)

	// A long text makes the fields that carry it large (> 2 KB).
	long := strings.Repeat("The reviewer must see every requirement of this feature spelled out. ", 60)
	creates := []graph.NewTask{
		{Workflow: "feature", Input: js(t, map[string]any{"description": long}),
			Options: js(t, map[string]any{"gates": map[string]bool{"allowPrd": false, "allowPlan": false, "allowMerge": false}})},
		{Workflow: "feature", Input: js(t, map[string]any{"description": "A short feature."}),
			Options: js(t, map[string]any{"gates": map[string]bool{"allowPrd": true, "allowPlan": false, "allowMerge": false}})},
		{Workflow: "sdd", Input: js(t, map[string]any{"project_brief": long}),
			Options: js(t, map[string]any{"gates": map[string]bool{"allowSdd": false}})},
		{Workflow: "pm", Input: js(t, map[string]any{"description": long, "acceptance_criteria": []string{"it works", "it is tested"}}),
			Options: js(t, map[string]any{"gates": map[string]bool{"allowPlan": false}})},
		{Workflow: "analyze", Input: js(t, map[string]any{"query": "why do the approvals take long?"})},
	}
	tasks := runToGates(ctx, t, e, creates, nil)
	var blobs int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM state_blobs`).Scan(&blobs); err != nil {
		t.Fatal(err)
	}
	if blobs == 0 {
		t.Fatal("no state field was large enough to be stored apart: the test proves nothing")
	}
	before := map[string]json.RawMessage{}
	for _, w := range tasks {
		cp, err := store.CurrentCheckpoint(ctx, w.id)
		if err != nil {
			t.Fatal(err)
		}
		before[w.id] = cp.State
	}

	// Back to the schema before 00050: the rows hold whole states.
	r.migrateBelow(t, stateBlobsVersion)
	var cols int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE column_name = 'state_refs' OR table_name = 'state_blobs'`).Scan(&cols); err != nil {
		t.Fatal(err)
	}
	if cols != 0 {
		t.Fatalf("%d columns of 00050 left after migrating down", cols)
	}
	for _, w := range tasks {
		var state json.RawMessage
		if err := pool.QueryRow(ctx, `SELECT state FROM workflow_checkpoints WHERE task_id = $1`, w.id).Scan(&state); err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, state, before[w.id]) {
			t.Errorf("%s: state before 00050 differs from the state read after it", w.workflow)
		}
	}

	r.migrateUp(t)
	e = r.engine(t, postgres.NewStore(pool, postgres.Options{}))
	for _, w := range tasks {
		decideAndRun(ctx, t, e, w, nil)
	}
	// The checkpoints written since store their large fields apart again.
	var named int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM workflow_checkpoints WHERE state_refs <> '{}'`).Scan(&named); err != nil {
		t.Fatal(err)
	}
	if named == 0 {
		t.Error("no checkpoint written after the migration names a blob")
	}
}

// waitingTask is a task waiting at a gate for a person.
type waitingTask struct {
	id, workflow string
	itr          *graph.Interrupt
}

// gateTasks start tasks of three workflows that stop for a person at
// their first gate.
func gateTasks(t *testing.T) []graph.NewTask {
	return []graph.NewTask{
		{Workflow: "feature", Input: js(t, map[string]any{"description": "Export the audit log."}),
			Options: js(t, map[string]any{"gates": map[string]bool{"allowPrd": false, "allowPlan": false, "allowMerge": false}})},
		{Workflow: "sdd", Input: js(t, map[string]any{"project_brief": "A billing service."}),
			Options: js(t, map[string]any{"gates": map[string]bool{"allowSdd": false}})},
		{Workflow: "analyze", Input: js(t, map[string]any{"query": "why do the approvals take long?"})},
	}
}

// runToGates creates each task and runs it to its first wait, under the
// fence fence gives it (nil: no lease, fence 0).
func runToGates(ctx context.Context, t *testing.T, e *graph.Engine, creates []graph.NewTask, fence func(id string) int64) []waitingTask {
	t.Helper()
	var tasks []waitingTask
	for _, nt := range creates {
		task, err := e.Create(ctx, nt)
		if err != nil {
			t.Fatalf("create %s: %v", nt.Workflow, err)
		}
		var f int64
		if fence != nil {
			f = fence(task.ID)
		}
		out, err := e.Run(ctx, task.ID, f)
		if err != nil || out.Status != graph.StatusWaiting || out.Interrupt == nil {
			t.Fatalf("%s: %+v %v", nt.Workflow, out, err)
		}
		tasks = append(tasks, waitingTask{id: task.ID, workflow: nt.Workflow, itr: out.Interrupt})
	}
	return tasks
}

// decideAndRun approves w's interrupt (answers it, for a question) and
// runs the task on, under the fence fence gives it once decided (nil: no
// lease, fence 0), to its next wait or its end.
func decideAndRun(ctx context.Context, t *testing.T, e *graph.Engine, w waitingTask, fence func(id string) int64) {
	t.Helper()
	in := graph.DecisionInput{InterruptID: w.itr.ID, Action: graph.ActionApprove}
	if w.itr.Payload.Type == graph.InterruptQuestion {
		in = graph.DecisionInput{InterruptID: w.itr.ID, Action: graph.ActionRespond, Value: js(t, "yes, go on")}
	}
	if _, err := e.Decide(ctx, w.id, in); err != nil {
		t.Fatalf("%s: decide %s: %v", w.workflow, w.itr.ID, err)
	}
	var f int64
	if fence != nil {
		f = fence(w.id)
	}
	out, err := e.Run(ctx, w.id, f)
	if err != nil {
		t.Fatalf("%s: resume: %v", w.workflow, err)
	}
	switch {
	case out.Status == graph.StatusSucceeded:
	case out.Status == graph.StatusWaiting && out.Interrupt != nil && out.Interrupt.ID != w.itr.ID:
	default:
		t.Errorf("%s: after the decision: %+v", w.workflow, out)
	}
}

func js(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// migrationRig is where the migration tests start: a database at the
// newest schema and the product's workflows on the scripted LLM.
type migrationRig struct {
	ctx  context.Context
	pool *pgxpool.Pool
	wfs  []graph.Workflow
}

func newMigrationRig(t *testing.T) *migrationRig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return &migrationRig{ctx: ctx, pool: pgtest.NewPool(t), wfs: scriptedWorkflows(t)}
}

// engine is an engine of the rig's workflows over store.
func (r *migrationRig) engine(t *testing.T, store *postgres.Store) *graph.Engine {
	t.Helper()
	e, err := graph.NewEngine(store, r.wfs)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// migrateBelow migrates down until version is no longer applied.
func (r *migrationRig) migrateBelow(t *testing.T, version int64) {
	t.Helper()
	for r.appliedVersion(t) >= version {
		if err := postgres.MigrateDown(r.ctx, r.pool); err != nil {
			t.Fatal(err)
		}
	}
}

// migrateUp applies every migration.
func (r *migrationRig) migrateUp(t *testing.T) {
	t.Helper()
	if err := postgres.Migrate(r.ctx, r.pool); err != nil {
		t.Fatal(err)
	}
}

// appliedVersion is the newest migration applied.
func (r *migrationRig) appliedVersion(t *testing.T) int64 {
	t.Helper()
	ms, err := postgres.Migrations(r.ctx, r.pool)
	if err != nil {
		t.Fatal(err)
	}
	var v int64
	for _, m := range ms {
		if m.Applied {
			v = max(v, m.Version)
		}
	}
	return v
}

// scriptedWorkflows are the product's workflows on the scripted LLM.
func scriptedWorkflows(t *testing.T) []graph.Workflow {
	t.Helper()
	p, err := builtin.Provider(config.LLM{Provider: "scripted"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wfs, err := builtin.Workflows(p, config.LLM{})
	if err != nil {
		t.Fatal(err)
	}
	return wfs
}
