package feature_test

// Durability of the feature workflow on PostgreSQL: cancelled node runs,
// refused decisions, failing routers and validators, concurrent tasks on
// one database, and bad input that must change nothing. Every invocation
// goes through a fresh engine, as after a restart.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
)

// dbTables are the tables a task writes.
var dbTables = []string{"tasks", "workflow_checkpoints", "checkpoint_history", "interrupts", "decisions", "task_events", "artifacts"}

// tableDigest is the row count and a hash of the content of every table:
// equal digests mean no row was added, removed or changed.
func (p *pgEnv) tableDigest() string {
	p.t.Helper()
	var parts []string
	for _, tbl := range dbTables {
		var n int
		var sum string
		err := p.pool.QueryRow(ctxFor(p.t), `SELECT count(*), coalesce(md5(string_agg(x::text, E'\n' ORDER BY x::text)), '')
			FROM `+tbl+` x`).Scan(&n, &sum)
		if err != nil {
			p.t.Fatalf("digest of %s: %v", tbl, err)
		}
		parts = append(parts, fmt.Sprintf("%s=%d(%.8s)", tbl, n, sum))
	}
	return strings.Join(parts, " ")
}

// unchanged checks that f leaves every table as it was.
func (p *pgEnv) unchanged(what string, f func()) {
	p.t.Helper()
	before := p.tableDigest()
	f()
	if after := p.tableDigest(); after != before {
		p.t.Errorf("%s changed rows:\nbefore %s\nafter  %s", what, before, after)
	}
}

func (p *pgEnv) exec(sql string, args ...any) {
	p.t.Helper()
	tag, err := p.pool.Exec(ctxFor(p.t), sql, args...)
	if err != nil {
		p.t.Fatalf("%s: %v", sql, err)
	}
	if tag.RowsAffected() != 1 {
		p.t.Fatalf("%s: %d rows affected, want 1", sql, tag.RowsAffected())
	}
}

// wantNoDuplicateCompletions checks that no node run was recorded as
// completed twice with the same iteration.
func (p *pgEnv) wantNoDuplicateCompletions(id string) {
	p.t.Helper()
	var dups []string
	rows, err := p.pool.Query(ctxFor(p.t), `SELECT node || ':' || iteration FROM task_events
		WHERE task_id = $1 AND type = 'node.completed' GROUP BY node, iteration HAVING count(*) > 1`, id)
	if err != nil {
		p.t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			p.t.Fatal(err)
		}
		dups = append(dups, s)
	}
	rows.Close()
	if len(dups) > 0 {
		p.t.Errorf("node runs completed twice: %v", dups)
	}
}

