package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

type retentionState struct {
	Ask    bool   `json:"ask"`
	Fail   bool   `json:"fail"`
	Path   string `json:"path"`
	Answer string `json:"answer"`
}

// retentionGraph: a → b → c (gated, kind "review", option allowReview) →
// q (asks a question when the input says ask) → d (fails when the input
// says fail) → e → END. Plain nodes around the gate and the question give
// every kind of checkpoint: start, node, node at a gate, decision,
// interrupt, and intermediate node checkpoints a prune may delete.
func retentionGraph(t testing.TB) *graph.Graph[retentionState] {
	t.Helper()
	step := func(name string) graph.NodeFunc[retentionState] {
		return func(ctx context.Context, run *graph.NodeRun, s retentionState) (retentionState, error) {
			s.Path += name
			return s, nil
		}
	}
	g, err := graph.New[retentionState]("retention").
		Node("a", step("a")).
		Node("b", step("b")).
		Node("c", func(ctx context.Context, run *graph.NodeRun, s retentionState) (retentionState, error) {
			s.Path += "c"
			run.Artifact("draft.md", "text/markdown", "draft "+s.Path)
			return s, nil
		}).
		Node("q", func(ctx context.Context, run *graph.NodeRun, s retentionState) (retentionState, error) {
			if s.Ask {
				a, err := run.Ask(graph.Question{Text: "Which colour?"})
				if err != nil {
					return s, err
				}
				s.Answer = a.Text
			}
			s.Path += "q"
			return s, nil
		}).
		Node("d", func(ctx context.Context, run *graph.NodeRun, s retentionState) (retentionState, error) {
			if s.Fail {
				return s, graph.Permanent(errors.New("d fails as asked"))
			}
			s.Path += "d"
			return s, nil
		}).
		Node("e", step("e")).
		Gate("c", graph.Gate[retentionState]{Kind: "review", Option: "allowReview", Artifact: "draft.md",
			OnReject: func(s retentionState, fb string, it int) (retentionState, error) { return s, nil }}).
		Edge("a", "b").Edge("b", "c").Edge("c", "q").Edge("q", "d").Edge("d", "e").Edge("e", graph.END).
		Init(func(in json.RawMessage, _ graph.Options) (retentionState, error) {
			var s retentionState
			err := json.Unmarshal(in, &s)
			return s, err
		}).
		Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

type retentionBundle struct {
	bundle
	t      *testing.T
	engine *graph.Engine
}

func setupRetention(t *testing.T) *retentionBundle {
	t.Helper()
	b := setup(t)
	e, err := graph.NewEngine(b.store, []graph.Workflow{retentionGraph(t)})
	if err != nil {
		t.Fatal(err)
	}
	return &retentionBundle{bundle: b, t: t, engine: e}
}

func (r *retentionBundle) create(input, options string) string {
	r.t.Helper()
	task, err := r.engine.Create(context.Background(), graph.NewTask{Workflow: "retention",
		Input: json.RawMessage(input), Options: json.RawMessage(options)})
	if err != nil {
		r.t.Fatal(err)
	}
	return task.ID
}

func (r *retentionBundle) run(id string, want graph.TaskStatus) graph.Outcome {
	r.t.Helper()
	out, err := r.engine.Run(context.Background(), id, 0)
	if err != nil || out.Status != want {
		r.t.Fatalf("run %s: %+v %v, want %s", id, out, err, want)
	}
	return out
}

func (r *retentionBundle) decide(id string, out graph.Outcome, action, feedback, value string) {
	r.t.Helper()
	in := graph.DecisionInput{InterruptID: out.Interrupt.ID, Action: action, Feedback: feedback, DecidedBy: "ann"}
	if value != "" {
		in.Value = json.RawMessage(value)
	}
	if _, err := r.engine.Decide(context.Background(), id, in); err != nil {
		r.t.Fatal(err)
	}
}

// history lists a task's checkpoints as "step:reason" ("step:reason!" for
// one that names a pending interrupt), in step order.
func (r *retentionBundle) history(id string) string {
	r.t.Helper()
	rows, err := r.pool.Query(context.Background(),
		`SELECT step, reason, pending_interrupt_id IS NOT NULL FROM checkpoint_history WHERE task_id = $1 ORDER BY step`, id)
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var step int
		var reason string
		var pending bool
		if err := rows.Scan(&step, &reason, &pending); err != nil {
			r.t.Fatal(err)
		}
		p := fmt.Sprintf("%d:%s", step, reason)
		if pending {
			p += "!"
		}
		parts = append(parts, p)
	}
	if err := rows.Err(); err != nil {
		r.t.Fatal(err)
	}
	return strings.Join(parts, " ")
}

