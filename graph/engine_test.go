package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
)

// env is an engine over an in-memory store.
type env struct {
	t   *testing.T
	cp  *graph.MemoryCheckpointer
	eng *graph.Engine
}

func newEnv(t *testing.T, workflows ...graph.Workflow) *env {
	t.Helper()
	cp := graph.NewMemoryCheckpointer()
	eng, err := graph.NewEngine(cp, workflows)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, cp: cp, eng: eng}
}

func compile(t *testing.T, b *graph.Builder[st]) *graph.Graph[st] {
	t.Helper()
	g, err := b.Init(initSt).Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (e *env) create(workflow, options string) string {
	e.t.Helper()
	nt := graph.NewTask{Workflow: workflow}
	if options != "" {
		nt.Options = json.RawMessage(options)
	}
	task, err := e.eng.Create(context.Background(), nt)
	if err != nil {
		e.t.Fatalf("Create: %v", err)
	}
	return task.ID
}

func (e *env) run(id string) graph.Outcome {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := e.eng.Run(ctx, id, 0)
	if err != nil {
		e.t.Fatalf("Run: %v", err)
	}
	return out
}

func (e *env) waiting(id string) *graph.Interrupt {
	e.t.Helper()
	out := e.run(id)
	if out.Status != graph.StatusWaiting || out.Interrupt == nil {
		e.t.Fatalf("outcome = %+v, want waiting", out)
	}
	return out.Interrupt
}

func (e *env) decide(id string, in graph.DecisionInput) {
	e.t.Helper()
	if _, err := e.eng.Decide(context.Background(), id, in); err != nil {
		e.t.Fatalf("Decide %+v: %v", in, err)
	}
}

func (e *env) snapshot(id string) *graph.Snapshot {
	e.t.Helper()
	snap, err := e.cp.Load(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return snap
}

func (e *env) state(id string) st {
	e.t.Helper()
	var s st
	if err := json.Unmarshal(e.snapshot(id).Checkpoint.State, &s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) result(id string) st {
	e.t.Helper()
	task, _ := e.cp.Task(id)
	var s st
	if err := json.Unmarshal(task.Result, &s); err != nil {
		e.t.Fatalf("result %q: %v", task.Result, err)
	}
	return s
}

func (e *env) events(id string, types ...string) []graph.Event {
	var out []graph.Event
	for _, ev := range e.cp.Events(id) {
		if len(types) == 0 || slices.Contains(types, ev.Type) {
			out = append(out, ev)
		}
	}
	return out
}

func phases(evs []graph.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Phase
	}
	return out
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func TestRouterReturningUndeclaredNodeFailsTask(t *testing.T) {
	t.Parallel()
	g := compile(t, graph.New[st]("route").Node("pick", noop).Node("b", noop).Edge("b", graph.END).
		Route("pick", func(st) string { return "nowhere" }, "b", graph.END))
	e := newEnv(t, g)
	id := e.create("route", "")
	out := e.run(id)
	want := `router of node "pick" returned undeclared node "nowhere"`
	if out.Status != graph.StatusFailed || !strings.Contains(out.Error, want) {
		t.Fatalf("outcome = %+v, want failure %q", out, want)
	}
	task, _ := e.cp.Task(id)
	if task.Status != graph.StatusFailed || !strings.Contains(task.Error, want) || task.CompletedAt == nil {
		t.Errorf("task = %+v", task)
	}
	failed := e.events(id, graph.EventNodeFailed, graph.EventTaskFailed)
	if len(failed) != 2 || failed[0].Node != "pick" {
		t.Errorf("failure events = %+v", failed)
	}
	if n := len(e.events(id, graph.EventNodeStarted)); n != 1 {
		t.Errorf("%d nodes started, want only pick", n)
	}
	// A failed task stays failed on the next Run.
	if out := e.run(id); out.Status != graph.StatusFailed {
		t.Errorf("second Run = %+v", out)
	}
}

func TestCycles(t *testing.T) {
	t.Parallel()
	inc := func(_ context.Context, run *graph.NodeRun, s st) (st, error) {
		s.N++
		s.Log = append(s.Log, run.Phase)
		return s, nil
	}
	for _, limit := range []int{1, 2, 5} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			t.Parallel()
			g := compile(t, graph.New[st]("loop").Node("inc", inc).Node("check", noop).Edge("inc", "check").
				Route("check", func(s st) string {
					if s.N < limit {
						return "inc"
					}
					return graph.END
				}, "inc=again", graph.END))
			e := newEnv(t, g)
			id := e.create("loop", "")
			if out := e.run(id); out.Status != graph.StatusSucceeded {
				t.Fatalf("outcome = %+v", out)
			}
			res := e.result(id)
			var want []string
			for i := 1; i <= limit; i++ {
				want = append(want, graph.Phase("inc", i))
			}
			if res.N != limit || !slices.Equal(res.Log, want) {
				t.Errorf("result = %+v, want N=%d log %v", res, limit, want)
			}
			var started []string
			for _, ev := range e.events(id, graph.EventNodeStarted) {
				if ev.Node == "inc" {
					started = append(started, ev.Phase)
				}
			}
			if !slices.Equal(started, want) {
				t.Errorf("inc started as %v, want %v", started, want)
			}
			cp := e.snapshot(id).Checkpoint
			if cp.Iterations["inc"] != limit || cp.Iterations["check"] != limit || cp.LastNode != "check" || cp.NextNode != graph.END {
				t.Errorf("checkpoint = %+v", cp)
			}
			// Events are numbered 1, 2, … without gaps.
			for i, ev := range e.events(id) {
				if ev.Seq != int64(i+1) || ev.TaskID != id {
					t.Fatalf("event %d has seq %d task %s", i, ev.Seq, ev.TaskID)
				}
			}
			// One checkpoint per node run, plus the start.
			if n := len(e.cp.History(id)); n != 1+2*limit {
				t.Errorf("%d checkpoints, want %d", n, 1+2*limit)
			}
		})
	}
}

