package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

type counterState struct {
	Count    int      `json:"count"`
	Notes    []string `json:"notes"`
	Feedback []string `json:"feedback"`
	Answer   string   `json:"answer"`
}

// testGraph: work → review (gated, kind "review", option allowReview) →
// ask (asks a question) → END.
func testGraph(t testing.TB) *graph.Graph[counterState] {
	t.Helper()
	g, err := graph.New[counterState]("counter").
		Node("work", func(ctx context.Context, run *graph.NodeRun, s counterState) (counterState, error) {
			s.Count++
			s.Notes = append(s.Notes, run.Phase)
			run.Artifact("draft.md", "text/markdown", fmt.Sprintf("draft %d, feedback %v", s.Count, s.Feedback))
			return s, nil
		}).
		Node("ask", func(ctx context.Context, run *graph.NodeRun, s counterState) (counterState, error) {
			a, err := run.Ask(graph.Question{Text: "Which colour?"})
			if err != nil {
				return s, err
			}
			s.Answer = a.Text
			return s, nil
		}).
		Gate("work", graph.Gate[counterState]{Kind: "review", Option: "allowReview", Artifact: "draft.md",
			OnReject: func(s counterState, fb string, it int) (counterState, error) {
				s.Feedback = append(s.Feedback, fb)
				return s, nil
			},
			OnEdit: func(s counterState, content string) (counterState, error) {
				s.Notes = append(s.Notes, "edited:"+content)
				return s, nil
			}}).
		Edge("work", "ask").
		Edge("ask", graph.END).
		Init(func(json.RawMessage, graph.Options) (counterState, error) { return counterState{}, nil }).
		Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

type bundle struct {
	pool  *pgxpool.Pool
	store *postgres.Store
}

func setup(t *testing.T) bundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	return bundle{pool: pool, store: postgres.NewStore(pool, postgres.Options{})}
}