// otherCounts counts the rows of every table a prune must not touch.
func (r *retentionBundle) otherCounts() string {
	r.t.Helper()
	var parts []string
	for _, tbl := range []string{"tasks", "workflow_checkpoints", "interrupts", "decisions", "task_events", "artifacts"} {
		parts = append(parts, fmt.Sprintf("%s=%d", tbl, r.count(r.t, tbl)))
	}
	return strings.Join(parts, " ")
}

// retentionTasks are the tasks of TestPruneHistory, by what they show.
type retentionTasks struct {
	done, failed, cancelled, waiting, retried, recent string
}

// buildRetentionTasks runs every kind of task through the engine and moves
// the clock of all but the recent one 40 days back.
func (r *retentionBundle) buildRetentionTasks() retentionTasks {
	r.t.Helper()
	ctx := context.Background()
	var ts retentionTasks

	// Succeeded after a rejection, an approval and an answered question.
	ts.done = r.create(`{"ask": true}`, `{"gates": {}}`)
	out := r.run(ts.done, graph.StatusWaiting)
	r.decide(ts.done, out, graph.ActionReject, "more", "")
	out = r.run(ts.done, graph.StatusWaiting)
	r.decide(ts.done, out, graph.ActionApprove, "", "")
	out = r.run(ts.done, graph.StatusWaiting)
	if out.Interrupt.Kind != graph.InterruptQuestion {
		r.t.Fatalf("done: want the question, got %+v", out.Interrupt)
	}
	r.decide(ts.done, out, graph.ActionRespond, "", `"blue"`)
	r.run(ts.done, graph.StatusSucceeded)

	// Failed at d, the gate auto-approved.
	ts.failed = r.create(`{"fail": true}`, `{}`)
	r.run(ts.failed, graph.StatusFailed)

	// Cancelled while waiting at the gate.
	ts.cancelled = r.create(`{}`, `{"gates": {}}`)
	r.run(ts.cancelled, graph.StatusWaiting)
	if err := r.store.Cancel(ctx, ts.cancelled, "ann"); err != nil {
		r.t.Fatal(err)
	}

	// Old but not ended: waiting at the gate.
	ts.waiting = r.create(`{}`, `{"gates": {}}`)
	r.run(ts.waiting, graph.StatusWaiting)

	// Failed long ago, then retried: queued, not ended.
	ts.retried = r.create(`{"fail": true}`, `{}`)
	r.run(ts.retried, graph.StatusFailed)
	if err := r.store.Retry(ctx, ts.retried, "ann"); err != nil {
		r.t.Fatal(err)
	}

	old := []string{ts.done, ts.failed, ts.cancelled, ts.waiting, ts.retried}
	if _, err := r.pool.Exec(ctx, `UPDATE tasks SET created_at = created_at - interval '40 days',
		completed_at = completed_at - interval '40 days' WHERE id = ANY($1::uuid[])`, old); err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.pool.Exec(ctx, `UPDATE checkpoint_history SET created_at = created_at - interval '40 days'
		WHERE task_id = ANY($1::uuid[])`, old); err != nil {
		r.t.Fatal(err)
	}

	// Ended just now.
	ts.recent = r.create(`{}`, `{}`)
	r.run(ts.recent, graph.StatusSucceeded)
	return ts
}