func TestQuestions(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ask := func(_ context.Context, run *graph.NodeRun, s st) (st, error) {
		calls.Add(1)
		s.Touched++ // dropped when the run stops at a question
		a1, err := run.Ask(graph.Question{Title: "First", Text: fmt.Sprintf("q1 of round %d", s.N)})
		if err != nil {
			return s, err
		}
		a2, err := run.Ask(graph.Question{Text: "q2"})
		if err != nil {
			return s, err
		}
		s.Answers = append(s.Answers, a1.Text+"/"+a2.Text)
		s.N++
		return s, nil
	}
	g := compile(t, graph.New[st]("ask").Node("ask", ask).Route("ask", func(s st) string {
		if s.N < 2 {
			return "ask"
		}
		return graph.END
	}, "ask", graph.END))
	e := newEnv(t, g)
	id := e.create("ask", "")

	expect := func(itr *graph.Interrupt, question string, iteration int) {
		t.Helper()
		if itr.Node != "ask" || itr.Kind != "question" || itr.Payload.Type != graph.InterruptQuestion ||
			itr.Payload.Question != question || itr.Iteration != iteration || !slices.Equal(itr.Payload.Actions, []string{"respond"}) {
			t.Fatalf("interrupt = %+v, want %q at iteration %d", itr, question, iteration)
		}
	}
	itr := e.waiting(id)
	expect(itr, "q1 of round 0", 1)
	if itr.Payload.Title != "First" {
		t.Errorf("title = %q", itr.Payload.Title)
	}
	// A gate action is not an answer.
	if _, err := e.eng.Decide(context.Background(), id, graph.DecisionInput{InterruptID: itr.ID, Action: "approve"}); !errors.Is(err, graph.ErrInvalid) {
		t.Errorf("approve on a question: %v", err)
	}
	e.decide(id, graph.DecisionInput{InterruptID: itr.ID, Action: "respond", Value: jsonString("a")})

	// The node runs again from its start: the first Ask returns the answer,
	// the second interrupts.
	itr2 := e.waiting(id)
	expect(itr2, "q2", 1)
	if itr2.ID == itr.ID {
		t.Error("the second question reuses the first interrupt's id")
	}
	if got := e.snapshot(id).Checkpoint.Answers; len(got) != 1 || got[0].Text != "a" {
		t.Errorf("answers = %+v", got)
	}
	e.decide(id, graph.DecisionInput{InterruptID: itr2.ID, Action: "respond", Feedback: "b"}) // feedback is an answer too

	// The node completes; the cycle runs it again, and it asks afresh.
	itr3 := e.waiting(id)
	expect(itr3, "q1 of round 1", 2)
	if got := e.snapshot(id).Checkpoint.Answers; len(got) != 0 {
		t.Errorf("answers not cleared after the node run completed: %+v", got)
	}
	e.decide(id, graph.DecisionInput{InterruptID: itr3.ID, Action: "respond", Value: jsonString("c")})
	itr4 := e.waiting(id)
	expect(itr4, "q2", 2)
	e.decide(id, graph.DecisionInput{InterruptID: itr4.ID, Action: "respond", Value: jsonString("d")})
	if out := e.run(id); out.Status != graph.StatusSucceeded {
		t.Fatalf("outcome = %+v", out)
	}

	res := e.result(id)
	if !slices.Equal(res.Answers, []string{"a/b", "c/d"}) || res.N != 2 || res.Touched != 2 {
		t.Errorf("result = %+v", res)
	}
	if n := calls.Load(); n != 6 {
		t.Errorf("node ran %d times, want 6 (3 per completed run)", n)
	}
	wantPhases := []string{"ask", "ask", "ask", "ask:2", "ask:2", "ask:2"}
	if got := phases(e.events(id, graph.EventNodeStarted)); !slices.Equal(got, wantPhases) {
		t.Errorf("node.started phases = %v, want %v", got, wantPhases)
	}
	if got := phases(e.events(id, graph.EventNodeCompleted)); !slices.Equal(got, []string{"ask", "ask:2"}) {
		t.Errorf("node.completed phases = %v", got)
	}
}

// gateGraph is work (gated, with edit when edit is true) → after → END.
func gateGraph(name string, edit bool, runs *atomic.Int32) *graph.Graph[st] {
	work := func(_ context.Context, run *graph.NodeRun, s st) (st, error) {
		runs.Add(1)
		s.Content = fmt.Sprintf("draft %d", run.Iteration)
		run.Artifact("draft.md", "text/markdown", s.Content)
		run.Artifact("other.txt", "text/plain", "not the gated one")
		return s, nil
	}
	after := func(_ context.Context, _ *graph.NodeRun, s st) (st, error) {
		s.Log = append(s.Log, "after saw "+s.Content)
		return s, nil
	}
	gate := graph.Gate[st]{Kind: "review", Option: "allowWork", Artifact: "draft.md", OnReject: rejectSt,
		OnApprove: func(s st) (st, error) { s.Log = append(s.Log, "approved"); return s, nil }}
	if edit {
		gate.OnEdit = func(s st, content string) (st, error) { s.Content = content; return s, nil }
	}
	g, err := graph.New[st](name).Node("work", work).Node("after", after).Gate("work", gate).
		Edge("work", "after").Edge("after", graph.END).Init(initSt).Compile()
	if err != nil {
		panic(err)
	}
	return g
}

