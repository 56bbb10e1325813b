package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// revisedGraph changes its large field on every third step and its small
// one on every step.
func revisedGraph(tb testing.TB) graph.Workflow {
	g, err := graph.New[sizedState]("revised").
		Node("work", func(_ context.Context, _ *graph.NodeRun, s sizedState) (sizedState, error) {
			s.Count++
			if s.Count%3 == 0 {
				s.Doc += " revised"
			}
			return s, nil
		}).
		Route("work", func(s sizedState) string {
			if s.Count >= 7 {
				return graph.END
			}
			return "work"
		}, "work", graph.END).
		Init(func(in json.RawMessage, _ graph.Options) (sizedState, error) {
			var s sizedState
			err := json.Unmarshal(in, &s)
			return s, err
		}).
		Compile()
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// A large field is stored once per distinct value, checkpoints name it,
// and every reader (run, current checkpoint, history) gets the whole state.
func TestStoreLargeStateFields(t *testing.T) {
	pool := pgtest.NewPool(t)
	store := postgres.NewStore(pool, postgres.Options{})
	e, err := graph.NewEngine(store, []graph.Workflow{revisedGraph(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	doc := prose(64 << 10)
	in, _ := json.Marshal(map[string]string{"doc": doc})
	task, err := e.Create(ctx, graph.NewTask{Workflow: "revised", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := e.Run(ctx, task.ID, 0); err != nil || out.Status != graph.StatusSucceeded {
		t.Fatalf("%+v %v", out, err)
	}
	var blobs, small, named int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM state_blobs WHERE task_id = $1`, task.ID).Scan(&blobs); err != nil {
		t.Fatal(err)
	}
	// the document as created, then revised at counts 3 and 6
	if blobs != 3 {
		t.Errorf("%d blobs, want 3", blobs)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE length(state::text) < 100),
		count(*) FILTER (WHERE state_refs ? 'doc') FROM checkpoint_history WHERE task_id = $1`, task.ID).Scan(&small, &named); err != nil {
		t.Fatal(err)
	}
	hist, err := store.History(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if small != len(hist) || named != len(hist) {
		t.Errorf("of %d history rows, %d have a small state and %d name the document", len(hist), small, named)
	}
	for _, h := range hist {
		cp, err := store.CheckpointAt(ctx, task.ID, h.Step)
		if err != nil {
			t.Fatal(err)
		}
		var s sizedState
		if err := json.Unmarshal(cp.State, &s); err != nil {
			t.Fatal(err)
		}
		want := doc + strings.Repeat(" revised", s.Count/3)
		if s.Doc != want {
			t.Errorf("step %d (count %d): document of %d bytes, want %d", h.Step, s.Count, len(s.Doc), len(want))
		}
	}
	cur, err := store.CurrentCheckpoint(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var s sizedState
	if err := json.Unmarshal(cur.State, &s); err != nil || s.Count != 7 || s.Doc != doc+" revised revised" {
		t.Errorf("current: count %d, document of %d bytes (%v)", s.Count, len(s.Doc), err)
	}

	// The prune of the history takes the blobs that only pruned rows
	// named (the first revision: steps 3–5) and keeps those of the first
	// and last checkpoints.
	if _, err := pool.Exec(ctx, `UPDATE tasks SET completed_at = completed_at - interval '40 days' WHERE id = $1`, task.ID); err != nil {
		t.Fatal(err)
	}
	pruned, err := store.PruneHistory(ctx, postgres.HistoryPrune{Before: time.Now().Add(-30 * 24 * time.Hour)})
	if err != nil || pruned.Rows == 0 {
		t.Fatalf("prune: %+v %v", pruned, err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM state_blobs WHERE task_id = $1`, task.ID).Scan(&blobs); err != nil {
		t.Fatal(err)
	}
	if blobs != 2 {
		t.Errorf("after the prune: %d blobs, want 2", blobs)
	}
	if hist, err = store.History(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	for _, h := range hist {
		if _, err := store.CheckpointAt(ctx, task.ID, h.Step); err != nil {
			t.Errorf("after the prune, step %d: %v", h.Step, err)
		}
	}

	// A blob that went missing is a clear error, never a state without
	// the field.
	if _, err := pool.Exec(ctx, `DELETE FROM state_blobs WHERE task_id = $1`, task.ID); err != nil {
		t.Fatal(err)
	}
	var se *graph.StateError
	if _, err := store.Load(ctx, task.ID); !errors.As(err, &se) || !strings.Contains(err.Error(), "doc") {
		t.Errorf("load without blobs: %v", err)
	}
	if _, err := store.CurrentCheckpoint(ctx, task.ID); err == nil || !strings.Contains(err.Error(), "doc") {
		t.Errorf("current checkpoint without blobs: %v", err)
	}
}

// A store that holds a task's blobs loads them without reading their
// values back, and gets the same state as a store that holds nothing; a
// blob that went missing is still an error for it.
func TestLoadWithHeldBlobs(t *testing.T) {
	pool := pgtest.NewPool(t)
	warm, cold := postgres.NewStore(pool, postgres.Options{}), postgres.NewStore(pool, postgres.Options{})
	e, err := graph.NewEngine(warm, []graph.Workflow{sizedGraph(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	task, err := e.Create(ctx, graph.NewTask{Workflow: "sized", Input: json.RawMessage(`{"size": 70000}`)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := warm.Load(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	want, err := cold.Load(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var gs, ws sizedState
	if err := json.Unmarshal(got.Checkpoint.State, &gs); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want.Checkpoint.State, &ws); err != nil {
		t.Fatal(err)
	}
	if gs != ws || len(gs.Doc) != 70000 {
		t.Errorf("warm load: document of %d bytes, cold: %d bytes", len(gs.Doc), len(ws.Doc))
	}
	// The warm store ran the task to its end from what it holds.
	if out, err := e.Run(ctx, task.ID, 0); err != nil || out.Status != graph.StatusSucceeded {
		t.Fatalf("%+v %v", out, err)
	}
	cur, err := cold.CurrentCheckpoint(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var s sizedState
	if err := json.Unmarshal(cur.State, &s); err != nil || s.Count != sizedSteps || s.Doc != ws.Doc {
		t.Errorf("after the run: count %d, document of %d bytes (%v)", s.Count, len(s.Doc), err)
	}

	task, err = e.Create(ctx, graph.NewTask{Workflow: "sized", Input: json.RawMessage(`{"size": 70000}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM state_blobs WHERE task_id = $1`, task.ID); err != nil {
		t.Fatal(err)
	}
	var se *graph.StateError
	if _, err := warm.Load(ctx, task.ID); !errors.As(err, &se) || !strings.Contains(err.Error(), "doc") {
		t.Errorf("warm load without blobs: %v", err)
	}
}

// LoadRun gives the large fields apart, the rest of the state as Load
// has it, and the same whole state; rows written whole, and fields both
// inline and in refs, read as Load reads them.
func TestLoadRunKeepsLargeFieldsApart(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	for _, warm := range []bool{true, false} {
		store := postgres.NewStore(pool, postgres.Options{})
		e, err := graph.NewEngine(store, []graph.Workflow{sizedGraph(t)})
		if err != nil {
			t.Fatal(err)
		}
		task, err := e.Create(ctx, graph.NewTask{Workflow: "sized", Input: json.RawMessage(`{"size": 70000}`)})
		if err != nil {
			t.Fatal(err)
		}
		if !warm {
			store = postgres.NewStore(pool, postgres.Options{})
		}
		whole, err := store.Load(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		apart, err := store.LoadRun(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(apart.Checkpoint.Fields) != 1 || apart.Checkpoint.Fields[0].Key != "doc" || strings.Contains(string(apart.Checkpoint.State), "doc") {
			t.Fatalf("warm %v: state %s, %d fields", warm, apart.Checkpoint.State, len(apart.Checkpoint.Fields))
		}
		joined, err := apart.Checkpoint.FullState()
		if err != nil {
			t.Fatal(err)
		}
		var a, w sizedState
		if json.Unmarshal(joined, &a) != nil || json.Unmarshal(whole.Checkpoint.State, &w) != nil || a != w || len(a.Doc) != 70000 {
			t.Errorf("warm %v: apart and whole differ (%d, %d bytes)", warm, len(a.Doc), len(w.Doc))
		}
	}

	// A row written whole (before 00050) and a field both inline and
	// named: inline wins, as for Load.
	store := postgres.NewStore(pool, postgres.Options{})
	e, err := graph.NewEngine(store, []graph.Workflow{sizedGraph(t)})
	if err != nil {
		t.Fatal(err)
	}
	task, err := e.Create(ctx, graph.NewTask{Workflow: "sized", Input: json.RawMessage(`{"size": 70000}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, refs := range []string{`'{}'`, `state_refs`} {
		if _, err := pool.Exec(ctx, `UPDATE workflow_checkpoints SET state = '{"doc":"inline","count":4}', state_refs = `+refs+` WHERE task_id = $1`, task.ID); err != nil {
			t.Fatal(err)
		}
		snap, err := store.LoadRun(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		joined, err := snap.Checkpoint.FullState()
		if err != nil {
			t.Fatal(err)
		}
		var s sizedState
		if err := json.Unmarshal(joined, &s); err != nil || s.Doc != "inline" || s.Count != 4 || len(snap.Checkpoint.Fields) != 0 {
			t.Errorf("refs %s: %s with %d fields (%v)", refs, joined, len(snap.Checkpoint.Fields), err)
		}
	}
	// and the engine resumes it from there
	if out, err := e.Run(ctx, task.ID, 0); err != nil || out.Status != graph.StatusSucceeded {
		t.Fatalf("%+v %v", out, err)
	}
	cur, err := store.CurrentCheckpoint(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var s sizedState
	if err := json.Unmarshal(cur.State, &s); err != nil || s.Doc != "inline" || s.Count != sizedSteps {
		t.Errorf("resumed: %.100s (%v)", cur.State, err)
	}

	// A blob that went missing is an error naming the field.
	task, err = e.Create(ctx, graph.NewTask{Workflow: "sized", Input: json.RawMessage(`{"size": 70000}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM state_blobs WHERE task_id = $1`, task.ID); err != nil {
		t.Fatal(err)
	}
	var se *graph.StateError
	if _, err := store.LoadRun(ctx, task.ID); !errors.As(err, &se) || !strings.Contains(err.Error(), "doc") {
		t.Errorf("load run without blobs: %v", err)
	}
	if _, err := e.Run(ctx, task.ID, 0); !errors.As(err, &se) {
		t.Errorf("run without blobs: %v", err)
	}
}