func TestPruneHistory(t *testing.T) {
	t.Parallel()
	r := setupRetention(t)
	ctx := context.Background()
	ts := r.buildRetentionTasks()

	// What the engine wrote. A gate raised after a node run is a node
	// checkpoint naming the interrupt (!), a question an interrupt one.
	before := map[string]string{
		ts.done:      "0:start 1:node 2:node 3:node! 4:decision 5:node! 6:decision 7:interrupt! 8:decision 9:node 10:node 11:node",
		ts.failed:    "0:start 1:node 2:node 3:node 4:node",
		ts.cancelled: "0:start 1:node 2:node 3:node!",
		ts.waiting:   "0:start 1:node 2:node 3:node!",
		ts.retried:   "0:start 1:node 2:node 3:node 4:node",
		ts.recent:    "0:start 1:node 2:node 3:node 4:node 5:node 6:node",
	}
	for id, want := range before {
		if got := r.history(id); got != want {
			t.Fatalf("history of %s before the prune:\n got %s\nwant %s", id, got, want)
		}
	}
	// Kept: the first, the gates (node!), the decisions, the question, the
	// last. Tasks that have not ended, and the recent one, keep everything.
	after := map[string]string{
		ts.done:      "0:start 3:node! 4:decision 5:node! 6:decision 7:interrupt! 8:decision 11:node",
		ts.failed:    "0:start 4:node",
		ts.cancelled: "0:start 3:node!",
		ts.waiting:   before[ts.waiting],
		ts.retried:   before[ts.retried],
		ts.recent:    before[ts.recent],
	}
	const wantRows, wantTasks = 4 + 3 + 2, 3
	others := r.otherCounts()
	history := r.count(t, "checkpoint_history")
	cutoff := time.Now().Add(-30 * 24 * time.Hour)

	dry, err := r.store.PruneHistory(ctx, postgres.HistoryPrune{Before: cutoff, DryRun: true, Actor: "ops"})
	if err != nil || dry != (postgres.HistoryPruned{Rows: wantRows, Tasks: wantTasks}) {
		t.Fatalf("dry run: %+v %v, want %d rows of %d tasks", dry, err, wantRows, wantTasks)
	}
	if n := r.count(t, "checkpoint_history"); n != history {
		t.Fatalf("the dry run deleted rows: %d → %d", history, n)
	}
	for id, want := range before {
		if got := r.history(id); got != want {
			t.Fatalf("history of %s after the dry run: %s", id, got)
		}
	}

	// Chunks of 2 rows, batches of 2 tasks: the loops, not one statement,
	// do the work.
	got, err := r.store.PruneHistory(ctx, postgres.HistoryPrune{Before: cutoff, Actor: "ops", ChunkRows: 2, BatchTasks: 2})
	if err != nil || got != dry {
		t.Fatalf("prune: %+v %v, want %+v as the dry run counted", got, err, dry)
	}
	for id, want := range after {
		if got := r.history(id); got != want {
			t.Errorf("history of %s after the prune:\n got %s\nwant %s", id, got, want)
		}
	}
	if n := r.count(t, "checkpoint_history"); n != history-wantRows {
		t.Errorf("checkpoint_history: %d rows, want %d", n, history-wantRows)
	}
	if got := r.otherCounts(); got != others {
		t.Errorf("the prune changed other tables: %s → %s", others, got)
	}

	// Nothing left to prune: a second prune and a dry run find nothing.
	for _, dryRun := range []bool{false, true} {
		again, err := r.store.PruneHistory(ctx, postgres.HistoryPrune{Before: cutoff, DryRun: dryRun, Actor: "ops"})
		if err != nil || again != (postgres.HistoryPruned{}) {
			t.Errorf("prune again (dry run %v): %+v %v, want nothing", dryRun, again, err)
		}
	}

	// One audit event, for the prune that deleted rows.
	svc := auth.NewService(auth.Config{Store: r.store})
	ev, err := svc.AuditTrail(ctx, auth.AuditFilter{Kind: "history"})
	if err != nil || len(ev) != 1 || ev[0].Actor != "ops" || ev[0].Kind != postgres.AuditHistoryPruned {
		t.Fatalf("audit trail: %+v %v", ev, err)
	}
	var data struct {
		Rows, Tasks int64
		Complete    bool
	}
	if err := json.Unmarshal(ev[0].Data, &data); err != nil || data.Rows != wantRows || data.Tasks != wantTasks || !data.Complete {
		t.Errorf("audit data: %s %v", ev[0].Data, err)
	}
}