func TestGates(t *testing.T) {
	t.Parallel()
	t.Run("approve continues without re-running the node", func(t *testing.T) {
		t.Parallel()
		var runs atomic.Int32
		e := newEnv(t, gateGraph("gate", true, &runs))
		id := e.create("gate", `{"gates": {}}`)
		itr := e.waiting(id)
		if itr.Kind != "review" || itr.Iteration != 1 || itr.Payload.Type != graph.InterruptGate ||
			itr.Payload.Artifact == nil || *itr.Payload.Artifact != (graph.ArtifactRef{Name: "draft.md", ContentType: "text/markdown", Content: "draft 1"}) ||
			!slices.Equal(itr.Payload.Actions, []string{"approve", "reject", "edit"}) {
			t.Fatalf("interrupt = %+v", itr)
		}
		if task, _ := e.cp.Task(id); task.Status != graph.StatusWaiting || task.CurrentNode != "work" {
			t.Errorf("task = %s at %s", task.Status, task.CurrentNode)
		}
		// Running a waiting task without a decision changes nothing.
		if again := e.waiting(id); again.ID != itr.ID {
			t.Error("a second Run raised a new interrupt")
		}
		e.decide(id, graph.DecisionInput{InterruptID: itr.ID, Action: "approve"})
		if out := e.run(id); out.Status != graph.StatusSucceeded {
			t.Fatalf("outcome = %+v", out)
		}
		if runs.Load() != 1 || !slices.Equal(e.result(id).Log, []string{"approved", "after saw draft 1"}) {
			t.Errorf("runs = %d, result = %+v", runs.Load(), e.result(id))
		}
	})
	t.Run("auto-approved", func(t *testing.T) {
		t.Parallel()
		for _, opts := range []string{"", `{"gates": {"allowWork": true}}`} {
			var runs atomic.Int32
			e := newEnv(t, gateGraph("gate", true, &runs))
			id := e.create("gate", opts)
			if out := e.run(id); out.Status != graph.StatusSucceeded {
				t.Fatalf("options %s: outcome = %+v", opts, out)
			}
			if !slices.Equal(e.result(id).Log, []string{"approved", "after saw draft 1"}) || len(e.events(id, graph.EventInterruptRaised)) != 0 {
				t.Errorf("options %s: result = %+v", opts, e.result(id))
			}
		}
	})
	t.Run("rejections re-run the node as the next iteration", func(t *testing.T) {
		t.Parallel()
		var runs atomic.Int32
		e := newEnv(t, gateGraph("gate", false, &runs))
		id := e.create("gate", `{"gates": {"allowOther": true}}`)
		for i := 1; i <= 3; i++ {
			itr := e.waiting(id)
			if itr.Iteration != i || itr.Payload.Artifact.Content != fmt.Sprintf("draft %d", i) {
				t.Fatalf("interrupt %d = %+v", i, itr)
			}
			e.decide(id, graph.DecisionInput{InterruptID: itr.ID, Action: "reject", Feedback: fmt.Sprintf("  fix %d ", i)})
		}
		itr := e.waiting(id)
		if itr.Iteration != 4 {
			t.Fatalf("iteration = %d", itr.Iteration)
		}
		e.decide(id, graph.DecisionInput{InterruptID: itr.ID, Action: "approve"})
		if out := e.run(id); out.Status != graph.StatusSucceeded {
			t.Fatalf("outcome = %+v", out)
		}
		want := []string{"rejected 1: fix 1", "rejected 2: fix 2", "rejected 3: fix 3", "approved", "after saw draft 4"}
		if got := e.result(id).Log; !slices.Equal(got, want) {
			t.Errorf("log = %v, want %v", got, want)
		}
		if runs.Load() != 4 {
			t.Errorf("node ran %d times, want 4", runs.Load())
		}
		wantPhases := []string{"work", "work:2", "work:3", "work:4", "after"}
		if got := phases(e.events(id, graph.EventNodeStarted)); !slices.Equal(got, wantPhases) {
			t.Errorf("phases = %v", got)
		}
		var versions []int
		for _, a := range e.cp.Artifacts(id) {
			if a.Name == "draft.md" {
				versions = append(versions, a.Version)
			}
		}
		if !slices.Equal(versions, []int{1, 2, 3, 4}) {
			t.Errorf("draft.md versions = %v", versions)
		}
	})
	t.Run("edit continues with the edited artifact", func(t *testing.T) {
		t.Parallel()
		var runs atomic.Int32
		e := newEnv(t, gateGraph("gate", true, &runs))
		id := e.create("gate", `{"gates": {}}`)
		itr := e.waiting(id)
		e.decide(id, graph.DecisionInput{InterruptID: itr.ID, Action: "edit", Value: jsonString("my version"), DecidedBy: "ann"})
		if out := e.run(id); out.Status != graph.StatusSucceeded {
			t.Fatalf("outcome = %+v", out)
		}
		if got := e.result(id).Log; !slices.Equal(got, []string{"approved", "after saw my version"}) || runs.Load() != 1 {
			t.Errorf("log = %v, runs = %d", got, runs.Load())
		}
		arts := e.cp.Artifacts(id)
		last := arts[len(arts)-1]
		if last.Name != "draft.md" || last.Version != 2 || last.Content != "my version" || last.ContentType != "text/markdown" || last.Iteration != 1 {
			t.Errorf("edited artifact = %+v", last)
		}
	})
}

func TestDecisionOnNonPendingInterrupt(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	e := newEnv(t, gateGraph("gate", true, &runs))
	id := e.create("gate", `{"gates": {}}`)
	itr := e.waiting(id)

	// Exactly one of many concurrent decisions is accepted.
	var wg sync.WaitGroup
	var accepted, conflicts atomic.Int32
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			action := []string{"approve", "reject"}[i%2]
			_, err := e.eng.Decide(context.Background(), id, graph.DecisionInput{InterruptID: itr.ID, Action: action, Feedback: "no"})
			var ce *graph.ConflictError
			switch {
			case err == nil:
				accepted.Add(1)
			case errors.As(err, &ce) && errors.Is(err, graph.ErrConflict) && ce.Status == graph.InterruptResolved:
				conflicts.Add(1)
			default:
				t.Errorf("Decide: %v", err)
			}
		}()
	}
	wg.Wait()
	if accepted.Load() != 1 || conflicts.Load() != 7 {
		t.Fatalf("accepted %d, conflicts %d", accepted.Load(), conflicts.Load())
	}

	check := func(when string) {
		t.Helper()
		before, beforeEvents := e.snapshot(id), len(e.cp.Events(id))
		_, err := e.eng.Decide(context.Background(), id, graph.DecisionInput{InterruptID: itr.ID, Action: "approve"})
		var ce *graph.ConflictError
		if !errors.As(err, &ce) || ce.InterruptID != itr.ID {
			t.Fatalf("%s: Decide = %v, want ConflictError", when, err)
		}
		after := e.snapshot(id)
		if !reflect.DeepEqual(before, after) || len(e.cp.Events(id)) != beforeEvents {
			t.Errorf("%s: a refused decision changed the task:\n%+v\n%+v", when, before, after)
		}
	}
	check("before the run")

	// The store refuses a second decision by itself, whatever the engine checked.
	err := e.cp.Decide(context.Background(), &graph.Decision{InterruptID: itr.ID, TaskID: id, Action: "approve"}, &graph.Event{Type: graph.EventDecisionRecorded})
	var ce *graph.ConflictError
	if !errors.As(err, &ce) {
		t.Errorf("MemoryCheckpointer.Decide on a resolved interrupt = %v, want ConflictError", err)
	}
	e.run(id)
	check("after the run")
}

