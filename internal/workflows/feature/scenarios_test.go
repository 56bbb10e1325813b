package feature_test

// The 16 scenarios of seed 002 ("Graph State Transition Integration Tests")
// as integration tests: the real engine, the PostgreSQL Checkpointer on a
// fresh database per test, and a stub executor in place of the LLM.
//
// LangGraph terms map to ours as follows:
//   - "invoke returns __interrupt__" is a Run whose Outcome is waiting with
//     an Interrupt at the expected node and kind;
//   - "resume with approve/reject" is Decide then Run;
//   - approvalGates are the task option {"gates": {"allowPrd": …}};
//     "approvalGates undefined" is a task without options.
//
// Every Create, Run and Decide goes through a fresh engine over a fresh
// Store and a freshly compiled graph, as after a restart: nothing but the
// task id and the interrupt ids read back from PostgreSQL travels between
// invocations. The stub executor is shared by the engines of one test: it
// plays the external LLM and counts its calls.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
)

// Gate options of the scenarios.
const (
	gatesAllClosed = `{"gates": {"allowPrd": false, "allowPlan": false, "allowMerge": false}}`
	gatesAllOpen   = `{"gates": {"allowPrd": true, "allowPlan": true, "allowMerge": true}}`
)

// pgEnv is one test's bundle: its own migrated database, the shared stub
// executor, and what the test did so far (for the audit of the rows).
type pgEnv struct {
	t    *testing.T
	pool *pgxpool.Pool
	stub *featuretest.StubExecutor
	opts []feature.Option

	mu        sync.Mutex
	runs      map[string]int  // Run invocations per task
	decisions map[string]int  // accepted decisions per task
	seen      map[string]bool // interrupt ids returned so far
}

// setup gives the test a fresh database and a stub executor. Producer nodes
// are not retried (a retry would only slow the tests down).
func setup(t *testing.T, opts ...feature.Option) *pgEnv {
	t.Helper()
	return &pgEnv{
		t:         t,
		pool:      pgtest.NewPool(t),
		stub:      featuretest.NewStub(""),
		opts:      append([]feature.Option{feature.WithRetry(graph.RetryPolicy{Attempts: 1})}, opts...),
		runs:      map[string]int{},
		decisions: map[string]int{},
		seen:      map[string]bool{},
	}
}

// mustFeature compiles the feature workflow over exec.
func mustFeature(t testing.TB, exec feature.Executor, opts ...feature.Option) *graph.Graph[feature.State] {
	t.Helper()
	g, err := feature.New(exec, opts...)
	if err != nil {
		t.Fatalf("feature.New: %v", err)
	}
	return g
}

// engine returns a FRESH engine: a new Store over the pool and a newly
// compiled graph, as a restarted process would have.
func (p *pgEnv) engine(eopts ...graph.EngineOption) *graph.Engine {
	p.t.Helper()
	e, err := graph.NewEngine(postgres.NewStore(p.pool, postgres.Options{}), []graph.Workflow{mustFeature(p.t, p.stub, p.opts...)}, eopts...)
	if err != nil {
		p.t.Fatalf("NewEngine: %v", err)
	}
	return e
}

// store is a reader over the test database.
func (p *pgEnv) store() *postgres.Store { return postgres.NewStore(p.pool, postgres.Options{}) }

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func featureInput(description, name string) json.RawMessage {
	m := map[string]string{"description": description}
	if name != "" {
		m["name"] = name
	}
	b, _ := json.Marshal(m)
	return b
}

// create starts a feature task for the stub's default request; options is
// the task's options JSON, "" for none.
func (p *pgEnv) create(options string) string {
	p.t.Helper()
	return p.createWith(featureInput(featuretest.DefaultDescription, ""), options)
}

func (p *pgEnv) createWith(input json.RawMessage, options string) string {
	p.t.Helper()
	nt := graph.NewTask{Workflow: feature.Name, Title: p.t.Name(), Input: input, CreatedBy: "tester"}
	if options != "" {
		nt.Options = json.RawMessage(options)
	}
	task, err := p.engine().Create(ctxFor(p.t), nt)
	if err != nil {
		p.t.Fatalf("Create: %v", err)
	}
	if task.Status != graph.StatusQueued {
		p.t.Fatalf("created task is %s, want queued", task.Status)
	}
	return task.ID
}

// run runs the task on a fresh engine.
func (p *pgEnv) run(id string) graph.Outcome {
	p.t.Helper()
	p.mu.Lock()
	p.runs[id]++
	p.mu.Unlock()
	out, err := p.engine().Run(ctxFor(p.t), id, 0)
	if err != nil {
		p.t.Fatalf("Run: %v", err)
	}
	return out
}