// engine returns a fresh engine over a fresh Store, as after a restart.
func (b bundle) engine(t testing.TB) *graph.Engine {
	t.Helper()
	e, err := graph.NewEngine(postgres.NewStore(b.pool, postgres.Options{}), []graph.Workflow{testGraph(t)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// engineOn is an engine of wfs over the bundle's store.
func (b bundle) engineOn(t testing.TB, wfs []graph.Workflow, opts ...graph.EngineOption) *graph.Engine {
	t.Helper()
	e, err := graph.NewEngine(b.store, wfs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (b bundle) count(t testing.TB, table string) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (b bundle) counts(t testing.TB) string {
	var parts []string
	for _, tbl := range []string{"tasks", "workflow_checkpoints", "checkpoint_history", "interrupts", "decisions", "task_events", "artifacts"} {
		parts = append(parts, fmt.Sprintf("%s=%d", tbl, b.count(t, tbl)))
	}
	return strings.Join(parts, " ")
}

func TestStoreGateQuestionRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	task, err := b.engine(t).Create(ctx, graph.NewTask{Workflow: "counter", Title: "t", Options: json.RawMessage(`{"gates":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.engine(t).Run(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != graph.StatusWaiting || out.Interrupt.Kind != "review" || out.Interrupt.Iteration != 1 {
		t.Fatalf("first run: %+v", out)
	}
	if a := out.Interrupt.Payload.Artifact; a == nil || !strings.HasPrefix(a.Content, "draft 1") {
		t.Fatalf("gate artifact: %+v", a)
	}
	// Reject, resume on a fresh engine: work runs again as iteration 2.
	if _, err := b.engine(t).Decide(ctx, task.ID, graph.DecisionInput{InterruptID: out.Interrupt.ID, Action: "reject", Feedback: "more"}); err != nil {
		t.Fatal(err)
	}
	out2, err := b.engine(t).Run(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if out2.Status != graph.StatusWaiting || out2.Interrupt.Iteration != 2 || out2.Interrupt.ID == out.Interrupt.ID {
		t.Fatalf("after reject: %+v", out2)
	}
	// The first interrupt is resolved: deciding it again conflicts and changes nothing.
	before := b.counts(t)
	_, err = b.engine(t).Decide(ctx, task.ID, graph.DecisionInput{InterruptID: out.Interrupt.ID, Action: "approve"})
	var conflict *graph.ConflictError
	if !errors.As(err, &conflict) || !errors.Is(err, graph.ErrConflict) {
		t.Fatalf("stale decision: got %v, want ConflictError", err)
	}
	if after := b.counts(t); after != before {
		t.Fatalf("stale decision changed rows: %s → %s", before, after)
	}
	// Edit approves an edited draft; the edit becomes a new artifact version.
	if _, err := b.engine(t).Decide(ctx, task.ID, graph.DecisionInput{InterruptID: out2.Interrupt.ID, Action: "edit",
		Value: json.RawMessage(`"my draft"`), DecidedBy: "ann"}); err != nil {
		t.Fatal(err)
	}
	out3, err := b.engine(t).Run(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if out3.Status != graph.StatusWaiting || out3.Interrupt.Kind != "question" || out3.Interrupt.Payload.Question != "Which colour?" {
		t.Fatalf("question: %+v", out3)
	}
	if _, err := b.engine(t).Decide(ctx, task.ID, graph.DecisionInput{InterruptID: out3.Interrupt.ID, Action: "respond",
		Value: json.RawMessage(`"blue"`)}); err != nil {
		t.Fatal(err)
	}
	out4, err := b.engine(t).Run(ctx, task.ID, 0)
	if err != nil || out4.Status != graph.StatusSucceeded {
		t.Fatalf("final run: %+v %v", out4, err)
	}

	snap, err := b.store.Load(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var s counterState
	if err := json.Unmarshal(snap.Checkpoint.State, &s); err != nil {
		t.Fatal(err)
	}
	if s.Count != 2 || s.Answer != "blue" || len(s.Feedback) != 1 || s.Feedback[0] != "more" ||
		strings.Join(s.Notes, ",") != "work,work:2,edited:my draft" {
		t.Fatalf("final state: %+v", s)
	}
	if snap.Task.Status != graph.StatusSucceeded || snap.Task.CompletedAt == nil || len(snap.Task.Result) == 0 {
		t.Fatalf("task: %+v", snap.Task)
	}
	arts, err := b.store.Artifacts(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, a := range arts {
		versions = append(versions, fmt.Sprintf("%s@%d(%d)", a.Name, a.Version, a.Iteration))
	}
	if got := strings.Join(versions, " "); got != "draft.md@1(1) draft.md@2(2) draft.md@3(2)" {
		t.Fatalf("artifact versions: %s", got)
	}
	evs, err := b.store.Events(ctx, task.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: seqs must be gap-free from 1", i, e.Seq)
		}
	}
	if evs[0].Type != graph.EventTaskCreated || evs[len(evs)-1].Type != graph.EventTaskCompleted {
		t.Fatalf("first/last events: %s … %s", evs[0].Type, evs[len(evs)-1].Type)
	}
	decs, err := b.store.Decisions(ctx, task.ID)
	if err != nil || len(decs) != 3 || decs[1].DecidedBy != "ann" {
		t.Fatalf("decisions: %+v %v", decs, err)
	}
	hist, err := b.store.History(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != snap.Checkpoint.Step+1 || hist[0].Reason != "start" || hist[0].Step != 0 {
		t.Fatalf("history: %+v (step %d)", hist, snap.Checkpoint.Step)
	}
}

func TestStoreLeaseLostWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	task, err := b.engine(t).Create(ctx, graph.NewTask{Workflow: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	// Another worker took the task over: the fence moved on.
	if _, err := b.pool.Exec(ctx, "UPDATE tasks SET lease_fence = 7 WHERE id = $1", task.ID); err != nil {
		t.Fatal(err)
	}
	before := b.counts(t)
	_, err = b.engine(t).Run(ctx, task.ID, 0)
	if !errors.Is(err, graph.ErrLeaseLost) {
		t.Fatalf("run with stale fence: got %v, want ErrLeaseLost", err)
	}
	if after := b.counts(t); after != before {
		t.Fatalf("stale writer changed rows: %s → %s", before, after)
	}
	out, err := b.engine(t).Run(ctx, task.ID, 7)
	if err != nil || out.Status != graph.StatusWaiting || out.Interrupt.Kind != "question" {
		t.Fatalf("run with the current fence: %+v %v", out, err)
	}
}

func TestStoreBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	e := b.engine(t)
	t1, err := e.Create(ctx, graph.NewTask{Workflow: "counter", Options: json.RawMessage(`{"gates":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	t2, err := e.Create(ctx, graph.NewTask{Workflow: "counter", Options: json.RawMessage(`{"gates":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	o1, err := e.Run(ctx, t1.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(ctx, t2.ID, 0); err != nil {
		t.Fatal(err)
	}
	before := b.counts(t)
	cases := []struct {
		name  string
		call  func() error
		check func(error) bool
	}{
		{"UnknownWorkflow", func() error { _, err := e.Create(ctx, graph.NewTask{Workflow: "nope"}); return err },
			func(err error) bool {
				return errors.Is(err, graph.ErrUnknownWorkflow) && strings.Contains(err.Error(), `"nope"`)
			}},
		{"BadOptions", func() error {
			_, err := e.Create(ctx, graph.NewTask{Workflow: "counter", Options: json.RawMessage(`{"gates":3}`)})
			return err
		}, func(err error) bool {
			var v *graph.ValidationError
			return errors.As(err, &v) && v.Field == "options"
		}},
		{"InterruptOfAnotherTask", func() error {
			_, err := e.Decide(ctx, t2.ID, graph.DecisionInput{InterruptID: o1.Interrupt.ID, Action: "approve"})
			return err
		}, func(err error) bool { return errors.Is(err, graph.ErrInterruptNotFound) }},
		{"EmptyFeedbackOnReject", func() error {
			_, err := e.Decide(ctx, t1.ID, graph.DecisionInput{InterruptID: o1.Interrupt.ID, Action: "reject", Feedback: "  "})
			return err
		}, func(err error) bool {
			var v *graph.ValidationError
			return errors.As(err, &v) && v.Field == "feedback"
		}},
		{"UnknownAction", func() error {
			_, err := e.Decide(ctx, t1.ID, graph.DecisionInput{InterruptID: o1.Interrupt.ID, Action: "maybe"})
			return err
		}, func(err error) bool {
			var v *graph.ValidationError
			return errors.As(err, &v) && v.Field == "action"
		}},
		{"MalformedInterruptID", func() error {
			_, err := e.Decide(ctx, t1.ID, graph.DecisionInput{InterruptID: "not-a-uuid", Action: "approve"})
			return err
		}, func(err error) bool {
			var v *graph.ValidationError
			return errors.As(err, &v) && v.Field == "interrupt_id"
		}},
		{"UnknownTask", func() error { _, err := e.Run(ctx, graph.NewID(), 0); return err },
			func(err error) bool { return errors.Is(err, graph.ErrTaskNotFound) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil || !tc.check(err) {
				t.Fatalf("got %v", err)
			}
		})
	}
	if after := b.counts(t); after != before {
		t.Fatalf("bad input changed rows: %s → %s", before, after)
	}
}

func TestStoreMalformedStateIsTypedError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	task, err := b.engine(t).Create(ctx, graph.NewTask{Workflow: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `UPDATE workflow_checkpoints SET state = '{"count": "three"}' WHERE task_id = $1`, task.ID); err != nil {
		t.Fatal(err)
	}
	before := b.counts(t)
	_, err = b.engine(t).Run(ctx, task.ID, 0)
	var se *graph.StateError
	if !errors.As(err, &se) || se.TaskID != task.ID {
		t.Fatalf("got %v, want StateError", err)
	}
	if after := b.counts(t); after != before {
		t.Fatalf("rows changed: %s → %s", before, after)
	}
}

func TestStoreConcurrentDecisionsOneWins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	e := b.engine(t)
	task, err := e.Create(ctx, graph.NewTask{Workflow: "counter", Options: json.RawMessage(`{"gates":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Run(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, conflicts := 0, 0
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.engine(t).Decide(ctx, task.ID, graph.DecisionInput{InterruptID: out.Interrupt.ID, Action: "approve", DecidedBy: fmt.Sprint(i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, graph.ErrConflict):
				conflicts++
			default:
				t.Errorf("decision %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || conflicts != 19 {
		t.Fatalf("wins=%d conflicts=%d, want 1 and 19", wins, conflicts)
	}
	if n := b.count(t, "decisions"); n != 1 {
		t.Fatalf("%d decision rows", n)
	}
}

// The events of a commit are stored as the engine made them, whatever
// their text: type, node, phase, iteration, duration (or none), data, and
// the time to the microsecond (truncated, as a timestamptz holds it), with
// gap-free seqs after the task's last.
func TestStoreCommitEventColumns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	task, err := b.engine(t).Create(ctx, graph.NewTask{Workflow: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 26, 11, 40, 5, 123456789, time.FixedZone("x", 3600))
	dur := int64(-7)
	odd := "quo\"te \\ <tag> & é \u2028 \t\x01"
	data, err := json.Marshal(map[string]any{"k": []any{1, odd, nil}})
	if err != nil {
		t.Fatal(err)
	}
	evs := []graph.Event{
		{Type: "node.completed", Node: odd, Iteration: 3, Phase: odd + ":3", DurationMS: &dur, At: at, Data: data},
		{Type: "x.custom", At: at.Add(time.Microsecond), Data: json.RawMessage(`null`)},
		{Type: "node.started", Node: "n", Iteration: 1, Phase: "n"},
	}
	c := &graph.Commit{TaskID: task.ID, Status: graph.StatusRunning, CurrentNode: "n", Events: evs}
	if err := b.store.Commit(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := b.store.Events(ctx, task.ID, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(evs) {
		t.Fatalf("%d events read back, want %d", len(got), len(evs))
	}
	for i, g := range got {
		w := evs[i]
		if g.Seq != int64(i+2) || c.Events[i].Seq != g.Seq {
			t.Errorf("event %d: seq %d (commit said %d), want %d", i, g.Seq, c.Events[i].Seq, i+2)
		}
		if g.Type != w.Type || g.Node != w.Node || g.Phase != w.Phase || g.Iteration != w.Iteration {
			t.Errorf("event %d: %q %q %q %d, want %q %q %q %d", i, g.Type, g.Node, g.Phase, g.Iteration, w.Type, w.Node, w.Phase, w.Iteration)
		}
		if (g.DurationMS == nil) != (w.DurationMS == nil) || g.DurationMS != nil && *g.DurationMS != *w.DurationMS {
			t.Errorf("event %d: duration %v, want %v", i, g.DurationMS, w.DurationMS)
		}
		if want := w.At.Truncate(time.Microsecond); !g.At.Equal(want) {
			t.Errorf("event %d: at %s, want %s", i, g.At, want)
		}
		wantData := w.Data
		if len(wantData) == 0 {
			wantData = json.RawMessage(`{}`)
		}
		var gv, wv any
		if err := json.Unmarshal(g.Data, &gv); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(wantData, &wv); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gv, wv) {
			t.Errorf("event %d: data %s, want %s", i, g.Data, wantData)
		}
	}
}

// A quiet commit (TaskCommitQuiet: the task row is not written) is fenced
// as any other: under a stale fence it writes nothing and reports the
// lost lease; under the current one it appends its events after the last
// seq, moves the checkpoint on and leaves the task row as it was.
func TestQuietCommitIsFenced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id, fence := createClaimed(t, b.engine(t), b.store, "counter")
	snap, err := b.store.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	commit := func(fence int64, step int) error {
		cp := snap.Checkpoint
		cp.Step, cp.LastNode, cp.UpdatedAt = step, "quiet", time.Now()
		return b.store.Commit(ctx, &graph.Commit{TaskID: id, Fence: fence, Status: graph.StatusRunning, Quiet: true,
			Checkpoint: &cp, Reason: "node", Events: []graph.Event{
				{Type: graph.EventNodeCompleted, Node: "quiet", Iteration: 1, At: time.Now()},
				{Type: graph.EventNodeStarted, Node: "next", Iteration: 1, At: time.Now()}}})
	}
	var xmin string
	if err := b.pool.QueryRow(ctx, `SELECT xmin::text FROM tasks WHERE id = $1`, id).Scan(&xmin); err != nil {
		t.Fatal(err)
	}
	before := b.counts(t)
	if err := commit(fence-1, snap.Checkpoint.Step+1); !errors.Is(err, graph.ErrLeaseLost) {
		t.Fatalf("quiet commit under a stale fence: %v, want ErrLeaseLost", err)
	}
	if after := b.counts(t); after != before {
		t.Fatalf("a stale quiet commit changed rows: %s → %s", before, after)
	}
	if err := commit(fence, snap.Checkpoint.Step+1); err != nil {
		t.Fatalf("quiet commit under the current fence: %v", err)
	}
	var xmin2, lastNode string
	var seqs []int64
	if err := b.pool.QueryRow(ctx, `SELECT t.xmin::text, c.last_node_id, ARRAY(SELECT seq FROM task_events WHERE task_id = t.id ORDER BY seq)
		FROM tasks t JOIN workflow_checkpoints c ON c.task_id = t.id WHERE t.id = $1`, id).Scan(&xmin2, &lastNode, &seqs); err != nil {
		t.Fatal(err)
	}
	if xmin2 != xmin || lastNode != "quiet" {
		t.Errorf("task row version %s → %s (want it untouched), checkpoint's last node %q", xmin, xmin2, lastNode)
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("seqs %v are not gap-free from 1", seqs)
		}
	}
	if h, err := b.store.History(ctx, id); err != nil || h[len(h)-1].LastNode != "quiet" {
		t.Fatalf("history: %+v %v", h, err)
	}
	step := snap.Checkpoint.Step + 1

	// The fence a quiet commit checks is the checkpoint row's copy of the
	// task's (00101): every way the task's fence moves must move it too.
	sameFence := func(when string) {
		t.Helper()
		var onTask, onCheckpoint int64
		if err := b.pool.QueryRow(ctx, `SELECT t.lease_fence, c.lease_fence FROM tasks t
			JOIN workflow_checkpoints c ON c.task_id = t.id WHERE t.id = $1`, id).Scan(&onTask, &onCheckpoint); err != nil {
			t.Fatal(err)
		}
		if onTask != onCheckpoint {
			t.Fatalf("%s: the task's fence is %d, the checkpoint's copy %d", when, onTask, onCheckpoint)
		}
	}
	sameFence("after a claim")
	// Another worker takes the task over once the lease has lapsed.
	if _, err := b.pool.Exec(ctx, `UPDATE tasks SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	claims, err := b.store.ClaimTask(ctx, "w2", id, time.Minute)
	if err != nil || len(claims) != 1 || claims[0].Fence == fence {
		t.Fatalf("takeover: %+v %v", claims, err)
	}
	sameFence("after a takeover")
	step++
	if err := commit(fence, step); !errors.Is(err, graph.ErrLeaseLost) {
		t.Fatalf("the first worker's quiet commit after a takeover: %v, want ErrLeaseLost", err)
	}
	fence = claims[0].Fence
	if err := commit(fence, step); err != nil {
		t.Fatalf("the new worker's quiet commit: %v", err)
	}

	// A fence move in flight holds the checkpoint row: a quiet commit under
	// the old fence waits for it, then finds the new fence and writes
	// nothing.
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	if _, err := tx.Exec(ctx, `UPDATE tasks SET lease_fence = lease_fence + 1 WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	step++
	done := make(chan error, 1)
	go func() { done <- commit(fence, step) }()
	select {
	case err := <-done:
		t.Fatalf("a quiet commit ran past a fence move in flight: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, graph.ErrLeaseLost) {
		t.Fatalf("a quiet commit after the fence moved under it: %v, want ErrLeaseLost", err)
	}
	sameFence("after a fence move")

	// A cancel moves the fence: the worker's next commit writes nothing.
	if err := b.store.Cancel(ctx, id, "ann"); err != nil {
		t.Fatal(err)
	}
	sameFence("after a cancel")
	if err := commit(fence+1, step); !errors.Is(err, graph.ErrLeaseLost) {
		t.Fatalf("a quiet commit after a cancel: %v, want ErrLeaseLost", err)
	}
}