func TestDecisionWithAnotherTasksInterrupt(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	e := newEnv(t, gateGraph("gate", true, &runs))
	a, b := e.create("gate", `{"gates": {}}`), e.create("gate", `{"gates": {}}`)
	e.waiting(a)
	itrB := e.waiting(b)

	_, err := e.eng.Decide(context.Background(), a, graph.DecisionInput{InterruptID: itrB.ID, Action: "approve"})
	var wt *graph.WrongTaskError
	if !errors.Is(err, graph.ErrInterruptNotFound) || !errors.As(err, &wt) {
		t.Fatalf("Decide = %v, want ErrInterruptNotFound", err)
	}
	if itr, _ := e.cp.Interrupt(context.Background(), itrB.ID); itr.Status != graph.InterruptPending {
		t.Errorf("b's interrupt is %s", itr.Status)
	}
	if task, _ := e.cp.Task(a); task.Status != graph.StatusWaiting {
		t.Errorf("task a is %s", task.Status)
	}
	_, err = e.eng.Decide(context.Background(), a, graph.DecisionInput{InterruptID: graph.NewID(), Action: "approve"})
	if !errors.Is(err, graph.ErrInterruptNotFound) {
		t.Errorf("unknown interrupt: %v", err)
	}
	// b's own decision still works.
	e.decide(b, graph.DecisionInput{InterruptID: itrB.ID, Action: "approve"})
}

func TestDecisionValidation(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	e := newEnv(t, gateGraph("gate", true, &runs), gateGraph("noedit", false, &runs))
	id := e.create("gate", `{"gates": {}}`)
	itr := e.waiting(id)
	noEdit := e.create("noedit", `{"gates": {}}`)
	noEditItr := e.waiting(noEdit)

	for _, tc := range []struct {
		name  string
		task  string
		in    graph.DecisionInput
		field string
	}{
		{"reject without feedback", id, graph.DecisionInput{InterruptID: itr.ID, Action: "reject"}, "feedback"},
		{"reject with blank feedback", id, graph.DecisionInput{InterruptID: itr.ID, Action: "reject", Feedback: " \n\t"}, "feedback"},
		{"no interrupt id", id, graph.DecisionInput{Action: "approve"}, "interrupt_id"},
		{"interrupt id not a uuid", id, graph.DecisionInput{InterruptID: "itr-1", Action: "approve"}, "interrupt_id"},
		{"no action", id, graph.DecisionInput{InterruptID: itr.ID}, "action"},
		{"unknown action", id, graph.DecisionInput{InterruptID: itr.ID, Action: "maybe"}, "action"},
		{"respond to a gate", id, graph.DecisionInput{InterruptID: itr.ID, Action: "respond", Value: jsonString("x")}, "action"},
		{"edit not offered", noEdit, graph.DecisionInput{InterruptID: noEditItr.ID, Action: "edit", Value: jsonString("x")}, "action"},
		{"edit without value", id, graph.DecisionInput{InterruptID: itr.ID, Action: "edit"}, "value"},
		{"edit with empty text", id, graph.DecisionInput{InterruptID: itr.ID, Action: "edit", Value: jsonString("")}, "value"},
		{"value not JSON", id, graph.DecisionInput{InterruptID: itr.ID, Action: "approve", Value: json.RawMessage("{bad")}, "value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.cp.Events(tc.task))
			_, err := e.eng.Decide(context.Background(), tc.task, tc.in)
			var ve *graph.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field || !errors.Is(err, graph.ErrInvalid) {
				t.Fatalf("Decide = %v, want ValidationError on %s", err, tc.field)
			}
			if len(e.cp.Events(tc.task)) != before {
				t.Error("a refused decision wrote an event")
			}
		})
	}
	for _, x := range []struct{ task, itr string }{{id, itr.ID}, {noEdit, noEditItr.ID}} {
		if got, _ := e.cp.Interrupt(context.Background(), x.itr); got.Status != graph.InterruptPending {
			t.Errorf("interrupt is %s after refused decisions", got.Status)
		}
		if task, _ := e.cp.Task(x.task); task.Status != graph.StatusWaiting {
			t.Errorf("task is %s after refused decisions", task.Status)
		}
	}
}

var errFlaky = errors.New("flaky")