// A node run cancelled mid-flight is lost: Run returns the context's error,
// and a fresh engine resumes from the last checkpoint, running only that
// node again.
func TestDurabilityCancelledNodeRunResumes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, role, node, options string
		before                    roleCalls // calls when the node blocks (the blocked one included)
		completedBefore           string    // last node completed before the blocked one
	}{
		{"research", feature.RoleResearch, "research", "",
			roleCalls{analyze: 1, requirements: 1, research: 1}, "validate_spec_requirements"},
		{"gated requirements", feature.RoleRequirements, "requirements", gatesAllClosed,
			roleCalls{analyze: 1, requirements: 1}, "validate_spec_analyze"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := setup(t)
			id := p.create(tc.options)
			p.stub.Block(tc.role)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				out graph.Outcome
				err error
			}
			done := make(chan result, 1)
			go func() {
				out, err := p.engine().Run(ctx, id, 0)
				done <- result{out, err}
			}()
			select {
			case req := <-p.stub.Entered():
				if req.Role != tc.role || req.TaskID != id || req.Iteration != 1 {
					t.Fatalf("blocked call = %+v", req)
				}
			case r := <-done:
				t.Fatalf("Run returned before %s blocked: %+v, %v", tc.node, r.out, r.err)
			case <-time.After(time.Minute):
				t.Fatalf("%s was never called", tc.node)
			}
			// The task's row shows the node a moment after it starts (the
			// commits of a running task leave the row behind while its
			// nodes are quick).
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
				if task := p.task(id); task.Status == graph.StatusRunning && task.CurrentNode == tc.node {
					break
				}
				if time.Now().After(deadline) {
					task := p.task(id)
					t.Fatalf("task while %s runs = %s at %s, want running at %s", tc.node, task.Status, task.CurrentNode, tc.node)
				}
			}
			cancel()
			var r result
			select {
			case r = <-done:
			case <-time.After(time.Minute):
				t.Fatal("Run did not return after its context was cancelled")
			}
			if !errors.Is(r.err, context.Canceled) {
				t.Fatalf("Run = %+v, %v; want context.Canceled", r.out, r.err)
			}

			// The node run in flight left no trace but its start.
			p.wantCalls(tc.before)
			task := p.task(id)
			if task.Status != graph.StatusRunning || task.CurrentNode != tc.node || task.Error != "" {
				t.Errorf("task after the cancel = %s at %s (%q), want running at %s", task.Status, task.CurrentNode, task.Error, tc.node)
			}
			snap, err := p.store().Load(ctxFor(t), id)
			if err != nil {
				t.Fatal(err)
			}
			if cp := snap.Checkpoint; cp.NextNode != tc.node || cp.LastNode != tc.completedBefore || cp.Iterations[tc.node] != 0 {
				t.Errorf("checkpoint after the cancel: last %s next %s iterations %v", cp.LastNode, cp.NextNode, cp.Iterations)
			}
			p.wantCompletions(id, nodesUpTo(tc.completedBefore, 1))
			if got := p.phases(id, graph.EventNodeCompleted, tc.node); len(got) != 0 {
				t.Errorf("%s completed before it was resumed: %v", tc.node, got)
			}
			// A cancellation is not a failure.
			for _, typ := range []string{graph.EventNodeFailed, graph.EventTaskFailed} {
				if evs := p.eventsOf(id, typ); len(evs) != 0 {
					t.Errorf("%s events after the cancel: %+v", typ, evs)
				}
			}

			// A fresh engine resumes: only the cancelled node runs again.
			p.stub.Recover(tc.role)
			var after roleCalls
			switch tc.node {
			case "research":
				res := p.succeeds(id)
				wantCompleteResult(t, res, 0)
				// Earlier roles unchanged, research once more, then the rest once.
				after = roleCalls{analyze: 1, requirements: 1, research: 2, plan: 1, implement: 1, merge: 1}
				p.wantCompletions(id, nodesUpTo("merge", 1))
			case "requirements":
				after = roleCalls{analyze: 1, requirements: 2}
				// Still the first iteration: the lost run does not count.
				p.waitsAt(id, "requirements", "prd", 1)
				p.wantCompletions(id, nodesUpTo("requirements", 1))
			}
			p.wantCalls(after)
			wantStrings(t, "node.started of "+tc.node, p.phases(id, graph.EventNodeStarted, tc.node), []string{tc.node, tc.node})
			wantStrings(t, "node.completed of "+tc.node, p.phases(id, graph.EventNodeCompleted, tc.node), []string{tc.node})
			if ts := p.phaseTimings(id); slices.Contains(ts, tc.node+":2") || !slices.Contains(ts, tc.node) {
				t.Errorf("phaseTimings = %v, want one run of %s", ts, tc.node)
			}
			var started []int
			for _, r := range p.stub.Requests() {
				if r.Role == tc.role {
					started = append(started, r.Iteration)
				}
			}
			if !slices.Equal(started, []int{1, 1}) {
				t.Errorf("iterations of the %s calls = %v, want [1 1]", tc.role, started)
			}
			p.wantNoDuplicateCompletions(id)
			p.audit(id)
		})
	}
}