// waitsAt runs the task on a fresh engine, checks that it waits on a gate
// of node with kind and iteration, checks the interrupt as stored in
// PostgreSQL, and returns its id as read back from PostgreSQL.
func (p *pgEnv) waitsAt(id, node, kind string, iteration int) string {
	p.t.Helper()
	out := p.run(id)
	if out.Status != graph.StatusWaiting || out.Interrupt == nil {
		p.t.Fatalf("outcome = %+v, want waiting at %s", out, node)
	}
	if oi := out.Interrupt; oi.Node != node || oi.Kind != kind || oi.Iteration != iteration {
		p.t.Fatalf("interrupt at %s/%s iteration %d, want %s/%s iteration %d", oi.Node, oi.Kind, oi.Iteration, node, kind, iteration)
	}
	itr := p.pending(id)
	if itr.ID != out.Interrupt.ID || itr.Node != node || itr.Kind != kind || itr.Iteration != iteration {
		p.t.Fatalf("stored pending interrupt = %+v, want the one Run returned (%s)", itr, out.Interrupt.ID)
	}
	p.mu.Lock()
	reused := p.seen[itr.ID]
	p.seen[itr.ID] = true
	p.mu.Unlock()
	if reused {
		p.t.Fatalf("interrupt id %s was returned before: every interrupt needs a fresh id", itr.ID)
	}
	task := p.task(id)
	if task.Status != graph.StatusWaiting || task.CurrentNode != node {
		p.t.Fatalf("task is %s at %q, want waiting at %s", task.Status, task.CurrentNode, node)
	}
	// The gate shows the artifact the node run produced, as it is in the state.
	want := map[string]string{feature.GatePRD: feature.SpecFile, feature.GatePlan: feature.PlanFile, feature.GateMerge: feature.MergeFile}[kind]
	a := itr.Payload.Artifact
	if a == nil || a.Name != want || a.Content != p.state(id).Document(want) || strings.TrimSpace(a.Content) == "" {
		p.t.Fatalf("gate artifact = %+v, want %s as in the state", a, want)
	}
	if itr.Payload.Type != graph.InterruptGate {
		p.t.Fatalf("interrupt type = %q, want gate", itr.Payload.Type)
	}
	return itr.ID
}

// pending returns the task's one pending interrupt as stored, and checks the
// checkpoint names it.
func (p *pgEnv) pending(id string) graph.Interrupt {
	p.t.Helper()
	itrs, err := p.store().Interrupts(ctxFor(p.t), id)
	if err != nil {
		p.t.Fatalf("Interrupts: %v", err)
	}
	var pend []graph.Interrupt
	for _, i := range itrs {
		if i.Status == graph.InterruptPending {
			pend = append(pend, i)
		}
	}
	if len(pend) != 1 {
		p.t.Fatalf("%d pending interrupts, want 1: %+v", len(pend), itrs)
	}
	snap, err := p.store().Load(ctxFor(p.t), id)
	if err != nil {
		p.t.Fatalf("Load: %v", err)
	}
	if snap.Checkpoint.PendingInterrupt != pend[0].ID {
		p.t.Fatalf("checkpoint's pending interrupt = %q, want %s", snap.Checkpoint.PendingInterrupt, pend[0].ID)
	}
	return pend[0]
}

// decide records a decision on a fresh engine and checks it is stored.
func (p *pgEnv) decide(id, interruptID, action, feedback string) {
	p.t.Helper()
	d, err := p.engine().Decide(ctxFor(p.t), id, graph.DecisionInput{InterruptID: interruptID, Action: action,
		Feedback: feedback, DecidedBy: "tester"})
	if err != nil {
		p.t.Fatalf("Decide %s: %v", action, err)
	}
	if d.ID == "" || d.InterruptID != interruptID {
		p.t.Fatalf("decision = %+v", d)
	}
	p.mu.Lock()
	p.decisions[id]++
	p.mu.Unlock()
	itr, err := p.store().Interrupt(ctxFor(p.t), interruptID)
	if err != nil {
		p.t.Fatalf("Interrupt: %v", err)
	}
	if itr.Status != graph.InterruptResolved || itr.ResolvedAt == nil {
		p.t.Fatalf("interrupt after the decision is %s (resolved at %v), want resolved", itr.Status, itr.ResolvedAt)
	}
	if task := p.task(id); task.Status != graph.StatusQueued {
		p.t.Fatalf("task after the decision is %s, want queued", task.Status)
	}
}

// succeeds runs the task on a fresh engine to its end and returns its result.
func (p *pgEnv) succeeds(id string) feature.Result {
	p.t.Helper()
	out := p.run(id)
	if out.Status != graph.StatusSucceeded || out.Interrupt != nil {
		p.t.Fatalf("outcome = %+v, want succeeded", out)
	}
	task := p.task(id)
	if task.Status != graph.StatusSucceeded || task.CompletedAt == nil || task.Error != "" {
		p.t.Fatalf("task = %s (completed at %v, error %q), want succeeded", task.Status, task.CompletedAt, task.Error)
	}
	var res feature.Result
	if err := json.Unmarshal(task.Result, &res); err != nil {
		p.t.Fatalf("result %s: %v", task.Result, err)
	}
	return res
}

func (p *pgEnv) task(id string) *graph.Task {
	p.t.Helper()
	task, err := p.store().Task(ctxFor(p.t), id)
	if err != nil {
		p.t.Fatalf("Task: %v", err)
	}
	return task
}

// state reads the task's current state back from PostgreSQL.
func (p *pgEnv) state(id string) feature.State {
	p.t.Helper()
	snap, err := p.store().Load(ctxFor(p.t), id)
	if err != nil {
		p.t.Fatalf("Load: %v", err)
	}
	var s feature.State
	if err := json.Unmarshal(snap.Checkpoint.State, &s); err != nil {
		p.t.Fatalf("state %s: %v", snap.Checkpoint.State, err)
	}
	return s
}

// events returns every event of the task and checks their seqs run from 1
// without a gap.
func (p *pgEnv) events(id string) []graph.Event {
	p.t.Helper()
	evs, err := p.store().Events(ctxFor(p.t), id, 0, 100000)
	if err != nil {
		p.t.Fatalf("Events: %v", err)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			p.t.Fatalf("event %d (%s) has seq %d: seqs must run from 1 without gaps", i, e.Type, e.Seq)
		}
	}
	if len(evs) == 0 || evs[0].Type != graph.EventTaskCreated {
		p.t.Fatalf("first event = %+v, want task.created", evs)
	}
	return evs
}