// TestPruneHistoryReadsStillWork: what the API and the desk read of a
// pruned task (task, current checkpoint, history, one checkpoint, events,
// artifacts, decisions, interrupts) still reads; a pruned step is not found.
func TestPruneHistoryReadsStillWork(t *testing.T) {
	t.Parallel()
	r := setupRetention(t)
	ctx := context.Background()
	ts := r.buildRetentionTasks()
	events, err := r.store.Events(ctx, ts.done, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.PruneHistory(ctx, postgres.HistoryPrune{Before: time.Now().Add(-24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}

	snap, err := r.store.Load(ctx, ts.done)
	if err != nil || snap.Task.Status != graph.StatusSucceeded || snap.Checkpoint.Step != 11 {
		t.Fatalf("load: %+v %v", snap, err)
	}
	var s retentionState
	if err := json.Unmarshal(snap.Checkpoint.State, &s); err != nil || s.Path != "abccqde" || s.Answer != "blue" {
		t.Fatalf("state: %+v %v", s, err)
	}
	if cp, err := r.store.CurrentCheckpoint(ctx, ts.done); err != nil || cp.Step != 11 {
		t.Fatalf("current checkpoint: %+v %v", cp, err)
	}
	hist, err := r.store.History(ctx, ts.done)
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, h := range hist {
		steps = append(steps, h.Step)
	}
	if want := []int{0, 3, 4, 5, 6, 7, 8, 11}; !slices.Equal(steps, want) {
		t.Fatalf("history steps %v, want %v", steps, want)
	}
	// The state the person reviewed at the second gate, and the last one.
	at5, err := r.store.CheckpointAt(ctx, ts.done, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(at5.State, &s); err != nil || s.Path != "abcc" || at5.Reason != "node" {
		t.Fatalf("checkpoint 5: %+v %+v %v", at5.HistoryEntry, s, err)
	}
	last, err := r.store.CheckpointAt(ctx, ts.done, 11)
	if err != nil || last.NextNode != graph.END || string(last.State) != string(snap.Checkpoint.State) {
		t.Fatalf("checkpoint 11: %+v %v", last, err)
	}
	if _, err := r.store.CheckpointAt(ctx, ts.done, 9); !errors.Is(err, postgres.ErrCheckpointNotFound) {
		t.Fatalf("pruned checkpoint 9: %v, want ErrCheckpointNotFound", err)
	}
	after, err := r.store.Events(ctx, ts.done, 0, 1000)
	if err != nil || len(after) != len(events) {
		t.Fatalf("events: %d then %d (%v)", len(events), len(after), err)
	}
	if arts, err := r.store.Artifacts(ctx, ts.done); err != nil || len(arts) != 2 {
		t.Fatalf("artifacts: %+v %v", arts, err)
	}
	if decs, err := r.store.Decisions(ctx, ts.done); err != nil || len(decs) != 3 {
		t.Fatalf("decisions: %+v %v", decs, err)
	}
	if itrs, err := r.store.Interrupts(ctx, ts.done); err != nil || len(itrs) != 3 {
		t.Fatalf("interrupts: %+v %v", itrs, err)
	}

	// A pruned failed task still retries from its current checkpoint:
	// the pruned rows were never what a task resumes from.
	if err := r.store.Retry(ctx, ts.failed, "ann"); err != nil {
		t.Fatal(err)
	}
	r.run(ts.failed, graph.StatusFailed)
	if got := r.history(ts.failed); got != "0:start 4:node" {
		t.Fatalf("history of the retried task: %s", got)
	}
}

// TestPruneHistoryOneAtATime: a prune that finds the lock taken (another
// replica is pruning) does nothing and says so; a dry run needs no lock.
func TestPruneHistoryOneAtATime(t *testing.T) {
	t.Parallel()
	r := setupRetention(t)
	ctx := context.Background()
	ts := r.buildRetentionTasks()
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(0x6768_7072_756e_6521)); err != nil {
		t.Fatal(err)
	}
	cutoff := time.Now().Add(-24 * time.Hour)
	history := r.history(ts.done)
	if _, err := r.store.PruneHistory(ctx, postgres.HistoryPrune{Before: cutoff}); !errors.Is(err, postgres.ErrPruneBusy) {
		t.Fatalf("prune under another's lock: %v, want ErrPruneBusy", err)
	}
	if got := r.history(ts.done); got != history {
		t.Fatalf("a refused prune deleted rows: %s → %s", history, got)
	}
	if dry, err := r.store.PruneHistory(ctx, postgres.HistoryPrune{Before: cutoff, DryRun: true}); err != nil || dry.Rows != 9 {
		t.Fatalf("dry run under another's lock: %+v %v", dry, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", int64(0x6768_7072_756e_6521)); err != nil {
		t.Fatal(err)
	}
	if got, err := r.store.PruneHistory(ctx, postgres.HistoryPrune{Before: cutoff}); err != nil || got.Rows != 9 {
		t.Fatalf("prune once the lock is free: %+v %v", got, err)
	}
	// The prune gave its lock back: another one takes it.
	if got, err := r.store.PruneHistory(ctx, postgres.HistoryPrune{Before: cutoff}); err != nil || got.Rows != 0 {
		t.Fatalf("second prune: %+v %v", got, err)
	}
}

// TestPruneHistorySince: a prune with Since looks only at the tasks that
// ended in [Since, Before), as the periodic prune does after its first run.
func TestPruneHistorySince(t *testing.T) {
	t.Parallel()
	r := setupRetention(t)
	ctx := context.Background()
	ts := r.buildRetentionTasks()
	day := 24 * time.Hour
	before := time.Now().Add(-30 * day)
	done := r.history(ts.done)
	// The old tasks ended 40 days ago: before Since, so out of reach.
	if got, err := r.store.PruneHistory(ctx, postgres.HistoryPrune{Since: time.Now().Add(-35 * day), Before: before}); err != nil || got.Rows != 0 {
		t.Fatalf("prune since 35 days: %+v %v, want nothing", got, err)
	}
	if got := r.history(ts.done); got != done {
		t.Fatalf("a prune since 35 days pruned a task that ended 40 days ago: %s", got)
	}
	if got, err := r.store.PruneHistory(ctx, postgres.HistoryPrune{Since: time.Now().Add(-45 * day), Before: before}); err != nil ||
		got != (postgres.HistoryPruned{Rows: 9, Tasks: 3}) {
		t.Fatalf("prune since 45 days: %+v %v, want 9 rows of 3 tasks", got, err)
	}
}