// A decision on an interrupt that is no longer pending is refused with a
// conflict and changes nothing.
func TestDurabilityDecisionOnNonPendingInterruptConflicts(t *testing.T) {
	t.Parallel()
	p := setup(t)
	id := p.create(gatesAllClosed)
	prd := p.waitsAt(id, "requirements", "prd", 1)
	p.decide(id, prd, graph.ActionApprove, "")

	conflict := func(interruptID, action, feedback string) {
		t.Helper()
		p.unchanged("a decision on "+interruptID, func() {
			_, err := p.engine().Decide(ctxFor(t), id, graph.DecisionInput{InterruptID: interruptID, Action: action, Feedback: feedback})
			var ce *graph.ConflictError
			if !errors.As(err, &ce) || !errors.Is(err, graph.ErrConflict) {
				t.Fatalf("Decide %s = %v, want *graph.ConflictError", action, err)
			}
			if ce.InterruptID != interruptID || ce.Status != graph.InterruptResolved ||
				err.Error() != "interrupt "+interruptID+" is resolved, not pending" {
				t.Errorf("conflict = %+v (%q)", ce, err)
			}
		})
	}
	// Decided but not yet run: a second decision on it conflicts.
	conflict(prd, graph.ActionReject, "too late")
	conflict(prd, graph.ActionApprove, "")

	plan := p.waitsAt(id, "plan", "plan", 1)
	// Consumed by a run: still refused, and the task keeps waiting on plan.
	conflict(prd, graph.ActionApprove, "")
	conflict(prd, graph.ActionReject, "again")
	if got := p.pending(id); got.ID != plan {
		t.Errorf("pending interrupt = %s, want the plan gate %s", got.ID, plan)
	}
	p.wantCalls(roleCalls{analyze: 1, requirements: 1, research: 1, plan: 1})
	itrs := p.audit(id)
	wantStrings(t, "interrupts", iterationsOf(itrs), []string{"requirements:1", "plan:1"})
}

type hopState struct {
	Hops []string `json:"hops"`
}

// hopGraph: start routes to "left" or END, but its router returns "right".
func hopGraph(t testing.TB) *graph.Graph[hopState] {
	t.Helper()
	hop := func(_ context.Context, run *graph.NodeRun, s hopState) (hopState, error) {
		s.Hops = append(s.Hops, run.Phase)
		return s, nil
	}
	g, err := graph.New[hopState]("hop").
		Node("start", hop).
		Node("left", hop).
		Route("start", func(hopState) string { return "right" }, "left", graph.END).
		Edge("left", graph.END).
		Init(func(json.RawMessage, graph.Options) (hopState, error) { return hopState{}, nil }).
		Compile()
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return g
}