func TestRetryPolicy(t *testing.T) {
	t.Parallel()
	policy := graph.RetryPolicy{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Jitter: 0.5}
	for _, tc := range []struct {
		name       string
		policy     graph.RetryPolicy
		failures   int   // tries that fail before one succeeds
		err        error // what they fail with
		wantStatus graph.TaskStatus
		wantTries  int
	}{
		{"transient twice then success", policy, 2, errFlaky, graph.StatusSucceeded, 3},
		{"retries exhausted", policy, 99, errFlaky, graph.StatusFailed, 3},
		{"permanent is not retried", policy, 99, graph.Permanent(errFlaky), graph.StatusFailed, 1},
		{"not transient by the policy", graph.RetryPolicy{Attempts: 3, Transient: func(err error) bool { return !errors.Is(err, errFlaky) }},
			99, errFlaky, graph.StatusFailed, 1},
		{"no policy", graph.RetryPolicy{}, 1, errFlaky, graph.StatusFailed, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var tries atomic.Int32
			flaky := func(_ context.Context, run *graph.NodeRun, s st) (st, error) {
				n := int(tries.Add(1))
				if run.Attempt != n {
					return s, graph.Permanent(fmt.Errorf("attempt %d on try %d", run.Attempt, n))
				}
				s.Log = append(s.Log, fmt.Sprintf("try %d", n)) // a failed try's changes must not survive
				s.Marks[fmt.Sprintf("try %d", n)] = true        // not even those made in place
				run.Event("custom.note", map[string]int{"try": n})
				if n <= tc.failures {
					return s, fmt.Errorf("try %d: %w", n, tc.err)
				}
				return s, nil
			}
			prep := func(_ context.Context, _ *graph.NodeRun, s st) (st, error) {
				s.Marks = map[string]bool{"prep": true}
				return s, nil
			}
			g := compile(t, graph.New[st]("retry").Node("prep", prep).Node("flaky", flaky, graph.WithRetry(tc.policy)).
				Edge("prep", "flaky").Edge("flaky", graph.END))
			e := newEnv(t, g)
			id := e.create("retry", "")
			out := e.run(id)
			if out.Status != tc.wantStatus || int(tries.Load()) != tc.wantTries {
				t.Fatalf("outcome = %+v after %d tries, want %s after %d", out, tries.Load(), tc.wantStatus, tc.wantTries)
			}
			retrying := e.events(id, graph.EventNodeRetrying)
			if len(retrying) != tc.wantTries-1 {
				t.Errorf("node.retrying events = %d, want %d", len(retrying), tc.wantTries-1)
			}
			for i, ev := range retrying {
				var raw map[string]any
				_ = json.Unmarshal(ev.Data, &raw)
				if raw["attempt"] != float64(i+1) || raw["next_attempt"] != float64(i+2) || !strings.Contains(fmt.Sprint(raw["error"]), "flaky") {
					t.Errorf("retrying event %d = %s", i, ev.Data)
				}
				if ms, ok := raw["backoff_ms"].(float64); !ok || ms > 4 {
					t.Errorf("backoff_ms = %v beyond MaxBackoff", raw["backoff_ms"])
				}
			}
			if n := len(e.events(id, "custom.note")); n != tc.wantTries {
				t.Errorf("events of the tries = %d, want %d (every try's events are kept)", n, tc.wantTries)
			}
			if tc.wantStatus == graph.StatusSucceeded {
				res := e.result(id)
				last := fmt.Sprintf("try %d", tc.wantTries)
				if !slices.Equal(res.Log, []string{last}) || !reflect.DeepEqual(res.Marks, map[string]bool{"prep": true, last: true}) {
					t.Errorf("state = %+v: a failed try's changes survived", res)
				}
				return
			}
			task, _ := e.cp.Task(id)
			if !strings.Contains(task.Error, fmt.Sprintf("try %d: flaky", tc.wantTries)) || task.CurrentNode != "flaky" {
				t.Errorf("task = %s at %s: %q", task.Status, task.CurrentNode, task.Error)
			}
			if cp := e.snapshot(id).Checkpoint; cp.NextNode != "flaky" || cp.Iterations["flaky"] != 0 || cp.LastNode != "prep" {
				t.Errorf("checkpoint after failure = %+v, want the failed node next", cp)
			}
		})
	}
}

