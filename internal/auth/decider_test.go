package auth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

type shipState struct {
	Drafts   int      `json:"drafts"`
	Feedback []string `json:"feedback"`
	Merged   bool     `json:"merged"`
}

// shipGraph: draft (gate "prd") → merge (gate "merge") → END.
func shipGraph(t testing.TB) *graph.Graph[shipState] {
	t.Helper()
	g, err := graph.New[shipState]("ship").
		Node("draft", func(_ context.Context, run *graph.NodeRun, s shipState) (shipState, error) {
			s.Drafts++
			run.Artifact("prd.md", "text/markdown", fmt.Sprintf("draft %d", s.Drafts))
			return s, nil
		}).
		Node("merge", func(_ context.Context, run *graph.NodeRun, s shipState) (shipState, error) {
			run.Artifact("merge.md", "text/markdown", "merge the branch")
			return s, nil
		}).
		Gate("draft", graph.Gate[shipState]{Kind: "prd", Option: "allowPrd", Artifact: "prd.md",
			OnReject: func(s shipState, fb string, _ int) (shipState, error) {
				s.Feedback = append(s.Feedback, fb)
				return s, nil
			}}).
		Gate("merge", graph.Gate[shipState]{Kind: "merge", Option: "allowMerge", Artifact: "merge.md",
			OnReject: func(s shipState, fb string, _ int) (shipState, error) {
				s.Feedback = append(s.Feedback, fb)
				return s, nil
			},
			OnEdit: func(s shipState, _ string) (shipState, error) { return s, nil }}).
		Edge("draft", "merge").
		Edge("merge", graph.END).
		Init(func(json.RawMessage, graph.Options) (shipState, error) { return shipState{}, nil }).
		Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

type deciderEnv struct {
	*env
	engine  *graph.Engine
	decider *auth.Decider
}

func newDeciderEnv(t *testing.T, policy auth.Policy) *deciderEnv {
	t.Helper()
	store := postgres.NewStore(pgtest.NewPool(t), postgres.Options{})
	engine, err := graph.NewEngine(store, []graph.Workflow{shipGraph(t)})
	if err != nil {
		t.Fatal(err)
	}
	return &deciderEnv{env: &env{store: store, svc: auth.NewService(auth.Config{Store: store})}, engine: engine,
		decider: auth.NewDecider(engine, store, policy, nil)}
}

// waitingAt creates a task by creator and runs it to its gate of kind
// ("prd", or "merge" with the prd gate auto-approved).
func (e *deciderEnv) waitingAt(t *testing.T, creator, kind string) (*graph.Task, *graph.Interrupt) {
	t.Helper()
	ctx := context.Background()
	opts := `{"gates":{}}`
	if kind == "merge" {
		opts = `{"gates":{"allowPrd":true}}`
	}
	task, err := e.engine.Create(ctx, graph.NewTask{Workflow: "ship", Title: "ship it", Options: json.RawMessage(opts),
		CreatedBy: creator})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.engine.Run(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != graph.StatusWaiting || out.Interrupt == nil || out.Interrupt.Kind != kind {
		t.Fatalf("run to the %s gate: %+v", kind, out)
	}
	return task, out.Interrupt
}

func (e *deciderEnv) status(t *testing.T, taskID, interruptID string) (graph.TaskStatus, string) {
	t.Helper()
	ctx := context.Background()
	task, err := e.store.Task(ctx, taskID)
	if err != nil {
		t.Fatal(err)
	}
	itr, err := e.store.Interrupt(ctx, interruptID)
	if err != nil {
		t.Fatal(err)
	}
	return task.Status, itr.Status
}

func user(name string, role auth.Role, kinds ...string) auth.Principal {
	return auth.Principal{Name: name, Role: role, Kinds: kinds, Kind: auth.KindUser}
}

func approve(id string) graph.DecisionInput {
	return graph.DecisionInput{InterruptID: id, Action: graph.ActionApprove}
}

func wantForbidden(t *testing.T, err error, reason string) {
	t.Helper()
	var fe *auth.ForbiddenError
	if !errors.As(err, &fe) || !errors.Is(err, auth.ErrForbidden) {
		t.Fatalf("got %v, want a refusal", err)
	}
	if !strings.Contains(fe.Reason, reason) {
		t.Fatalf("reason %q does not say %q", fe.Reason, reason)
	}
}

func TestDeciderRolesAndKinds(t *testing.T) {
	t.Parallel()
	e := newDeciderEnv(t, auth.DefaultPolicy())
	ctx := context.Background()
	task, itr := e.waitingAt(t, "ops", "prd")

	// Roles below approver are refused before anything about the
	// interrupt, even a malformed one.
	for _, p := range []auth.Principal{user("vic", auth.RoleViewer), user("otto", auth.RoleOperator),
		{Name: "token:ci", Role: auth.RoleOperator, Kind: auth.KindToken}} {
		_, err := e.decider.Decide(ctx, p, task.ID, approve(itr.ID))
		wantForbidden(t, err, "needs the approver role; "+p.Name+" is "+map[auth.Role]string{
			auth.RoleViewer: "a viewer", auth.RoleOperator: "an operator"}[p.Role]) // not "a operator"
		_, err = e.decider.Decide(ctx, p, task.ID, graph.DecisionInput{InterruptID: "garbage", Action: "nonsense"})
		wantForbidden(t, err, "needs the approver role")
	}
	// An approver limited to merge may not decide a prd.
	_, err := e.decider.Decide(ctx, user("mia", auth.RoleApprover, "merge"), task.ID, approve(itr.ID))
	wantForbidden(t, err, "mia may decide only merge interrupts, not prd")
	if ts, is := e.status(t, task.ID, itr.ID); ts != graph.StatusWaiting || is != graph.InterruptPending {
		t.Fatalf("a refusal changed the task: %s %s", ts, is)
	}
	// Validation and lookups come after authorization.
	if _, err := e.decider.Decide(ctx, user("ann", auth.RoleApprover), task.ID, graph.DecisionInput{Action: "approve"}); !errors.Is(err, graph.ErrInvalid) {
		t.Fatalf("no interrupt id: %v", err)
	}
	if _, err := e.decider.Decide(ctx, user("ann", auth.RoleApprover), task.ID, approve(graph.NewID())); !errors.Is(err, graph.ErrInterruptNotFound) {
		t.Fatalf("unknown interrupt: %v", err)
	}
	other, _ := e.waitingAt(t, "ops", "prd")
	if _, err := e.decider.Decide(ctx, user("ann", auth.RoleApprover), other.ID, approve(itr.ID)); !errors.Is(err, graph.ErrInterruptNotFound) {
		t.Fatalf("another task's interrupt: %v", err)
	}
	// An approver of prd (and an admin, whatever its kinds) decides.
	out, err := e.decider.Decide(ctx, user("pat", auth.RoleApprover, "prd"), task.ID, approve(itr.ID))
	if err != nil || out.Pending() || out.Decision.DecidedBy != "pat" || out.Required != 1 {
		t.Fatalf("approver of prd: %+v %v", out, err)
	}
	if _, err := e.decider.Decide(ctx, user("root", auth.RoleAdmin), task.ID, approve(itr.ID)); !errors.Is(err, graph.ErrConflict) {
		t.Fatalf("a second decision: %v", err)
	}
	ev, err := e.svc.AuditTrail(ctx, auth.AuditFilter{Kind: "decision"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range ev {
		got = append(got, x.Actor+":"+x.Kind)
	}
	// Newest first: pat's decision, then the seven refusals.
	want := "pat:decision.recorded mia:decision.refused token:ci:decision.refused token:ci:decision.refused " +
		"otto:decision.refused otto:decision.refused vic:decision.refused vic:decision.refused"
	if strings.Join(got, " ") != want {
		t.Errorf("audit trail:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

// TestSeparationOfDuties: the creator of a task may not approve its own
// merge (403 with the reason, nothing recorded); may reject it; another
// approver approves it.
func TestSeparationOfDuties(t *testing.T) {
	t.Parallel()
	e := newDeciderEnv(t, auth.DefaultPolicy())
	ctx := context.Background()
	task, itr := e.waitingAt(t, "alice", "merge")
	alice := user("alice", auth.RoleApprover)

	for _, action := range []string{graph.ActionApprove, graph.ActionEdit} {
		_, err := e.decider.Decide(ctx, alice, task.ID, graph.DecisionInput{InterruptID: itr.ID, Action: action,
			Value: json.RawMessage(`"changed"`)})
		wantForbidden(t, err, "Separation of duties: alice started this task and may not approve its own merge")
	}
	// Admins too: the rule is about the person, not the role.
	_, err := e.decider.Decide(ctx, user("alice", auth.RoleAdmin), task.ID, approve(itr.ID))
	wantForbidden(t, err, "Separation of duties")
	if ts, is := e.status(t, task.ID, itr.ID); ts != graph.StatusWaiting || is != graph.InterruptPending {
		t.Fatalf("a refused approval changed the task: %s %s", ts, is)
	}
	if ds, _ := e.store.Decisions(ctx, task.ID); len(ds) != 0 {
		t.Fatalf("decisions recorded: %+v", ds)
	}
	// The creator's own prd is not under the rule (default: merge only).
	t2, prd := e.waitingAt(t, "alice", "prd")
	if _, err := e.decider.Decide(ctx, alice, t2.ID, approve(prd.ID)); err != nil {
		t.Fatalf("creator approving a prd: %v", err)
	}
	// Rejecting one's own merge is allowed.
	out, err := e.decider.Decide(ctx, alice, task.ID, graph.DecisionInput{InterruptID: itr.ID, Action: graph.ActionReject,
		Feedback: "not yet"})
	if err != nil || out.Decision.Action != graph.ActionReject {
		t.Fatalf("creator rejecting: %+v %v", out, err)
	}
	// Another approver approves the next merge gate.
	if _, err := e.engine.Run(ctx, task.ID, 0); err != nil {
		t.Fatal(err)
	}
	itr2, err := e.store.PendingInterrupt(ctx, task.ID)
	if err != nil || itr2 == nil {
		t.Fatalf("no second merge gate: %v", err)
	}
	if out, err := e.decider.Decide(ctx, user("bob", auth.RoleApprover), task.ID, approve(itr2.ID)); err != nil || out.Decision.DecidedBy != "bob" {
		t.Fatalf("bob approving: %+v %v", out, err)
	}
	ev, _ := e.svc.AuditTrail(ctx, auth.AuditFilter{Actor: "alice", Kind: "decision.refused"})
	if len(ev) != 3 || !strings.Contains(string(ev[0].Data), "Separation of duties") {
		t.Fatalf("refusals in the audit trail: %+v", ev)
	}

	// GATEHOUSE_SOD_KINDS=none lifts the rule.
	free := newDeciderEnv(t, auth.NewPolicy(nil, nil))
	t3, m3 := free.waitingAt(t, "alice", "merge")
	if _, err := free.decider.Decide(ctx, alice, t3.ID, approve(m3.ID)); err != nil {
		t.Fatalf("without the rule: %v", err)
	}
}

// TestTwoApprovers: merge=2. The first approval leaves the task waiting
// with "1 of 2"; the same user again is refused; a second user's approval
// records the decision naming both and the task resumes. A rejection
// resolves at once.
func TestTwoApprovers(t *testing.T) {
	t.Parallel()
	e := newDeciderEnv(t, auth.NewPolicy(map[string]int{"merge": 2}, []string{"merge"}))
	ctx := context.Background()
	task, itr := e.waitingAt(t, "carol", "merge")
	ann, bob := user("ann", auth.RoleApprover), user("bob", auth.RoleApprover, "merge")

	out, err := e.decider.Decide(ctx, ann, task.ID, approve(itr.ID))
	if err != nil {
		t.Fatal(err)
	}
	if !out.Pending() || out.Progress() != "1 of 2 approvals" || !slices.Equal(out.Approvers, []string{"ann"}) {
		t.Fatalf("first approval: %+v", out)
	}
	if ts, is := e.status(t, task.ID, itr.ID); ts != graph.StatusWaiting || is != graph.InterruptPending {
		t.Fatalf("after one approval: %s %s", ts, is)
	}
	evs, _ := e.store.Events(ctx, task.ID, 0, 100)
	last := evs[len(evs)-1]
	if last.Type != graph.EventApprovalRecorded || !strings.Contains(string(last.Data), `"approved_by": "ann"`) &&
		!strings.Contains(string(last.Data), `"approved_by":"ann"`) {
		t.Fatalf("approval event: %s %s", last.Type, last.Data)
	}

	_, err = e.decider.Decide(ctx, ann, task.ID, approve(itr.ID))
	wantForbidden(t, err, "ann has already approved this merge (1 of 2 approvals)")
	// The creator cannot be the second approver.
	_, err = e.decider.Decide(ctx, user("carol", auth.RoleApprover), task.ID, approve(itr.ID))
	wantForbidden(t, err, "Separation of duties")
	// An edit would approve alone.
	_, err = e.decider.Decide(ctx, bob, task.ID, graph.DecisionInput{InterruptID: itr.ID, Action: graph.ActionEdit,
		Value: json.RawMessage(`"x"`)})
	wantForbidden(t, err, "needs 2 distinct approvers")
	if ts, is := e.status(t, task.ID, itr.ID); ts != graph.StatusWaiting || is != graph.InterruptPending {
		t.Fatalf("after refusals: %s %s", ts, is)
	}

	out, err = e.decider.Decide(ctx, bob, task.ID, approve(itr.ID))
	if err != nil {
		t.Fatal(err)
	}
	if out.Pending() || out.Decision.DecidedBy != "bob" || out.Progress() != "2 of 2 approvals" {
		t.Fatalf("second approval: %+v", out)
	}
	if ts, is := e.status(t, task.ID, itr.ID); ts != graph.StatusQueued || is != graph.InterruptResolved {
		t.Fatalf("after two approvals: %s %s", ts, is)
	}
	evs, _ = e.store.Events(ctx, task.ID, 0, 100)
	last = evs[len(evs)-1]
	var data struct {
		DecidedBy string   `json:"decided_by"`
		Approvers []string `json:"approvers"`
	}
	if err := json.Unmarshal(last.Data, &data); err != nil || last.Type != graph.EventDecisionRecorded ||
		data.DecidedBy != "bob" || !slices.Equal(data.Approvers, []string{"ann", "bob"}) {
		t.Fatalf("decision event: %s %s", last.Type, last.Data)
	}
	res, err := e.engine.Run(ctx, task.ID, 0)
	if err != nil || res.Status != graph.StatusSucceeded {
		t.Fatalf("resumed: %+v %v", res, err)
	}
	// A third approval finds nothing pending.
	if _, err := e.decider.Decide(ctx, user("dan", auth.RoleApprover), task.ID, approve(itr.ID)); !errors.Is(err, graph.ErrConflict) {
		t.Fatalf("after the decision: %v", err)
	}

	// Any rejection resolves at once, approvals or not.
	t2, m2 := e.waitingAt(t, "carol", "merge")
	if out, err := e.decider.Decide(ctx, ann, t2.ID, approve(m2.ID)); err != nil || !out.Pending() {
		t.Fatalf("approval: %+v %v", out, err)
	}
	out, err = e.decider.Decide(ctx, bob, t2.ID, graph.DecisionInput{InterruptID: m2.ID, Action: graph.ActionReject,
		Feedback: "tests are red"})
	if err != nil || out.Pending() || out.Decision.Action != graph.ActionReject {
		t.Fatalf("rejection: %+v %v", out, err)
	}
	if ts, is := e.status(t, t2.ID, m2.ID); ts != graph.StatusQueued || is != graph.InterruptResolved {
		t.Fatalf("after the rejection: %s %s", ts, is)
	}

	// The audit trail shows the approvals and the decision with their actors.
	ev, err := e.svc.AuditTrail(ctx, auth.AuditFilter{Actor: "ann", Kind: "approval"})
	if err != nil || len(ev) != 2 || ev[0].TaskID != t2.ID || ev[1].TaskID != task.ID {
		t.Fatalf("ann's approvals: %+v %v", ev, err)
	}
}

// TestConcurrentApprovals: five approvers at once on a kind that needs
// three: exactly one decision, every approval counted once.
func TestConcurrentApprovals(t *testing.T) {
	t.Parallel()
	e := newDeciderEnv(t, auth.NewPolicy(map[string]int{"merge": 3}, nil))
	ctx := context.Background()
	task, itr := e.waitingAt(t, "carol", "merge")
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		decided   int
		pending   int
		conflicts int
	)
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := e.decider.Decide(ctx, user(fmt.Sprintf("u%d", i), auth.RoleApprover), task.ID, approve(itr.ID))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, graph.ErrConflict):
				conflicts++
			case err != nil:
				t.Error(err)
			case out.Pending():
				pending++
			default:
				decided++
			}
		}()
	}
	wg.Wait()
	if decided != 1 || pending != 2 || conflicts != 2 {
		t.Errorf("decided %d, pending %d, conflicts %d; want 1, 2, 2", decided, pending, conflicts)
	}
	ds, _ := e.store.Decisions(ctx, task.ID)
	if len(ds) != 1 {
		t.Fatalf("decisions: %+v", ds)
	}
}

// countingStore counts the tasks and interrupts read through it, by the
// Decider and by the engine.
type countingStore struct {
	*postgres.Store
	tasks, interrupts atomic.Int32
}

func (s *countingStore) Task(ctx context.Context, id string) (*graph.Task, error) {
	s.tasks.Add(1)
	return s.Store.Task(ctx, id)
}

func (s *countingStore) Interrupt(ctx context.Context, id string) (*graph.Interrupt, error) {
	s.interrupts.Add(1)
	return s.Store.Interrupt(ctx, id)
}

// TestDecideOn: a decision on a subject already read (the task and the
// interrupt, in one statement) reads neither again, and answers as
// Decide does: refusals, the interrupt missing or of another task, a
// subject gone stale, several approvers.
func TestDecideOn(t *testing.T) {
	t.Parallel()
	e := newDeciderEnv(t, auth.NewPolicy(map[string]int{"merge": 2}, []string{"merge"}))
	cs := &countingStore{Store: e.store}
	engine, err := graph.NewEngine(cs, []graph.Workflow{shipGraph(t)})
	if err != nil {
		t.Fatal(err)
	}
	decider := auth.NewDecider(engine, cs, e.decider.Policy(), nil)
	ctx := context.Background()
	subject := func(taskID, itrID string) auth.Subject {
		t.Helper()
		task, itr, err := e.store.DecisionSubject(ctx, taskID, itrID)
		if err != nil {
			t.Fatal(err)
		}
		return auth.Subject{Task: task, Interrupt: itr}
	}
	reads := func(want int32) {
		t.Helper()
		if n := cs.tasks.Load() + cs.interrupts.Load(); n != want {
			t.Errorf("%d tasks and %d interrupts read, want %d in all", cs.tasks.Load(), cs.interrupts.Load(), want)
		}
	}
	ann, bob, carol := user("ann", auth.RoleApprover), user("bob", auth.RoleApprover), user("carol", auth.RoleApprover)

	task, prd := e.waitingAt(t, "carol", "prd")
	stale := subject(task.ID, prd.ID)
	_, err = decider.DecideOn(ctx, user("vic", auth.RoleViewer), stale, approve(prd.ID))
	wantForbidden(t, err, "needs the approver role")
	_, err = decider.DecideOn(ctx, user("mia", auth.RoleApprover, "merge"), stale, approve(prd.ID))
	wantForbidden(t, err, "mia may decide only merge interrupts, not prd")
	if _, err := decider.DecideOn(ctx, ann, stale, graph.DecisionInput{InterruptID: "nope", Action: "approve"}); !errors.Is(err, graph.ErrInvalid) {
		t.Fatalf("malformed interrupt id: %v", err)
	}
	if _, err := decider.DecideOn(ctx, ann, stale, graph.DecisionInput{InterruptID: prd.ID, Action: "maybe"}); !errors.Is(err, graph.ErrInvalid) {
		t.Fatalf("unknown action: %v", err)
	}
	unknown := graph.NewID()
	if _, err := decider.DecideOn(ctx, ann, subject(task.ID, unknown), approve(unknown)); !errors.Is(err, graph.ErrInterruptNotFound) {
		t.Fatalf("unknown interrupt: %v", err)
	}
	other, otherItr := e.waitingAt(t, "carol", "prd")
	var wt *graph.WrongTaskError
	if _, err := decider.DecideOn(ctx, ann, subject(task.ID, otherItr.ID), approve(otherItr.ID)); !errors.As(err, &wt) ||
		!errors.Is(err, graph.ErrInterruptNotFound) {
		t.Fatalf("another task's interrupt: %v", err)
	}
	out, err := decider.DecideOn(ctx, ann, stale, approve(prd.ID))
	if err != nil || out.Pending() || out.Decision.DecidedBy != "ann" || out.Decision.InterruptID != prd.ID {
		t.Fatalf("approval: %+v %v", out, err)
	}
	reads(0)
	// The subject still says pending; the decision is refused all the same.
	if _, err := decider.DecideOn(ctx, bob, stale, approve(prd.ID)); !errors.Is(err, graph.ErrConflict) {
		t.Fatalf("a second decision on a stale subject: %v", err)
	}
	// An interrupt of another id than the decision names is read afresh.
	mixed := subject(other.ID, otherItr.ID)
	mixed.Interrupt = stale.Interrupt
	if _, err := decider.DecideOn(ctx, bob, mixed, approve(otherItr.ID)); err != nil {
		t.Fatalf("decision with a subject of another interrupt: %v", err)
	}
	reads(1)
	if ts, is := e.status(t, other.ID, otherItr.ID); ts != graph.StatusQueued || is != graph.InterruptResolved {
		t.Fatalf("the other task after its decision: %s %s", ts, is)
	}

	// merge=2 with separation of duties, every step on a subject.
	mt, merge := e.waitingAt(t, "carol", "merge")
	cs.tasks.Store(0)
	cs.interrupts.Store(0)
	_, err = decider.DecideOn(ctx, carol, subject(mt.ID, merge.ID), approve(merge.ID))
	wantForbidden(t, err, "Separation of duties: carol started this task")
	out, err = decider.DecideOn(ctx, ann, subject(mt.ID, merge.ID), approve(merge.ID))
	if err != nil || !out.Pending() || out.Progress() != "1 of 2 approvals" {
		t.Fatalf("first approval: %+v %v", out, err)
	}
	_, err = decider.DecideOn(ctx, ann, subject(mt.ID, merge.ID), approve(merge.ID))
	wantForbidden(t, err, "ann has already approved this merge (1 of 2 approvals)")
	out, err = decider.DecideOn(ctx, bob, subject(mt.ID, merge.ID), approve(merge.ID))
	if err != nil || out.Pending() || out.Decision.DecidedBy != "bob" || !slices.Equal(out.Approvers, []string{"ann", "bob"}) {
		t.Fatalf("second approval: %+v %v", out, err)
	}
	reads(0)
	if ts, is := e.status(t, mt.ID, merge.ID); ts != graph.StatusQueued || is != graph.InterruptResolved {
		t.Fatalf("after two approvals: %s %s", ts, is)
	}
	refused, _ := e.svc.AuditTrail(ctx, auth.AuditFilter{Kind: "decision.refused"})
	if len(refused) != 4 {
		t.Errorf("refusals in the audit trail: %d, want 4", len(refused))
	}
}

// worker is a runner as the Decider sees it: free slots to offer, the
// leases it was handed, its wake-ups.
type worker struct {
	mu      sync.Mutex
	free    int
	offered int
	settled map[string]int64 // task id → the fence its lease was granted (0: none)
	wakes   int
}

func (w *worker) Handoff() (*graph.Lease, func(string)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.free == 0 {
		return nil, nil
	}
	w.free--
	w.offered++
	lease := &graph.Lease{Owner: "test-worker", TTL: time.Minute}
	return lease, func(taskID string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.free++
		if w.settled == nil {
			w.settled = map[string]int64{}
		}
		w.settled[taskID] = lease.Fence
	}
}

func (w *worker) Wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wakes++
}

// TestDeciderHandsTheTaskToItsWorker: a decision that makes its task
// runnable leases it to a free worker in its own transaction and settles
// the offer; with none free it wakes the runner instead; an approval short
// of the number, or a refusal, offers nothing and wakes nobody.
func TestDeciderHandsTheTaskToItsWorker(t *testing.T) {
	ctx := context.Background()
	e := newDeciderEnv(t, auth.NewPolicy(map[string]int{"merge": 2}, nil))
	w := &worker{free: 1}
	d := auth.NewDecider(e.engine, e.store, e.decider.Policy(), nil, auth.WithWorker(w))
	bob, carol := user("bob", auth.RoleApprover), user("carol", auth.RoleApprover)

	task, prd := e.waitingAt(t, "alice", "prd")
	out, err := d.Decide(ctx, bob, task.ID, approve(prd.ID))
	if err != nil || out.Decision == nil || out.Decision.Lease == nil || out.Decision.Lease.Fence == 0 {
		t.Fatalf("decision with a free worker: %+v, %v", out, err)
	}
	if st, _ := e.status(t, task.ID, prd.ID); st != graph.StatusRunning {
		t.Errorf("task after a decision leased to the worker: %s, want running", st)
	}
	if w.settled[task.ID] != out.Decision.Lease.Fence || w.wakes != 0 || w.free != 1 {
		t.Errorf("worker after the leased decision: %+v", w)
	}

	// No free worker: queued, and the runner is woken.
	w.free = 0
	task2, prd2 := e.waitingAt(t, "alice", "prd")
	if _, err := d.Decide(ctx, bob, task2.ID, approve(prd2.ID)); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.status(t, task2.ID, prd2.ID); st != graph.StatusQueued || w.wakes != 1 {
		t.Errorf("decision without a free worker: task %s, wakes %d; want queued, 1", st, w.wakes)
	}

	// One approval of two, and a refusal: nothing offered, nobody woken.
	w.free = 1
	task3, merge := e.waitingAt(t, "alice", "merge")
	if out, err := d.Decide(ctx, carol, task3.ID, approve(merge.ID)); err != nil || !out.Pending() {
		t.Fatalf("first of two approvals: %+v, %v", out, err)
	}
	if _, err := d.Decide(ctx, user("vic", auth.RoleViewer), task3.ID, approve(merge.ID)); err == nil {
		t.Fatal("a viewer decided")
	}
	if w.offered != 1 || w.wakes != 1 {
		t.Errorf("after a pending approval and a refusal: offered %d, wakes %d; want 1, 1", w.offered, w.wakes)
	}
}