// A router that returns a node it did not declare fails the task with a
// message naming the node and the router; it never hangs.
func TestDurabilityRouterReturningUndeclaredNodeFailsTask(t *testing.T) {
	t.Parallel()
	p := setup(t)
	hopEngine := func() *graph.Engine {
		e, err := graph.NewEngine(postgres.NewStore(p.pool, postgres.Options{}), []graph.Workflow{hopGraph(t)})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	task, err := hopEngine().Create(ctxFor(t), graph.NewTask{Workflow: "hop", Title: "router"})
	if err != nil {
		t.Fatal(err)
	}
	id := task.ID
	out, err := hopEngine().Run(ctxFor(t), id, 0)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	const want = `router of node "start" returned undeclared node "right" (declared: [left __end__])`
	if out.Status != graph.StatusFailed || out.Error != want {
		t.Fatalf("outcome = %+v, want failed with %q", out, want)
	}
	stored := p.task(id)
	if stored.Status != graph.StatusFailed || stored.Error != want || stored.CompletedAt == nil || stored.CurrentNode != "start" {
		t.Errorf("task = %s at %s: %q", stored.Status, stored.CurrentNode, stored.Error)
	}
	failed := p.eventsOf(id, graph.EventTaskFailed)
	if len(failed) != 1 {
		t.Fatalf("task.failed events = %d, want 1", len(failed))
	}
	var data struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(failed[0].Data, &data); err != nil || data.Error != want || failed[0].Node != "start" {
		t.Errorf("task.failed = %+v (%s)", failed[0], failed[0].Data)
	}
	if nf := p.eventsOf(id, graph.EventNodeFailed); len(nf) != 1 || nf[0].Node != "start" {
		t.Errorf("node.failed events = %+v, want one of start", nf)
	}
	for _, e := range p.eventsOf(id, graph.EventNodeStarted) {
		if e.Node != "start" {
			t.Errorf("node %s started after the bad route", e.Node)
		}
	}
	// A failed task stays failed: running it again changes nothing.
	p.unchanged("a Run of the failed task", func() {
		out, err := hopEngine().Run(ctxFor(t), id, 0)
		if err != nil || out.Status != graph.StatusFailed || out.Error != want {
			t.Errorf("second Run = %+v, %v", out, err)
		}
	})
}

// A validator that gets unparsable YAML fails the task naming the artifact
// and the line.
func TestDurabilityValidatorUnparsableYAMLFailsTask(t *testing.T) {
	t.Parallel()
	p := setup(t)
	p.stub.SetReplies(feature.RoleResearch, "summary: x\ndecisions:\n  - title: storage\n    chosen: [postgres\n")
	id := p.create("")
	out := p.run(id)
	if out.Status != graph.StatusFailed {
		t.Fatalf("outcome = %+v, want failed", out)
	}
	if !strings.Contains(out.Error, "research.yaml") || !regexp.MustCompile(`\bline \d+\b`).MatchString(out.Error) ||
		!strings.HasPrefix(out.Error, "validate_research: research.yaml does not parse: ") {
		t.Errorf("error = %q, want it to name research.yaml and the line", out.Error)
	}
	task := p.task(id)
	if task.Status != graph.StatusFailed || task.Error != out.Error || task.CurrentNode != "validate_research" {
		t.Errorf("task = %s at %s: %q", task.Status, task.CurrentNode, task.Error)
	}
	failed := p.eventsOf(id, graph.EventTaskFailed)
	if len(failed) != 1 || !strings.Contains(string(failed[0].Data), "research.yaml") {
		t.Errorf("task.failed events = %+v", failed)
	}
	if nf := p.eventsOf(id, graph.EventNodeFailed); len(nf) != 1 || nf[0].Node != "validate_research" {
		t.Errorf("node.failed events = %+v", nf)
	}
	p.wantCalls(roleCalls{analyze: 1, requirements: 1, research: 1})
	p.wantCompletions(id, nodesUpTo("research", 1))
	// The checkpoint keeps the last good state and names the failed node.
	snap, err := p.store().Load(ctxFor(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Checkpoint.NextNode != "validate_research" || snap.Checkpoint.LastNode != "research" {
		t.Errorf("checkpoint: last %s next %s", snap.Checkpoint.LastNode, snap.Checkpoint.NextNode)
	}
	p.audit(id)
}

// Ten feature tasks on one database at once, each driven by fresh engines
// in its own goroutine, some stopping at gates that other goroutines
// approve: no task sees another's state, interrupts or events.
func TestDurabilityConcurrentTasksAreIsolated(t *testing.T) {
	t.Parallel()
	p := setup(t)
	options := []struct {
		gates string
		kinds []string // the gates the task stops at, in order
	}{
		{"", nil},
		{gatesAllOpen, nil},
		{`{"gates": {}}`, []string{"prd", "plan", "merge"}},
		{`{"gates": {"allowPrd": true, "allowMerge": true}}`, []string{"plan"}},
		{`{"gates": {"allowPlan": true, "allowMerge": true}}`, []string{"prd"}},
		{`{"gates": {"allowPrd": true, "allowPlan": true}}`, []string{"merge"}},
		{gatesAllClosed, []string{"prd", "plan", "merge"}},
	}
	const n = 10
	token := func(i int) string { return fmt.Sprintf("request number %02d:", i) }
	description := func(i int) string { return fmt.Sprintf("Feature %s export report %02d as CSV.", token(i), i) }
	name := func(i int) string { return fmt.Sprintf("feature-%02d", i) }

	var (
		mu        sync.Mutex
		errs      []string
		ids       = make([]string, n)
		runnerOf  = map[string]int{} // task id → index
		approvals = map[string]int{} // task id → approvals so far
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		errs = append(errs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	// One fresh engine per call, built without t (goroutines must not Fatal).
	fresh := func() *graph.Engine {
		g, err := feature.New(p.stub, feature.WithRetry(graph.RetryPolicy{Attempts: 1}))
		if err != nil {
			panic(err)
		}
		e, err := graph.NewEngine(postgres.NewStore(p.pool, postgres.Options{}), []graph.Workflow{g})
		if err != nil {
			panic(err)
		}
		return e
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	waiting := make(chan string, n)
	var finished sync.WaitGroup
	finished.Add(n)
	// after handles a Run's outcome: a waiting task goes to the approvers.
	after := func(id string, out graph.Outcome, err error) {
		switch {
		case err != nil:
			fail("task %s: Run: %v", id, err)
			finished.Done()
		case out.Status == graph.StatusWaiting:
			waiting <- id
		case out.Status == graph.StatusSucceeded:
			finished.Done()
		default:
			fail("task %s: outcome %+v", id, out)
			finished.Done()
		}
	}
	// Approvers: read the pending interrupt back from PostgreSQL, approve
	// it and run the task on, each step on a fresh engine.
	var approvers sync.WaitGroup
	for range 3 {
		approvers.Add(1)
		go func() {
			defer approvers.Done()
			for id := range waiting {
				mu.Lock()
				approvals[id]++
				seen := approvals[id] - 1
				tooMany := seen >= len(options[runnerOf[id]%len(options)].kinds)
				mu.Unlock()
				if tooMany {
					fail("task %s: waits again after %d approvals", id, seen)
					finished.Done()
					continue
				}
				snap, err := postgres.NewStore(p.pool, postgres.Options{}).Load(ctx, id)
				if err != nil || snap.Interrupt == nil || snap.Interrupt.Status != graph.InterruptPending {
					fail("task %s: no pending interrupt (%v)", id, err)
					finished.Done()
					continue
				}
				if _, err := fresh().Decide(ctx, id, graph.DecisionInput{InterruptID: snap.Interrupt.ID,
					Action: graph.ActionApprove, DecidedBy: "approver"}); err != nil {
					fail("task %s: Decide: %v", id, err)
					finished.Done()
					continue
				}
				out, err := fresh().Run(ctx, id, 0)
				after(id, out, err)
			}
		}()
	}
	var runners sync.WaitGroup
	for i := range n {
		runners.Add(1)
		go func() {
			defer runners.Done()
			nt := graph.NewTask{Workflow: feature.Name, Title: name(i), Input: featureInput(description(i), name(i))}
			if o := options[i%len(options)].gates; o != "" {
				nt.Options = json.RawMessage(o)
			}
			task, err := fresh().Create(ctx, nt)
			if err != nil {
				fail("task %d: Create: %v", i, err)
				finished.Done()
				return
			}
			mu.Lock()
			ids[i] = task.ID
			runnerOf[task.ID] = i
			mu.Unlock()
			out, err := fresh().Run(ctx, task.ID, 0)
			after(task.ID, out, err)
		}()
	}
	allDone := make(chan struct{})
	go func() { finished.Wait(); close(allDone) }()
	select {
	case <-allDone:
	case <-ctx.Done():
		t.Fatal("the concurrent tasks did not finish")
	}
	runners.Wait()
	close(waiting)
	approvers.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Every task holds its own data only.
	p.wantCalls(roleCalls{n, n, n, n, n, n})
	var totalEvents int
	for i, id := range ids {
		s := p.state(id)
		if s.Description != description(i) || s.Name != name(i) {
			t.Errorf("task %d: state has description %q name %q", i, s.Description, s.Name)
		}
		for j := range n {
			if j != i && (strings.Contains(s.SpecYAML, token(j)) || strings.Contains(s.FeatureYAML, token(j))) {
				t.Errorf("task %d: its documents mention task %d", i, j)
			}
		}
		if !strings.Contains(s.SpecYAML, token(i)) || !strings.Contains(s.FeatureYAML, token(i)) {
			t.Errorf("task %d: its documents lack its own request", i)
		}
		task := p.task(id)
		if task.Status != graph.StatusSucceeded || task.Title != name(i) {
			t.Errorf("task %d: %s %q", i, task.Status, task.Title)
		}
		var res feature.Result
		if err := json.Unmarshal(task.Result, &res); err != nil || res.Name != name(i) {
			t.Errorf("task %d: result %s (%v)", i, task.Result, err)
		}

		// Its executor calls: one per role, in order, each with its own request.
		var roles []string
		for _, r := range p.stub.Requests() {
			if r.TaskID != id {
				continue
			}
			roles = append(roles, r.Role)
			if !strings.Contains(r.Prompt, token(i)) {
				t.Errorf("task %d: %s prompt lacks its request", i, r.Role)
			}
			for j := range n {
				if j != i && strings.Contains(r.Prompt, token(j)) {
					t.Errorf("task %d: %s prompt mentions task %d", i, r.Role, j)
				}
			}
		}
		wantStrings(t, fmt.Sprintf("task %d: executor roles", i), roles, feature.Roles())

		// Its interrupts and events only.
		p.decisions[id] = len(options[i%len(options)].kinds)
		itrs := p.audit(id) // also checks seqs run from 1 without gaps
		var kinds []string
		for _, itr := range itrs {
			kinds = append(kinds, itr.Kind)
			if itr.TaskID != id || itr.Iteration != 1 {
				t.Errorf("task %d: interrupt %+v", i, itr)
			}
		}
		wantStrings(t, fmt.Sprintf("task %d: interrupts", i), kinds, options[i%len(options)].kinds)
		ds, err := p.store().Decisions(ctxFor(t), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.TaskID != id || d.DecidedBy != "approver" || !slices.ContainsFunc(itrs, func(x graph.Interrupt) bool { return x.ID == d.InterruptID }) {
				t.Errorf("task %d: decision %+v is not on its own interrupts", i, d)
			}
		}
		evs := p.events(id)
		totalEvents += len(evs)
		for _, e := range evs {
			if e.Type == graph.EventLLMCall && !strings.Contains(string(e.Data), token(i)) {
				t.Errorf("task %d: llm.call %s lacks its request", i, e.Phase)
			}
			for j := range n {
				if j != i && strings.Contains(string(e.Data), token(j)) {
					t.Errorf("task %d: event %d (%s) mentions task %d", i, e.Seq, e.Type, j)
				}
			}
		}
		p.wantCompletions(id, nodesUpTo("merge", 1))
	}
	var rows int
	if err := p.pool.QueryRow(ctxFor(t), `SELECT count(*) FROM task_events`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != totalEvents {
		t.Errorf("task_events rows = %d, the tasks' events = %d", rows, totalEvents)
	}
}

// Bad input gets a typed error with a clear message and changes nothing.
func TestDurabilityBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	// waiting starts a task and runs it to the PRD gate.
	waiting := func(p *pgEnv) (id, interruptID string) {
		id = p.create(gatesAllClosed)
		return id, p.waitsAt(id, "requirements", "prd", 1)
	}

	t.Run("unknown workflow on create", func(t *testing.T) {
		t.Parallel()
		p := setup(t)
		waiting(p)
		p.unchanged("Create of an unknown workflow", func() {
			_, err := p.engine().Create(ctxFor(t), graph.NewTask{Workflow: "nope", Input: featureInput("x", "")})
			var ue *graph.UnknownWorkflowError
			if !errors.As(err, &ue) || !errors.Is(err, graph.ErrUnknownWorkflow) || err.Error() != `unknown workflow "nope"` {
				t.Errorf("Create = %v, want *graph.UnknownWorkflowError naming nope", err)
			}
		})
	})

	t.Run("unknown workflow of a stored task", func(t *testing.T) {
		t.Parallel()
		p := setup(t)
		id := p.create("")
		p.exec(`UPDATE tasks SET workflow = 'retired' WHERE id = $1`, id)
		p.unchanged("Run of a task of an unknown workflow", func() {
			_, err := p.engine().Run(ctxFor(t), id, 0)
			var ue *graph.UnknownWorkflowError
			if !errors.As(err, &ue) || ue.Name != "retired" || !strings.Contains(err.Error(), `"retired"`) {
				t.Errorf("Run = %v, want *graph.UnknownWorkflowError naming retired", err)
			}
		})
		p.wantCalls(roleCalls{})
	})

	t.Run("unknown node in the checkpoint", func(t *testing.T) {
		t.Parallel()
		p := setup(t)
		id, _ := waiting(p)
		p.exec(`UPDATE workflow_checkpoints SET next_node_id = 'nope' WHERE task_id = $1`, id)
		p.unchanged("Run of a checkpoint naming an unknown node", func() {
			_, err := p.engine().Run(ctxFor(t), id, 0)
			var se *graph.StateError
			if !errors.As(err, &se) || se.TaskID != id || !strings.Contains(err.Error(), `checkpoint names unknown node "nope"`) {
				t.Errorf("Run = %v, want *graph.StateError naming nope", err)
			}
		})
		p.wantCalls(roleCalls{analyze: 1, requirements: 1})
	})

	t.Run("malformed state", func(t *testing.T) {
		t.Parallel()
		for state, want := range map[string]string{
			`{"description": 5}`: "State.description of type string",
			`[1, 2]`:             "array into Go value of type feature.State",
			`"text"`:             "string into Go value of type feature.State",
		} {
			p := setup(t)
			id, _ := waiting(p)
			p.exec(`UPDATE workflow_checkpoints SET state = $2::jsonb, state_refs = '{}' WHERE task_id = $1`, id, state)
			p.unchanged("Run of malformed state "+state, func() {
				_, err := p.engine().Run(ctxFor(t), id, 0)
				var se *graph.StateError
				if !errors.As(err, &se) || se.TaskID != id ||
					!strings.HasPrefix(err.Error(), "task "+id+": stored state is unreadable: ") || !strings.Contains(err.Error(), want) {
					t.Errorf("Run of state %s = %v, want *graph.StateError with %q", state, err, want)
				}
			})
			p.wantCalls(roleCalls{analyze: 1, requirements: 1})
		}
	})

	t.Run("interrupt of another task", func(t *testing.T) {
		t.Parallel()
		p := setup(t)
		a, _ := waiting(p)
		_, ofB := waiting(p)
		p.unchanged("a decision naming another task's interrupt", func() {
			_, err := p.engine().Decide(ctxFor(t), a, graph.DecisionInput{InterruptID: ofB, Action: graph.ActionApprove})
			var we *graph.WrongTaskError
			if !errors.As(err, &we) || !errors.Is(err, graph.ErrInterruptNotFound) ||
				err.Error() != fmt.Sprintf("interrupt %s does not belong to task %s", ofB, a) {
				t.Errorf("Decide = %v, want *graph.WrongTaskError", err)
			}
		})
	})

	t.Run("unknown or malformed interrupt id", func(t *testing.T) {
		t.Parallel()
		p := setup(t)
		id, _ := waiting(p)
		p.unchanged("a decision naming no interrupt", func() {
			_, err := p.engine().Decide(ctxFor(t), id, graph.DecisionInput{InterruptID: graph.NewID(), Action: graph.ActionApprove})
			if !errors.Is(err, graph.ErrInterruptNotFound) {
				t.Errorf("Decide on an unknown interrupt = %v, want ErrInterruptNotFound", err)
			}
			_, err = p.engine().Decide(ctxFor(t), id, graph.DecisionInput{InterruptID: "42", Action: graph.ActionApprove})
			var ve *graph.ValidationError
			if !errors.As(err, &ve) || ve.Field != "interrupt_id" {
				t.Errorf("Decide on a malformed id = %v, want a ValidationError of interrupt_id", err)
			}
		})
	})

	t.Run("reject without feedback", func(t *testing.T) {
		t.Parallel()
		p := setup(t)
		id, itr := waiting(p)
		for _, fb := range []string{"", " \n\t "} {
			p.unchanged(fmt.Sprintf("a reject with feedback %q", fb), func() {
				_, err := p.engine().Decide(ctxFor(t), id, graph.DecisionInput{InterruptID: itr, Action: graph.ActionReject, Feedback: fb})
				var ve *graph.ValidationError
				if !errors.As(err, &ve) || !errors.Is(err, graph.ErrInvalid) || ve.Field != "feedback" ||
					err.Error() != "feedback: is required to reject" {
					t.Errorf("Decide = %v, want a ValidationError of feedback", err)
				}
			})
		}
		// The interrupt is still open and takes a proper decision.
		p.decide(id, itr, graph.ActionReject, "Now with a reason.")
		p.waitsAt(id, "requirements", "prd", 2)
	})

	t.Run("unknown action", func(t *testing.T) {
		t.Parallel()
		p := setup(t)
		id, itr := waiting(p)
		p.unchanged("a decision with an unknown action", func() {
			_, err := p.engine().Decide(ctxFor(t), id, graph.DecisionInput{InterruptID: itr, Action: "merge-it"})
			var ve *graph.ValidationError
			if !errors.As(err, &ve) || ve.Field != "action" || !strings.Contains(err.Error(), `"merge-it"`) {
				t.Errorf("Decide = %v, want a ValidationError of action", err)
			}
		})
	})
}