func TestNodeTimeout(t *testing.T) {
	t.Parallel()
	var tries atomic.Int32
	slow := func(ctx context.Context, _ *graph.NodeRun, s st) (st, error) {
		tries.Add(1)
		if _, ok := ctx.Deadline(); !ok {
			return s, graph.Permanent(errors.New("no deadline"))
		}
		<-ctx.Done()
		return s, ctx.Err()
	}
	fast := func(ctx context.Context, _ *graph.NodeRun, s st) (st, error) { s.N++; return s, nil }
	g := compile(t, graph.New[st]("slow").
		Node("fast", fast, graph.WithTimeout(time.Minute)).
		Node("slow", slow, graph.WithTimeout(20*time.Millisecond), graph.WithRetry(graph.RetryPolicy{Attempts: 2, Backoff: time.Millisecond})).
		Edge("fast", "slow").Edge("slow", graph.END))
	e := newEnv(t, g)
	id := e.create("slow", "")
	start := time.Now()
	out := e.run(id)
	if out.Status != graph.StatusFailed || !strings.Contains(out.Error, "node slow timed out after 20ms") ||
		!strings.Contains(out.Error, context.DeadlineExceeded.Error()) {
		t.Fatalf("outcome = %+v", out)
	}
	if tries.Load() != 2 {
		t.Errorf("slow tried %d times, want 2 (a timeout is transient)", tries.Load())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
	if s := e.state(id); s.N != 1 {
		t.Errorf("fast's work lost: %+v", s)
	}
}

func TestFenceMismatch(t *testing.T) {
	t.Parallel()
	t.Run("at the start", func(t *testing.T) {
		t.Parallel()
		var ran atomic.Int32
		count := func(_ context.Context, _ *graph.NodeRun, s st) (st, error) { ran.Add(1); return s, nil }
		e := newEnv(t, compile(t, graph.New[st]("f").Node("a", count).Edge("a", graph.END)))
		id := e.create("f", "")
		e.cp.SetFence(id, 7)
		_, err := e.eng.Run(context.Background(), id, 6)
		if !errors.Is(err, graph.ErrLeaseLost) {
			t.Fatalf("Run with a stale fence = %v, want ErrLeaseLost", err)
		}
		if task, _ := e.cp.Task(id); task.Status != graph.StatusQueued || ran.Load() != 0 || len(e.events(id, graph.EventNodeStarted)) != 0 {
			t.Errorf("a stale writer changed the task: %s, ran %d", task.Status, ran.Load())
		}
		out, err := e.eng.Run(context.Background(), id, 7)
		if err != nil || out.Status != graph.StatusSucceeded {
			t.Fatalf("Run with the fence = %+v, %v", out, err)
		}
	})
	t.Run("lost during a node run", func(t *testing.T) {
		t.Parallel()
		var cp *graph.MemoryCheckpointer
		takeover := func(_ context.Context, run *graph.NodeRun, s st) (st, error) {
			cp.SetFence(run.TaskID, 1) // another replica took the task over
			s.N = 42
			return s, nil
		}
		e := newEnv(t, compile(t, graph.New[st]("f").Node("a", takeover).Edge("a", graph.END)))
		cp = e.cp
		id := e.create("f", "")
		before := e.snapshot(id).Checkpoint
		_, err := e.eng.Run(context.Background(), id, 0)
		if !errors.Is(err, graph.ErrLeaseLost) {
			t.Fatalf("Run = %v, want ErrLeaseLost", err)
		}
		after := e.snapshot(id).Checkpoint
		if after.Step != before.Step || string(after.State) != string(before.State) || len(e.events(id, graph.EventNodeCompleted)) != 0 {
			t.Errorf("the node run of a lost lease was committed: %+v", after)
		}
	})
}

func TestCancelledRunResumes(t *testing.T) {
	t.Parallel()
	var tries atomic.Int32
	entered := make(chan struct{}, 4)
	block := func(ctx context.Context, _ *graph.NodeRun, s st) (st, error) {
		if tries.Add(1) == 1 {
			entered <- struct{}{}
			<-ctx.Done()
			return s, ctx.Err()
		}
		s.N++
		return s, nil
	}
	g := compile(t, graph.New[st]("c").Node("block", block, graph.WithRetry(graph.RetryPolicy{Attempts: 5})).Edge("block", graph.END))
	e := newEnv(t, g)
	id := e.create("c", "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := e.eng.Run(ctx, id, 0); done <- err }()
	<-entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if n := len(e.events(id, graph.EventNodeRetrying, graph.EventNodeFailed)); n != 0 {
		t.Errorf("a cancelled run was retried or failed (%d events)", n)
	}
	// A fresh engine on the same store re-runs the lost node run.
	eng2, _ := graph.NewEngine(e.cp, []graph.Workflow{g})
	out, err := eng2.Run(context.Background(), id, 0)
	if err != nil || out.Status != graph.StatusSucceeded || e.result(id).N != 1 {
		t.Fatalf("resumed Run = %+v, %v", out, err)
	}
	if got := phases(e.events(id, graph.EventNodeStarted)); !slices.Equal(got, []string{"block", "block"}) {
		t.Errorf("phases = %v: the lost run must re-run as the same iteration", got)
	}
}

// rich is a state with every kind of JSON value.
type rich struct {
	Count   int               `json:"count"`
	Big     int64             `json:"big"`
	Ratio   float64           `json:"ratio"`
	Text    string            `json:"text"`
	When    time.Time         `json:"when"`
	Tags    []string          `json:"tags"`
	Meta    map[string]string `json:"meta"`
	Nested  *richNested       `json:"nested"`
	Raw     json.RawMessage   `json:"raw"`
	Skipped string            `json:"-"`
	Log     []string          `json:"log"`
}

type richNested struct {
	Items []map[string]int `json:"items"`
	Flag  bool             `json:"flag"`
}

func roundTrip[T any](t testing.TB, v T) T {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal %T: %v", v, err)
	}
	return out
}

// jsonCP stores everything as JSON, the way a database does: what the
// engine reads back went through json.Marshal and json.Unmarshal.
type jsonCP struct {
	t testing.TB
	graph.Checkpointer
}

func (j jsonCP) Load(ctx context.Context, id string) (*graph.Snapshot, error) {
	snap, err := j.Checkpointer.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	return roundTrip(j.t, snap), nil
}

func (j jsonCP) Commit(ctx context.Context, c *graph.Commit) error {
	return j.Checkpointer.Commit(ctx, roundTrip(j.t, c))
}

func TestCheckpointStateRoundTripsOnAFreshEngine(t *testing.T) {
	t.Parallel()
	when := time.Date(2026, 3, 4, 5, 6, 7, 890123456, time.FixedZone("x", 3600))
	step := func(_ context.Context, run *graph.NodeRun, s rich) (rich, error) {
		s.Count++
		s.Big = 1<<53 - 1
		s.Ratio = 0.1 + float64(s.Count)/3
		s.Text = "héllo \"wörld\" <&> \u2028 " + run.Phase
		s.When = when.Add(time.Duration(s.Count) * time.Nanosecond)
		s.Tags = append(s.Tags, run.Phase)
		if s.Meta == nil {
			s.Meta = map[string]string{}
		}
		s.Meta[run.Node] = fmt.Sprint(run.Iteration)
		s.Nested = &richNested{Items: []map[string]int{{"a": 1}, {"b": s.Count}}, Flag: s.Count%2 == 0}
		s.Raw = json.RawMessage(`{"k":[1,2.5,"x",null,true]}`)
		s.Skipped = "never persisted"
		return s, nil
	}
	build := func() *graph.Graph[rich] {
		g, err := graph.New[rich]("rich").Node("one", step).Node("two", step).
			Gate("one", graph.Gate[rich]{Kind: "k", Option: "allowOne",
				OnReject: func(s rich, fb string, it int) (rich, error) { s.Log = append(s.Log, fb); return s, nil }}).
			Edge("one", "two").Edge("two", graph.END).
			Init(func(json.RawMessage, graph.Options) (rich, error) {
				return rich{Meta: map[string]string{"init": "1"}}, nil
			}).
			Compile()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}

	mem := graph.NewMemoryCheckpointer()
	store := jsonCP{t: t, Checkpointer: mem}
	engA, _ := graph.NewEngine(store, []graph.Workflow{build()})
	task, err := engA.Create(context.Background(), graph.NewTask{Workflow: "rich", Options: json.RawMessage(`{"gates":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := engA.Run(context.Background(), task.ID, 0)
	if err != nil || out.Status != graph.StatusWaiting {
		t.Fatalf("Run = %+v, %v", out, err)
	}

	// The checkpointed state decodes and encodes to the same bytes.
	snap, _ := store.Load(context.Background(), task.ID)
	var s rich
	if err := json.Unmarshal(snap.Checkpoint.State, &s); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(s)
	if string(again) != string(snap.Checkpoint.State) {
		t.Fatalf("state does not round-trip:\n%s\n%s", snap.Checkpoint.State, again)
	}
	if s.Skipped != "" || !s.When.Equal(when.Add(time.Nanosecond)) || s.Meta["one"] != "1" || s.Meta["init"] != "1" {
		t.Errorf("decoded state = %+v", s)
	}

	// A fresh engine (another process) continues from the stored checkpoint.
	engB, _ := graph.NewEngine(store, []graph.Workflow{build()})
	if _, err := engB.Decide(context.Background(), task.ID, graph.DecisionInput{InterruptID: out.Interrupt.ID, Action: "reject", Feedback: "again"}); err != nil {
		t.Fatal(err)
	}
	engC, _ := graph.NewEngine(store, []graph.Workflow{build()})
	out, err = engC.Run(context.Background(), task.ID, 0)
	if err != nil || out.Status != graph.StatusWaiting || out.Interrupt.Iteration != 2 {
		t.Fatalf("Run on a fresh engine = %+v, %v", out, err)
	}
	engD, _ := graph.NewEngine(store, []graph.Workflow{build()})
	if _, err := engD.Decide(context.Background(), task.ID, graph.DecisionInput{InterruptID: out.Interrupt.ID, Action: "approve"}); err != nil {
		t.Fatal(err)
	}
	if out, err = engD.Run(context.Background(), task.ID, 0); err != nil || out.Status != graph.StatusSucceeded {
		t.Fatalf("final Run = %+v, %v", out, err)
	}

	// Every checkpoint in the history round-trips too.
	for _, cp := range mem.History(task.ID) {
		var x rich
		if err := json.Unmarshal(cp.State, &x); err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(x); string(b) != string(cp.State) {
			t.Errorf("step %d does not round-trip", cp.Step)
		}
	}
	// An uninterrupted run (gate auto-approved) in one process agrees.
	ref := graph.NewMemoryCheckpointer()
	engRef, _ := graph.NewEngine(ref, []graph.Workflow{build()})
	refTask, _ := engRef.Create(context.Background(), graph.NewTask{Workflow: "rich", Options: json.RawMessage(`{"gates":{"allowOne":true}}`)})
	if _, err := engRef.Run(context.Background(), refTask.ID, 0); err != nil {
		t.Fatal(err)
	}
	got, _ := mem.Task(task.ID)
	var res rich
	if err := json.Unmarshal(got.Result, &res); err != nil {
		t.Fatal(err)
	}
	if res.Count != 3 || !slices.Equal(res.Tags, []string{"one", "one:2", "two"}) || !slices.Equal(res.Log, []string{"again"}) ||
		res.Meta["one"] != "2" || res.Meta["two"] != "1" || string(res.Raw) != `{"k":[1,2.5,"x",null,true]}` ||
		res.Nested == nil || res.Nested.Items[1]["b"] != 3 || res.Nested.Flag {
		t.Errorf("result = %+v", res)
	}
	refRow, _ := ref.Task(refTask.ID)
	var refRes rich
	_ = json.Unmarshal(refRow.Result, &refRes)
	if refRes.Count != 2 || refRes.Big != res.Big {
		t.Errorf("reference result = %+v", refRes)
	}
}

type sink struct {
	mu  sync.Mutex
	evs []graph.Event
}

func (s *sink) Publish(evs []graph.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, evs...)
}

func TestSinkAndRegistry(t *testing.T) {
	t.Parallel()
	g := compile(t, graph.New[st]("s").Node("a", noop).Edge("a", graph.END))
	if _, err := graph.NewEngine(graph.NewMemoryCheckpointer(), []graph.Workflow{g, g}); err == nil {
		t.Error("a workflow registered twice was accepted")
	}
	cp := graph.NewMemoryCheckpointer()
	var sk sink
	eng, err := graph.NewEngine(cp, []graph.Workflow{g}, graph.WithSink(&sk))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Create(context.Background(), graph.NewTask{Workflow: "nope"}); !errors.Is(err, graph.ErrUnknownWorkflow) {
		t.Errorf("Create of an unknown workflow: %v", err)
	}
	if _, err := eng.Run(context.Background(), graph.NewID(), 0); !errors.Is(err, graph.ErrTaskNotFound) {
		t.Errorf("Run of an unknown task: %v", err)
	}
	task, err := eng.Create(context.Background(), graph.NewTask{Workflow: "s", Title: "T", CreatedBy: "me"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := eng.Run(context.Background(), task.ID, 0); err != nil || out.Status != graph.StatusSucceeded {
		t.Fatalf("Run = %+v, %v", out, err)
	}
	stored := cp.Events(task.ID)
	var types []string
	for i, ev := range sk.evs {
		types = append(types, ev.Type)
		if ev.Seq != stored[i].Seq || ev.Seq != int64(i+1) {
			t.Errorf("published event %d has seq %d", i, ev.Seq)
		}
	}
	want := []string{graph.EventTaskCreated, graph.EventNodeStarted, graph.EventNodeCompleted, graph.EventTaskCompleted}
	if !slices.Equal(types, want) {
		t.Errorf("published %v, want %v", types, want)
	}
	if c := stored[2]; c.DurationMS == nil || c.Phase != "a" || c.Iteration != 1 {
		t.Errorf("node.completed = %+v", c)
	}
	if ws := eng.Workflows(); len(ws) != 1 || ws[0].Name() != "s" {
		t.Errorf("Workflows() = %v", ws)
	}
}

// commitLog is a checkpointer that records the event types of each commit;
// those of a commit merged before it (Commit.Before) come first, marked
// with a leading "before:" entry.
type commitLog struct {
	*graph.MemoryCheckpointer
	mu      sync.Mutex
	commits [][]string
}

func (l *commitLog) Commit(ctx context.Context, c *graph.Commit) error {
	var types []string
	if b := c.Before; b != nil {
		label := "before:" + b.Reason
		if b.Quiet {
			// it leaves the task row to the commit it is merged into
			label += " quiet"
		}
		types = append(types, label)
		for _, ev := range b.Events {
			types = append(types, ev.Type)
		}
	}
	for _, ev := range c.Events {
		types = append(types, ev.Type)
	}
	l.mu.Lock()
	l.commits = append(l.commits, types)
	l.mu.Unlock()
	return l.MemoryCheckpointer.Commit(ctx, c)
}

func (l *commitLog) log() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.commits)
}

// A run's first node.started waits a moment for its node: a node that ends
// within it sends its start with its completion (one commit fewer); a slow
// node's start is committed while it runs, so live views see it.
func TestFirstStartCommitWaitsForItsNode(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	slow := func(_ context.Context, _ *graph.NodeRun, s st) (st, error) {
		close(entered)
		<-release
		return s, nil
	}
	g := compile(t, graph.New[st]("w").Node("fast", noop).Node("slow", slow).Node("last", noop).
		Edge("fast", "slow").Edge("slow", "last").Edge("last", graph.END))
	l := &commitLog{MemoryCheckpointer: graph.NewMemoryCheckpointer()}
	// A delay no node here outlasts, however loaded the machine.
	eng, err := graph.NewEngine(l, []graph.Workflow{g}, graph.WithStartCommitDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	task, err := eng.Create(context.Background(), graph.NewTask{Workflow: "w"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := eng.Run(context.Background(), task.ID, 0); done <- err }()
	<-entered
	want := [][]string{
		{graph.EventTaskCreated},
		{graph.EventNodeStarted, graph.EventNodeCompleted, graph.EventNodeStarted},
	}
	if got := l.log(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("commits before the slow node ends: %v, want %v", got, want)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A run whose first node is slow: its start is committed alone while
	// the node runs, after the delay.
	entered2, release2 := make(chan struct{}), make(chan struct{})
	slow2 := func(_ context.Context, _ *graph.NodeRun, s st) (st, error) {
		close(entered2)
		<-release2
		return s, nil
	}
	g2 := compile(t, graph.New[st]("s").Node("slow", slow2).Edge("slow", graph.END))
	l2 := &commitLog{MemoryCheckpointer: graph.NewMemoryCheckpointer()}
	eng2, err := graph.NewEngine(l2, []graph.Workflow{g2}, graph.WithStartCommitDelay(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	task2, err := eng2.Create(context.Background(), graph.NewTask{Workflow: "s"})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, err := eng2.Run(context.Background(), task2.ID, 0); done <- err }()
	<-entered2
	deadline := time.Now().Add(5 * time.Second)
	for len(l2.log()) < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := l2.log(); len(got) != 2 || !slices.Equal(got[1], []string{graph.EventNodeStarted}) {
		t.Fatalf("commits while the slow first node runs: %v, want its node.started alone", got)
	}
	if task, _ := l2.Task(task2.ID); task.Status != graph.StatusRunning {
		t.Errorf("task %s while its first node runs, want running", task.Status)
	}
	close(release2)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := phases(l2.Events(task2.ID)); !slices.Equal(got, []string{"", "slow", "slow", ""}) {
		t.Errorf("events %v", got)
	}
}

// A decision applied on resume waits with its node's start, as a run's
// first start does: a node that ends within the delay commits the
// decision's checkpoint first in its own commit (both in the history, in
// order); a slower node's decision is committed alone while it runs.
func TestDecisionCommitWaitsForItsNode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		delay time.Duration
		slow  bool
		want  [][]string
	}{
		{"fast", time.Hour, false, [][]string{{"before:decision quiet", graph.EventNodeStarted,
			graph.EventArtifactCreated, graph.EventNodeCompleted, graph.EventInterruptRaised, graph.EventTaskWaiting}}},
		{"slow", time.Millisecond, true, [][]string{{graph.EventNodeStarted},
			{graph.EventArtifactCreated, graph.EventNodeCompleted, graph.EventInterruptRaised, graph.EventTaskWaiting}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			entered, release := make(chan struct{}, 1), make(chan struct{})
			work := func(_ context.Context, run *graph.NodeRun, s st) (st, error) {
				if run.Node == "b" && tc.slow {
					entered <- struct{}{}
					<-release
				}
				s.N++
				run.Artifact(run.Node+".md", "text/plain", "out")
				return s, nil
			}
			again := func(s st, _ string, _ int) (st, error) { return s, nil }
			g := compile(t, graph.New[st]("w").Node("a", work).Node("b", work).
				Gate("a", graph.Gate[st]{Kind: "review", Artifact: "a.md", OnReject: again}).
				Gate("b", graph.Gate[st]{Kind: "review", Artifact: "b.md", OnReject: again}).
				Edge("a", "b").Edge("b", graph.END))
			l := &commitLog{MemoryCheckpointer: graph.NewMemoryCheckpointer()}
			eng, err := graph.NewEngine(l, []graph.Workflow{g}, graph.WithStartCommitDelay(tc.delay))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			task, err := eng.Create(ctx, graph.NewTask{Workflow: "w", Options: []byte(`{"gates":{}}`)})
			if err != nil {
				t.Fatal(err)
			}
			out, err := eng.Run(ctx, task.ID, 0)
			if err != nil || out.Interrupt == nil {
				t.Fatalf("run to the gate: %+v %v", out, err)
			}
			if _, err := eng.Decide(ctx, task.ID, graph.DecisionInput{InterruptID: out.Interrupt.ID, Action: graph.ActionApprove}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			n := len(l.log())
			go func() {
				out, err := eng.Run(ctx, task.ID, 0)
				if err == nil && out.Interrupt == nil {
					err = fmt.Errorf("no gate after b: %+v", out)
				}
				done <- err
			}()
			if tc.slow {
				<-entered
				deadline := time.Now().Add(5 * time.Second)
				for len(l.log()) < n+1 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				close(release)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := l.log()[n:]; !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("commits after the decision: %v, want %v", got, tc.want)
			}
			// start, a's run (at its gate), the decision (b next), b's run
			// (at its gate).
			hist := l.History(task.ID)
			if len(hist) != 4 {
				t.Fatalf("%d checkpoints in the history, want 4", len(hist))
			}
			for i, h := range hist {
				if h.Step != i {
					t.Fatalf("history step %d at %d", h.Step, i)
				}
			}
			if d, b := hist[2], hist[3]; d.PendingInterrupt != "" || d.LastNode != "a" || d.NextNode != "b" ||
				b.PendingInterrupt == "" || b.LastNode != "b" {
				t.Fatalf("decision checkpoint %+v, then %+v", d, b)
			}
		})
	}
}