func (p *pgEnv) eventsOf(id, typ string) []graph.Event {
	p.t.Helper()
	var out []graph.Event
	for _, e := range p.events(id) {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// phases lists the phases of the task's events of type typ for node ("" for
// every node), in order.
func (p *pgEnv) phases(id, typ, node string) []string {
	p.t.Helper()
	var out []string
	for _, e := range p.eventsOf(id, typ) {
		if node == "" || e.Node == node {
			out = append(out, e.Phase)
		}
	}
	return out
}

// nodesStartedAfter lists the nodes started after the event with seq after.
func (p *pgEnv) nodesStartedAfter(id string, after int64) []string {
	p.t.Helper()
	var out []string
	for _, e := range p.events(id) {
		if e.Seq > after && e.Type == graph.EventNodeStarted {
			out = append(out, e.Node)
		}
	}
	return out
}

// lastSeq is the seq of the task's latest event.
func (p *pgEnv) lastSeq(id string) int64 {
	p.t.Helper()
	evs := p.events(id)
	return evs[len(evs)-1].Seq
}

// roleCalls is a number of executor calls per role; roles left out are 0.
type roleCalls struct{ analyze, requirements, research, plan, implement, merge int }

func (c roleCalls) byRole() map[string]int {
	return map[string]int{feature.RoleAnalyze: c.analyze, feature.RoleRequirements: c.requirements,
		feature.RoleResearch: c.research, feature.RolePlan: c.plan, feature.RoleImplement: c.implement, feature.RoleMerge: c.merge}
}

func (c roleCalls) total() int {
	return c.analyze + c.requirements + c.research + c.plan + c.implement + c.merge
}

// wantCalls checks the stub's calls of every role, and the total.
func (p *pgEnv) wantCalls(want roleCalls) {
	p.t.Helper()
	got := p.stub.CallsByRole()
	for role, n := range want.byRole() {
		if got[role] != n {
			p.t.Errorf("executor calls of %s = %d, want %d (all: %v)", role, got[role], n, got)
		}
	}
	if n := p.stub.CallCount(); n != want.total() {
		p.t.Errorf("executor calls in total = %d, want %d (all: %v)", n, want.total(), got)
	}
}

// completions counts the checkpoint_history rows of completed node runs
// (reason 'node') per node.
func (p *pgEnv) completions(id string) map[string]int {
	p.t.Helper()
	rows, err := p.pool.Query(ctxFor(p.t), `SELECT last_node_id, count(*) FROM checkpoint_history
		WHERE task_id = $1 AND reason = 'node' GROUP BY last_node_id`, id)
	if err != nil {
		p.t.Fatalf("checkpoint_history: %v", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var node string
		var n int
		if err := rows.Scan(&node, &n); err != nil {
			p.t.Fatal(err)
		}
		out[node] = n
	}
	if err := rows.Err(); err != nil {
		p.t.Fatal(err)
	}
	return out
}

// wantCompletions checks the node completions recorded in
// checkpoint_history against want (nodes left out: 0).
func (p *pgEnv) wantCompletions(id string, want map[string]int) {
	p.t.Helper()
	got := p.completions(id)
	for _, n := range feature.Nodes() {
		if got[n] != want[n] {
			p.t.Errorf("checkpoint_history completions of %s = %d, want %d (all: %v)", n, got[n], want[n], got)
		}
	}
	for n := range got {
		if !slices.Contains(feature.Nodes(), n) {
			p.t.Errorf("checkpoint_history has a completion of unknown node %q", n)
		}
	}
}

// nodesUpTo maps every node up to and including last to n completions.
func nodesUpTo(last string, n int) map[string]int {
	m := map[string]int{}
	for _, name := range feature.Nodes() {
		m[name] = n
		if name == last {
			break
		}
	}
	return m
}

// audit checks the rows of a task against what the test did: one decision
// row per decision, on resolved interrupts only; every interrupt resolved
// but the one the task waits on; one interrupt.raised event per interrupt
// and one decision.recorded per decision; gap-free event seqs. It returns
// the task's interrupts, oldest first.
func (p *pgEnv) audit(id string) []graph.Interrupt {
	p.t.Helper()
	ctx := ctxFor(p.t)
	p.mu.Lock()
	wantDecisions := p.decisions[id]
	p.mu.Unlock()
	task := p.task(id)
	itrs, err := p.store().Interrupts(ctx, id)
	if err != nil {
		p.t.Fatalf("Interrupts: %v", err)
	}
	ds, err := p.store().Decisions(ctx, id)
	if err != nil {
		p.t.Fatalf("Decisions: %v", err)
	}
	if len(ds) != wantDecisions {
		p.t.Errorf("decisions rows = %d, want %d (one per decision)", len(ds), wantDecisions)
	}
	decided := map[string]int{}
	for _, d := range ds {
		decided[d.InterruptID]++
	}
	for i, itr := range itrs {
		last := i == len(itrs)-1
		switch {
		case last && task.Status == graph.StatusWaiting:
			if itr.Status != graph.InterruptPending || decided[itr.ID] != 0 {
				p.t.Errorf("interrupt %d (%s) is %s with %d decisions; the task waits on it", i, itr.Node, itr.Status, decided[itr.ID])
			}
		default:
			if itr.Status != graph.InterruptResolved || itr.ResolvedAt == nil || decided[itr.ID] != 1 {
				p.t.Errorf("interrupt %d (%s) is %s with %d decisions, want resolved with one", i, itr.Node, itr.Status, decided[itr.ID])
			}
		}
	}
	raised := p.eventsOf(id, graph.EventInterruptRaised)
	if len(raised) != len(itrs) {
		p.t.Errorf("interrupt.raised events = %d, interrupts rows = %d", len(raised), len(itrs))
	} else {
		for i, e := range raised {
			var d struct {
				InterruptID string `json:"interrupt_id"`
			}
			_ = json.Unmarshal(e.Data, &d)
			if d.InterruptID != itrs[i].ID || e.Node != itrs[i].Node || e.Iteration != itrs[i].Iteration {
				p.t.Errorf("interrupt.raised %d = %s %s:%d, want interrupt %s %s:%d", i, d.InterruptID, e.Node, e.Iteration,
					itrs[i].ID, itrs[i].Node, itrs[i].Iteration)
			}
		}
	}
	if n := len(p.eventsOf(id, graph.EventDecisionRecorded)); n != wantDecisions {
		p.t.Errorf("decision.recorded events = %d, want %d", n, wantDecisions)
	}
	return itrs
}

// iterationsOf lists the node and iteration of every interrupt.
func iterationsOf(itrs []graph.Interrupt) []string {
	var out []string
	for _, i := range itrs {
		out = append(out, fmt.Sprintf("%s:%d", i.Node, i.Iteration))
	}
	return out
}

func (p *pgEnv) completedPhases(id string) []string {
	p.t.Helper()
	ps, err := feature.CompletedPhases(p.state(id).FeatureYAML)
	if err != nil {
		p.t.Fatalf("CompletedPhases: %v", err)
	}
	return ps
}

func (p *pgEnv) phaseTimings(id string) []string {
	p.t.Helper()
	ps, err := feature.PhaseTimingNames(p.state(id).FeatureYAML)
	if err != nil {
		p.t.Fatalf("PhaseTimingNames: %v", err)
	}
	return ps
}

func wantStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

var (
	allFeaturePhases = []string{"analyze", "requirements", "research", "plan", "implement", "merge"}
	allArtifactNames = []string{"spec.yaml", "research.yaml", "plan.yaml", "tasks.yaml", "feature.yaml", "implementation.md", "merge.md"}
)

// wantCompleteResult checks the result of a task that ran every phase.
func wantCompleteResult(t *testing.T, res feature.Result, rejections int) {
	t.Helper()
	if res.Name != "let-users-export-their-reports-as" || res.Summary == "" || res.Tasks != 4 || res.Rejections != rejections ||
		!slices.Equal(res.CompletedPhases, allFeaturePhases) || !slices.Equal(res.Artifacts, allArtifactNames) {
		t.Errorf("result = %+v, want every phase and artifact, 4 tasks, %d rejections", res, rejections)
	}
}

// --- 1–4, 9–11: the PRD gate ---

func TestScenario01ApproveRequirements(t *testing.T) {
	t.Parallel()
	p := setup(t)
	id := p.create(gatesAllClosed)

	// Invoke #1: interrupt at requirements.
	itr := p.waitsAt(id, "requirements", "prd", 1)
	wantStrings(t, "completedPhases at the PRD gate", p.completedPhases(id), []string{"analyze", "requirements"})
	p.wantCalls(roleCalls{analyze: 1, requirements: 1})
	p.wantCompletions(id, nodesUpTo("requirements", 1))

	// Invoke #2: approve; the graph moves on to research without running
	// requirements again, and stops at the plan gate.
	p.decide(id, itr, graph.ActionApprove, "")
	decided := p.lastSeq(id)
	p.waitsAt(id, "plan", "plan", 1)
	started := p.nodesStartedAfter(id, decided)
	wantStrings(t, "nodes started after the approval", started,
		[]string{"validate_spec_requirements", "research", "validate_research", "plan"})
	p.wantCalls(roleCalls{analyze: 1, requirements: 1, research: 1, plan: 1})
	wantStrings(t, "node.completed of research", p.phases(id, graph.EventNodeCompleted, "research"), []string{"research"})
	wantStrings(t, "node.started of requirements", p.phases(id, graph.EventNodeStarted, "requirements"), []string{"requirements"})
	wantStrings(t, "completedPhases at the plan gate", p.completedPhases(id), []string{"analyze", "requirements", "research", "plan"})
	p.wantCompletions(id, nodesUpTo("plan", 1))

	itrs := p.audit(id)
	wantStrings(t, "interrupts", iterationsOf(itrs), []string{"requirements:1", "plan:1"})
	if task := p.task(id); task.Status != graph.StatusWaiting || task.Result != nil {
		t.Errorf("task = %s with result %s, want waiting without one", task.Status, task.Result)
	}
}

func TestScenario02RejectRequirementsReexecutesAndInterruptsAgain(t *testing.T) {
	t.Parallel()
	p := setup(t)
	id := p.create(gatesAllClosed)

	itr1 := p.waitsAt(id, "requirements", "prd", 1)
	wantStrings(t, "completedPhases at the first gate", p.completedPhases(id), []string{"analyze", "requirements"})

	p.decide(id, itr1, graph.ActionReject, "add X")
	itr2 := p.waitsAt(id, "requirements", "prd", 2) // interrupts again, not progressed to research
	if itr2 == itr1 {
		t.Fatal("the second gate reuses the first interrupt")
	}
	p.wantCalls(roleCalls{analyze: 1, requirements: 2})
	wantStrings(t, "completedPhases after the re-run", p.completedPhases(id), []string{"analyze", "requirements"})
	if n := len(p.phases(id, graph.EventNodeStarted, "research")); n != 0 {
		t.Errorf("research started %d times, want 0", n)
	}

	// The checkpoint of the rejection itself (before the re-run) has the
	// phase cleared from completedPhases.
	var raw []byte
	if err := p.pool.QueryRow(ctxFor(t), `SELECT state FROM checkpoint_history WHERE task_id = $1 AND reason = 'decision'`,
		id).Scan(&raw); err != nil {
		t.Fatalf("checkpoint of the decision: %v", err)
	}
	var atReject feature.State
	if err := json.Unmarshal(raw, &atReject); err != nil {
		t.Fatal(err)
	}
	if ps, err := feature.CompletedPhases(atReject.FeatureYAML); err != nil || slices.Contains(ps, "requirements") {
		t.Errorf("completedPhases at the rejection = %v (%v), want requirements cleared", ps, err)
	}

	want := nodesUpTo("requirements", 1)
	want["requirements"] = 2
	p.wantCompletions(id, want)
	itrs := p.audit(id)
	wantStrings(t, "interrupts", iterationsOf(itrs), []string{"requirements:1", "requirements:2"})
}

func TestScenario03RejectThenApproveFullIterationCycle(t *testing.T) {
	t.Parallel()
	p := setup(t)
	id := p.create(gatesAllClosed)

	itr := p.waitsAt(id, "requirements", "prd", 1) // invoke #1
	p.decide(id, itr, graph.ActionReject, "Cover exports larger than 10 MB.")
	itr = p.waitsAt(id, "requirements", "prd", 2) // invoke #2
	p.wantCalls(roleCalls{analyze: 1, requirements: 2})
	p.decide(id, itr, graph.ActionApprove, "")
	decided := p.lastSeq(id)
	p.waitsAt(id, "plan", "plan", 1) // invoke #3: research executes, then plan

	if n := p.runs[id]; n != 3 {
		t.Errorf("Run invocations = %d, want 3", n)
	}
	p.wantCalls(roleCalls{analyze: 1, requirements: 2, research: 1, plan: 1})
	if started := p.nodesStartedAfter(id, decided); len(started) < 2 || started[0] != "validate_spec_requirements" || started[1] != "research" {
		t.Errorf("nodes started after the approval = %v, want validate_spec_requirements then research", started)
	}
	wantStrings(t, "node.completed of research", p.phases(id, graph.EventNodeCompleted, "research"), []string{"research"})
	ps := p.completedPhases(id)
	if !slices.Contains(ps, "requirements") || !slices.Contains(ps, "research") {
		t.Errorf("completedPhases = %v, want requirements and research", ps)
	}
	wantStrings(t, "completedPhases", ps, []string{"analyze", "requirements", "research", "plan"})

	want := nodesUpTo("plan", 1)
	want["requirements"] = 2
	p.wantCompletions(id, want)
	itrs := p.audit(id)
	wantStrings(t, "interrupts", iterationsOf(itrs), []string{"requirements:1", "requirements:2", "plan:1"})
}

func TestScenario04MultipleRejectionsIterationCount(t *testing.T) {
	t.Parallel()
	p := setup(t)
	id := p.create(gatesAllClosed)

	itr := p.waitsAt(id, "requirements", "prd", 1)
	for i, fb := range []string{"fix A", "fix B", "fix C"} {
		p.decide(id, itr, graph.ActionReject, fb)
		// Each rejection triggers a new interrupt, of the next iteration.
		itr = p.waitsAt(id, "requirements", "prd", i+2)
		p.wantCalls(roleCalls{analyze: 1, requirements: i + 2})
	}
	p.decide(id, itr, graph.ActionApprove, "")
	decided := p.lastSeq(id)
	p.waitsAt(id, "plan", "plan", 1)

	// The approval skipped re-execution: still four requirements calls.
	p.wantCalls(roleCalls{analyze: 1, requirements: 4, research: 1, plan: 1})
	if started := p.nodesStartedAfter(id, decided); slices.Contains(started, "requirements") || len(started) == 0 || started[0] != "validate_spec_requirements" {
		t.Errorf("nodes started after the approval = %v", started)
	}
	fb, err := feature.RejectionFeedback(p.state(id).SpecYAML)
	if err != nil || len(fb) != 3 || fb[0].Feedback != "fix A" || fb[1].Feedback != "fix B" || fb[2] != (feature.Feedback{Phase: "requirements", Iteration: 3, Feedback: "fix C"}) {
		t.Errorf("rejectionFeedback = %+v (%v)", fb, err)
	}
	want := nodesUpTo("plan", 1)
	want["requirements"] = 4
	p.wantCompletions(id, want)
	itrs := p.audit(id)
	wantStrings(t, "interrupts", iterationsOf(itrs), []string{"requirements:1", "requirements:2", "requirements:3", "requirements:4", "plan:1"})
}

// --- 5, 6: the plan gate ---

func TestScenario05ApprovePlan(t *testing.T) {
	t.Parallel()
	p := setup(t)
	// The seed's legacy test graph had no merge node and ended after
	// implement. Our feature graph always has merge: allowMerge is true so
	// the task completes after the plan approval, as the seed expects.
	id := p.create(`{"gates": {"allowPrd": true, "allowPlan": false, "allowMerge": true}}`)

	// Requirements does not interrupt; plan does.
	itr := p.waitsAt(id, "plan", "plan", 1)
	p.wantCalls(roleCalls{analyze: 1, requirements: 1, research: 1, plan: 1})
	if itrs := p.audit(id); len(itrs) != 1 {
		t.Fatalf("interrupts = %v, want only the plan gate", iterationsOf(itrs))
	}

	p.decide(id, itr, graph.ActionApprove, "")
	decided := p.lastSeq(id)
	res := p.succeeds(id)
	wantStrings(t, "nodes started after the approval", p.nodesStartedAfter(id, decided),
		[]string{"validate_plan_tasks", "implement", "merge"})
	p.wantCalls(roleCalls{analyze: 1, requirements: 1, research: 1, plan: 1, implement: 1, merge: 1})
	wantCompleteResult(t, res, 0)
	p.wantCompletions(id, nodesUpTo("merge", 1))
	itrs := p.audit(id)
	wantStrings(t, "interrupts", iterationsOf(itrs), []string{"plan:1"})
	if n := len(p.eventsOf(id, graph.EventTaskCompleted)); n != 1 {
		t.Errorf("task.completed events = %d, want 1", n)
	}
}

func TestScenario06RejectPlan(t *testing.T) {
	t.Parallel()
	p := setup(t)
	id := p.create(`{"gates": {"allowPrd": true, "allowPlan": false, "allowMerge": true}}`)

	itr1 := p.waitsAt(id, "plan", "plan", 1)
	p.decide(id, itr1, graph.ActionReject, "Split the export task into API and UI.")
	itr2 := p.waitsAt(id, "plan", "plan", 2)

	// Plan ran twice; research (before it) was not re-executed.
	p.wantCalls(roleCalls{analyze: 1, requirements: 1, research: 1, plan: 2})
	wantStrings(t, "node.started of research", p.phases(id, graph.EventNodeStarted, "research"), []string{"research"})
	wantStrings(t, "node.started of plan", p.phases(id, graph.EventNodeStarted, "plan"), []string{"plan", "plan:2"})
	if prompts := p.stub.PromptsFor(feature.RolePlan); len(prompts) != 2 || !strings.Contains(prompts[1], "Split the export task into API and UI.") {
		t.Errorf("plan prompts = %q, want the feedback in the second", prompts)
	}
	want := nodesUpTo("plan", 1)
	want["plan"] = 2
	p.wantCompletions(id, want)

	// Approving the second plan finishes the task; research still ran once.
	p.decide(id, itr2, graph.ActionApprove, "")
	res := p.succeeds(id)
	p.wantCalls(roleCalls{analyze: 1, requirements: 1, research: 1, plan: 2, implement: 1, merge: 1})
	wantCompleteResult(t, res, 1)
	itrs := p.audit(id)
	wantStrings(t, "interrupts", iterationsOf(itrs), []string{"plan:1", "plan:2"})
}

// --- 7, 8, 13, 16: no interrupts ---

// runsThrough runs a task that must not stop and checks every node ran once.
func runsThrough(t *testing.T, options string) {
	t.Helper()
	p := setup(t)
	id := p.create(options)
	res := p.succeeds(id)

	p.wantCalls(roleCalls{1, 1, 1, 1, 1, 1})
	wantStrings(t, "nodes started", p.phases(id, graph.EventNodeStarted, ""), feature.Nodes())
	wantStrings(t, "nodes completed", p.phases(id, graph.EventNodeCompleted, ""), feature.Nodes())
	if itrs := p.audit(id); len(itrs) != 0 {
		t.Errorf("interrupts = %v, want none", iterationsOf(itrs))
	}
	for _, typ := range []string{graph.EventInterruptRaised, graph.EventTaskWaiting, graph.EventDecisionRecorded, graph.EventNodeFailed} {
		if n := len(p.eventsOf(id, typ)); n != 0 {
			t.Errorf("%d %s events, want none", n, typ)
		}
	}
	p.wantCompletions(id, nodesUpTo("merge", 1))
	wantStrings(t, "completedPhases", p.completedPhases(id), allFeaturePhases)
	wantStrings(t, "phaseTimings", p.phaseTimings(id), allFeaturePhases)
	wantCompleteResult(t, res, 0)
	if n := p.runs[id]; n != 1 {
		t.Errorf("Run invocations = %d, want 1", n)
	}
	s := p.state(id)
	if strings.TrimSpace(s.MergeSummary) == "" {
		t.Error("merge produced no merge.md")
	}
	arts, err := p.store().Artifacts(ctxFor(t), id)
	if err != nil {
		t.Fatal(err)
	}
	var merge int
	for _, a := range arts {
		if a.Name == feature.MergeFile {
			merge++
			if a.Node != "merge" || a.Content != s.MergeSummary {
				t.Errorf("merge.md artifact = %+v", a)
			}
		}
	}
	if merge != 1 {
		t.Errorf("merge.md artifacts = %d, want 1", merge)
	}
}

func TestScenario07NoGatesNoInterrupts(t *testing.T) {
	t.Parallel()
	runsThrough(t, "") // approvalGates undefined
}

func TestScenario08AllGatesAllowedNoInterrupts(t *testing.T) {
	t.Parallel()
	runsThrough(t, gatesAllOpen)
}

// --- 9, 10, 11: feedback, timings, many rejections ---

func TestScenario09RejectionFeedbackInReexecutionPrompt(t *testing.T) {
	t.Parallel()
	p := setup(t)
	id := p.create(gatesAllClosed)
	const feedback = "Add a row limit of 100000 per export and say what happens above it."

	itr := p.waitsAt(id, "requirements", "prd", 1)
	p.decide(id, itr, graph.ActionReject, feedback)
	p.waitsAt(id, "requirements", "prd", 2)

	prompts := p.stub.PromptsFor(feature.RoleRequirements)
	if len(prompts) != 2 {
		t.Fatalf("requirements prompts = %d, want 2", len(prompts))
	}
	if strings.Contains(prompts[0], feedback) {
		t.Error("the first prompt already holds the feedback")
	}
	if !strings.Contains(prompts[1], feedback) {
		t.Errorf("the second prompt lacks the feedback:\n%s", prompts[1])
	}
	// Not only inside the spec.yaml it quotes: the prompt asks to address it.
	if !strings.Contains(prompts[1], "- (requirements, iteration 1) "+feedback) {
		t.Errorf("the second prompt does not ask to address the feedback:\n%s", prompts[1])
	}
	reqs := p.stub.Requests()
	if last := reqs[len(reqs)-1]; last.Role != feature.RoleRequirements || last.TaskID != id || last.Iteration != 2 {
		t.Errorf("second requirements request = %+v, want iteration 2 of the task", last)
	}
	fb, err := feature.RejectionFeedback(p.state(id).SpecYAML)
	if err != nil || len(fb) != 1 || fb[0] != (feature.Feedback{Phase: "requirements", Iteration: 1, Feedback: feedback}) {
		t.Errorf("spec.yaml rejectionFeedback = %+v (%v)", fb, err)
	}
	ds, err := p.store().Decisions(ctxFor(t), id)
	if err != nil || len(ds) != 1 || ds[0].Action != graph.ActionReject || ds[0].Feedback != feedback || ds[0].DecidedBy != "tester" {
		t.Errorf("decisions = %+v (%v)", ds, err)
	}
	p.audit(id)
}

func TestScenario10PhaseTimingIterationSuffix(t *testing.T) {
	t.Parallel()
	p := setup(t)
	id := p.create(gatesAllClosed)

	itr := p.waitsAt(id, "requirements", "prd", 1)
	wantStrings(t, "requirements phases after the first run", p.phases(id, graph.EventNodeStarted, "requirements"), []string{"requirements"})
	p.decide(id, itr, graph.ActionReject, "first")
	itr = p.waitsAt(id, "requirements", "prd", 2)
	p.decide(id, itr, graph.ActionReject, "second")
	p.waitsAt(id, "requirements", "prd", 3)

	want := []string{"requirements", "requirements:2", "requirements:3"}
	wantStrings(t, "node.started phases", p.phases(id, graph.EventNodeStarted, "requirements"), want)
	wantStrings(t, "node.completed phases", p.phases(id, graph.EventNodeCompleted, "requirements"), want)
	wantStrings(t, "llm.call phases", p.phases(id, graph.EventLLMCall, "requirements"), want)
	wantStrings(t, "feature.yaml phaseTimings", p.phaseTimings(id), append([]string{"analyze"}, want...))
	for _, e := range p.eventsOf(id, graph.EventNodeCompleted) {
		if e.DurationMS == nil || *e.DurationMS < 0 {
			t.Errorf("node.completed %s has no duration", e.Phase)
		}
	}
	itrs := p.audit(id)
	wantStrings(t, "interrupts", iterationsOf(itrs), []string{"requirements:1", "requirements:2", "requirements:3"})
}

// callsAtSink records the executor's call count when plan's node run is
// committed (the engine publishes events synchronously after the commit,
// before the next node starts).
type callsAtSink struct {
	stub *featuretest.StubExecutor
	mu   sync.Mutex
	at   []int
}

func (s *callsAtSink) Publish(evs []graph.Event) {
	for _, e := range evs {
		if e.Type == graph.EventNodeCompleted && e.Node == feature.NodePlan {
			s.mu.Lock()
			s.at = append(s.at, s.stub.CallCount())
			s.mu.Unlock()
		}
	}
}

func TestScenario11FiveConsecutiveRejectionsThenApprove(t *testing.T) {
	t.Parallel()
	p := setup(t)
	id := p.create(`{"gates": {"allowPrd": false, "allowPlan": true, "allowMerge": false}}`)

	itr := p.waitsAt(id, "requirements", "prd", 1)
	for i := 1; i <= 5; i++ {
		p.decide(id, itr, graph.ActionReject, fmt.Sprintf("rejection %d", i))
		// Each rejection re-executes requirements and interrupts again.
		itr = p.waitsAt(id, "requirements", "prd", 1+i)
		p.wantCalls(roleCalls{analyze: 1, requirements: 1 + i})
	}
	p.decide(id, itr, graph.ActionApprove, "")

	// The approval continues to research → plan without re-running
	// requirements. The seed counts 9 calls at that point: analyze(1) +
	// requirements(1) + 5 re-executions + research + plan. Our graph does
	// not stop there (allowPlan is true): it goes on through implement to
	// the merge node, which runs and then waits at its gate (allowMerge
	// false), so the count when Run returns is 9 + implement + merge = 11.
	// The sink sees the count of 9 at the moment plan's run is committed.
	sink := &callsAtSink{stub: p.stub}
	p.mu.Lock()
	p.runs[id]++
	p.mu.Unlock()
	out, err := p.engine(graph.WithSink(sink)).Run(ctxFor(t), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != graph.StatusWaiting || out.Interrupt == nil || out.Interrupt.Node != "merge" || out.Interrupt.Iteration != 1 {
		t.Fatalf("outcome = %+v, want waiting at the merge gate", out)
	}
	if got := p.pending(id); got.ID != out.Interrupt.ID || got.Kind != "merge" {
		t.Fatalf("pending interrupt = %+v", got)
	}
	sink.mu.Lock()
	at := slices.Clone(sink.at)
	sink.mu.Unlock()
	if !slices.Equal(at, []int{9}) {
		t.Errorf("executor calls when plan completed = %v, want [9]", at)
	}
	got := p.stub.CallsByRole()
	if got[feature.RoleAnalyze] != 1 || got[feature.RoleRequirements] != 6 || got[feature.RoleResearch] != 1 || got[feature.RolePlan] != 1 {
		t.Errorf("calls = %v, want analyze 1, requirements 6, research 1, plan 1", got)
	}
	p.wantCalls(roleCalls{analyze: 1, requirements: 6, research: 1, plan: 1, implement: 1, merge: 1})
	if n := p.stub.CallCount(); n != 11 {
		t.Errorf("executor calls = %d, want 11", n)
	}

	wantPhases := []string{"requirements"}
	for i := 2; i <= 6; i++ {
		wantPhases = append(wantPhases, fmt.Sprintf("requirements:%d", i))
	}
	wantStrings(t, "requirements node.completed phases", p.phases(id, graph.EventNodeCompleted, "requirements"), wantPhases)
	fb, err := feature.RejectionFeedback(p.state(id).SpecYAML)
	if err != nil || len(fb) != 5 || fb[4].Feedback != "rejection 5" || fb[4].Iteration != 5 {
		t.Errorf("rejectionFeedback = %+v (%v)", fb, err)
	}
	want := nodesUpTo("merge", 1)
	want["requirements"] = 6
	p.wantCompletions(id, want)
	itrs := p.audit(id)
	wantStrings(t, "interrupts", iterationsOf(itrs), []string{"requirements:1", "requirements:2", "requirements:3",
		"requirements:4", "requirements:5", "requirements:6", "merge:1"})
}

// --- 12–16: the merge gate ---

func TestScenario12MergeInterruptWithPrdAndPlanAutoApproved(t *testing.T) {
	t.Parallel()
	p := setup(t)
	id := p.create(`{"gates": {"allowPrd": true, "allowPlan": true, "allowMerge": false}}`)

	// All producer nodes run without an interrupt; merge runs, then waits.
	p.waitsAt(id, "merge", "merge", 1)
	p.wantCalls(roleCalls{1, 1, 1, 1, 1, 1})
	if n := p.runs[id]; n != 1 {
		t.Errorf("Run invocations = %d, want 1", n)
	}
	p.wantCompletions(id, nodesUpTo("merge", 1))
	itrs := p.audit(id)
	wantStrings(t, "interrupts", iterationsOf(itrs), []string{"merge:1"})
	if itrs[0].Kind != "merge" || itrs[0].Payload.Artifact == nil || itrs[0].Payload.Artifact.ContentType != feature.ContentMarkdown {
		t.Errorf("merge interrupt = %+v", itrs[0])
	}
	wantStrings(t, "completedPhases", p.completedPhases(id), allFeaturePhases)
}

func TestScenario13FullCompletionAllGatesAllowedWithMerge(t *testing.T) {
	t.Parallel()
	runsThrough(t, gatesAllOpen)
}

func TestScenario14FullGateWalkThroughWithMerge(t *testing.T) {
	t.Parallel()
	p := setup(t)
	id := p.create(gatesAllClosed)

	itr := p.waitsAt(id, "requirements", "prd", 1) // invoke #1
	p.wantCalls(roleCalls{analyze: 1, requirements: 1})

	p.decide(id, itr, graph.ActionApprove, "")
	itr = p.waitsAt(id, "plan", "plan", 1) // invoke #2
	p.wantCalls(roleCalls{analyze: 1, requirements: 1, research: 1, plan: 1})

	p.decide(id, itr, graph.ActionApprove, "")
	decided := p.lastSeq(id)
	itr = p.waitsAt(id, "merge", "merge", 1) // invoke #3: implement runs
	p.wantCalls(roleCalls{1, 1, 1, 1, 1, 1})
	wantStrings(t, "nodes started after the plan approval", p.nodesStartedAfter(id, decided),
		[]string{"validate_plan_tasks", "implement", "merge"})

	p.decide(id, itr, graph.ActionApprove, "")
	decided = p.lastSeq(id)
	res := p.succeeds(id) // invoke #4: merge completes, the graph ends
	if started := p.nodesStartedAfter(id, decided); len(started) != 0 {
		t.Errorf("nodes started after the merge approval = %v, want none", started)
	}
	p.wantCalls(roleCalls{1, 1, 1, 1, 1, 1})
	wantCompleteResult(t, res, 0)
	p.wantCompletions(id, nodesUpTo("merge", 1))
	if n := p.runs[id]; n != 4 {
		t.Errorf("Run invocations = %d, want 4", n)
	}
	itrs := p.audit(id)
	wantStrings(t, "interrupts", iterationsOf(itrs), []string{"requirements:1", "plan:1", "merge:1"})
	evs := p.events(id)
	if last := evs[len(evs)-1]; last.Type != graph.EventTaskCompleted {
		t.Errorf("last event = %s, want task.completed", last.Type)
	}
}

func TestScenario15PlanRejectThroughMergeApprove(t *testing.T) {
	t.Parallel()
	p := setup(t)
	id := p.create(`{"gates": {"allowPrd": true, "allowPlan": false, "allowMerge": false}}`)

	itr := p.waitsAt(id, "plan", "plan", 1)
	p.decide(id, itr, graph.ActionReject, "Add a task for the download button.")
	itr = p.waitsAt(id, "plan", "plan", 2) // plan re-executes on rejection
	p.wantCalls(roleCalls{analyze: 1, requirements: 1, research: 1, plan: 2})
	if n := len(p.phases(id, graph.EventNodeStarted, "implement")); n != 0 {
		t.Errorf("implement started %d times before the plan approval", n)
	}

	p.decide(id, itr, graph.ActionApprove, "")
	itr = p.waitsAt(id, "merge", "merge", 1) // implement runs, merge interrupts
	p.wantCalls(roleCalls{analyze: 1, requirements: 1, research: 1, plan: 2, implement: 1, merge: 1})

	p.decide(id, itr, graph.ActionApprove, "")
	res := p.succeeds(id)
	wantCompleteResult(t, res, 1)
	p.wantCalls(roleCalls{analyze: 1, requirements: 1, research: 1, plan: 2, implement: 1, merge: 1})
	wantStrings(t, "phaseTimings", p.phaseTimings(id),
		[]string{"analyze", "requirements", "research", "plan", "plan:2", "implement", "merge"})
	want := nodesUpTo("merge", 1)
	want["plan"] = 2
	p.wantCompletions(id, want)
	itrs := p.audit(id)
	wantStrings(t, "interrupts", iterationsOf(itrs), []string{"plan:1", "plan:2", "merge:1"})
}

func TestScenario16NoGatesWithMerge(t *testing.T) {
	t.Parallel()
	runsThrough(t, "") // approvalGates undefined; our graph always has merge
}
