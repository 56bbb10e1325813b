package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
)

func TestDefinitionVersion(t *testing.T) {
	t.Parallel()
	v1, v1again, v2 := graphtest.Review(1).Version(), graphtest.Review(1).Version(), graphtest.Review(2).Version()
	if v1 != v1again {
		t.Errorf("one definition, two versions: %s, %s", v1, v1again)
	}
	if v1 == v2 {
		t.Errorf("a removed node left the version at %s", v1)
	}
	if !strings.HasPrefix(v1, "s1-") || len(v1) != len("s1-")+12 {
		t.Errorf("version %q, want s1-<12 hex>", v1)
	}
	build := func(stateVersion int, desc string) string {
		g, err := graph.New[st]("v").StateVersion(stateVersion).Describe("V", desc).
			Node("a", noop).Node("b", noop).Edge("a", "b").Edge("b", graph.END).Init(initSt).Compile()
		if err != nil {
			t.Fatal(err)
		}
		return g.Version()
	}
	if build(1, "one") != build(1, "another description") {
		t.Error("a description changed the version")
	}
	if build(1, "x") == build(2, "x") {
		t.Error("a new state version left the version as it was")
	}
}

// reviewWaiting creates a review task under definition 1 and runs it to
// its review gate.
func reviewWaiting(t *testing.T, cp *graph.MemoryCheckpointer) (string, *graph.Interrupt) {
	t.Helper()
	v1, err := graph.NewEngine(cp, []graph.Workflow{graphtest.Review(1)})
	if err != nil {
		t.Fatal(err)
	}
	task, err := v1.Create(context.Background(), graph.NewTask{Workflow: graphtest.ReviewName, Options: json.RawMessage(`{"gates":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := v1.Run(context.Background(), task.ID, 0)
	if err != nil || out.Interrupt == nil || out.Interrupt.Node != "review" {
		t.Fatalf("run under v1: %+v %v", out, err)
	}
	if task.DefinitionVersion != graphtest.Review(1).Version() {
		t.Fatalf("task version %q, want %q", task.DefinitionVersion, graphtest.Review(1).Version())
	}
	return task.ID, out.Interrupt
}

func TestDecisionOnRemovedNode(t *testing.T) {
	t.Parallel()
	cp := graph.NewMemoryCheckpointer()
	id, itr := reviewWaiting(t, cp)
	v2, err := graph.NewEngine(cp, []graph.Workflow{graphtest.Review(2)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = v2.Decide(context.Background(), id, graph.DecisionInput{InterruptID: itr.ID, Action: graph.ActionApprove})
	var ng *graph.NodeGoneError
	if !errors.As(err, &ng) || !errors.Is(err, graph.ErrConflict) || ng.Node != "review" || !strings.Contains(err.Error(), `"review"`) {
		t.Fatalf("decision on the removed node: %v, want a NodeGoneError naming \"review\"", err)
	}
	if got, _ := cp.Interrupt(context.Background(), itr.ID); got.Status != graph.InterruptPending {
		t.Errorf("refused decision left the interrupt %s", got.Status)
	}
	if err := v2.Resumable(context.Background(), id); !errors.As(err, &ng) {
		t.Errorf("Resumable under v2 = %v, want NodeGoneError", err)
	}

	// A decision taken under v1 and run under v2 is a task fault naming
	// the node (the runner fails the task with it), never a nil node.
	id2, itr2 := reviewWaiting(t, cp)
	v1, _ := graph.NewEngine(cp, []graph.Workflow{graphtest.Review(1)})
	if _, err := v1.Decide(context.Background(), id2, graph.DecisionInput{InterruptID: itr2.ID, Action: graph.ActionApprove}); err != nil {
		t.Fatal(err)
	}
	_, err = v2.Run(context.Background(), id2, 0)
	var se *graph.StateError
	if !errors.As(err, &se) || !errors.As(err, &ng) || !strings.Contains(err.Error(), `node "review" no longer exists`) ||
		strings.Contains(err.Error(), "unreadable") {
		t.Fatalf("run under v2: %v, want a StateError naming the node", err)
	}
}

func TestFork(t *testing.T) {
	t.Parallel()
	cp := graph.NewMemoryCheckpointer()
	id, _ := reviewWaiting(t, cp)
	e, err := graph.NewEngine(cp, []graph.Workflow{graphtest.Review(1)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hist := cp.History(id)
	// start (0), draft (1), review waiting at its gate (2).
	if len(hist) != 3 || hist[2].PendingInterrupt == "" {
		t.Fatalf("history %+v", hist)
	}
	before := cp.Events(id)

	t.Run("AtGateRaisesAFreshInterrupt", func(t *testing.T) {
		f, err := e.Fork(ctx, graph.ForkRequest{TaskID: id, Step: 2, CreatedBy: "ann"})
		if err != nil {
			t.Fatal(err)
		}
		if f.Status != graph.StatusWaiting || f.ForkedFrom == nil || *f.ForkedFrom != (graph.ForkRef{TaskID: id, Step: 2}) {
			t.Fatalf("fork %+v", f)
		}
		evs := cp.Events(f.ID)
		if len(evs) != 3 || evs[0].Seq != 1 || evs[0].Type != graph.EventTaskForked || evs[1].Type != graph.EventInterruptRaised {
			t.Fatalf("fork events %+v", evs)
		}
		snap, err := cp.Load(ctx, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Checkpoint.Step != 2 || snap.Interrupt == nil || snap.Interrupt.ID == hist[2].PendingInterrupt ||
			snap.Interrupt.Status != graph.InterruptPending || snap.Interrupt.Node != "review" {
			t.Fatalf("fork checkpoint %+v interrupt %+v", snap.Checkpoint, snap.Interrupt)
		}
		if _, err := e.Decide(ctx, f.ID, graph.DecisionInput{InterruptID: snap.Interrupt.ID, Action: graph.ActionApprove}); err != nil {
			t.Fatal(err)
		}
		if out, err := e.Run(ctx, f.ID, 0); err != nil || out.Status != graph.StatusSucceeded {
			t.Fatalf("fork run: %+v %v", out, err)
		}
	})
	t.Run("PatchedStateRuns", func(t *testing.T) {
		f, err := e.Fork(ctx, graph.ForkRequest{TaskID: id, Step: 1, Patch: json.RawMessage(`{"notes":{"seed":"patched"},"count":40}`)})
		if err != nil {
			t.Fatal(err)
		}
		if f.Status != graph.StatusQueued || !strings.Contains(f.Title, "fork of step 1") {
			t.Fatalf("fork %+v", f)
		}
		out, err := e.Run(ctx, f.ID, 0)
		if err != nil || out.Interrupt == nil {
			t.Fatalf("fork run: %+v %v", out, err)
		}
		snap, _ := cp.Load(ctx, f.ID)
		var s graphtest.LinearState
		if err := json.Unmarshal(snap.Checkpoint.State, &s); err != nil {
			t.Fatal(err)
		}
		if s.Count != 41 || s.Notes["seed"] != "patched" {
			t.Errorf("state after the fork's review run: %+v", s)
		}
	})
	t.Run("BadPatchNamesTheField", func(t *testing.T) {
		for patch, field := range map[string]string{
			`{"count":"many"}`: "state.count",
			`{"cuont":1}`:      "state.cuont",
			`[1]`:              "state",
			`{"path":[1]}`:     "state.path",
		} {
			_, err := e.Fork(ctx, graph.ForkRequest{TaskID: id, Step: 1, Patch: json.RawMessage(patch)})
			var ve *graph.ValidationError
			if !errors.As(err, &ve) || ve.Field != field {
				t.Errorf("patch %s: %v, want a ValidationError on %s", patch, err, field)
			}
		}
	})
	t.Run("MissingStep", func(t *testing.T) {
		if _, err := e.Fork(ctx, graph.ForkRequest{TaskID: id, Step: 99}); !errors.Is(err, graph.ErrCheckpointNotFound) {
			t.Errorf("fork of step 99: %v", err)
		}
		if _, err := e.Fork(ctx, graph.ForkRequest{TaskID: graph.NewID(), Step: 1}); !errors.Is(err, graph.ErrTaskNotFound) {
			t.Errorf("fork of no task: %v", err)
		}
	})
	if after := cp.Events(id); !reflect.DeepEqual(before, after) || len(cp.History(id)) != 3 {
		t.Errorf("the source changed: %d events before, %d after", len(before), len(after))
	}
}

func TestForkOfRunningTaskConflicts(t *testing.T) {
	t.Parallel()
	cp := graph.NewMemoryCheckpointer()
	e, err := graph.NewEngine(cp, []graph.Workflow{graphtest.Review(1)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	task, err := e.Create(ctx, graph.NewTask{Workflow: graphtest.ReviewName})
	if err != nil {
		t.Fatal(err)
	}
	// The first node's commit marks the task running; stop there.
	if err := cp.Commit(ctx, &graph.Commit{TaskID: task.ID, Status: graph.StatusRunning,
		Events: []graph.Event{{Type: graph.EventNodeStarted, Node: "draft"}}}); err != nil {
		t.Fatal(err)
	}
	_, err = e.Fork(ctx, graph.ForkRequest{TaskID: task.ID, Step: 0})
	var se *graph.TaskStatusError
	if !errors.As(err, &se) || !errors.Is(err, graph.ErrConflict) {
		t.Fatalf("fork of a running task: %v, want TaskStatusError", err)
	}
}

func TestMergePatch(t *testing.T) {
	t.Parallel()
	// The examples of RFC 7386, appendix A.
	cases := []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	}
	for _, c := range cases {
		var target, patch, want any
		for _, p := range []struct {
			s string
			v *any
		}{{c.target, &target}, {c.patch, &patch}, {c.want, &want}} {
			if err := json.Unmarshal([]byte(p.s), p.v); err != nil {
				t.Fatal(err)
			}
		}
		if got := graph.MergePatch(target, patch); !reflect.DeepEqual(got, want) {
			t.Errorf("MergePatch(%s, %s) = %v, want %s", c.target, c.patch, got, c.want)
		}
	}
}
