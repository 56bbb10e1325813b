package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/gatehousehq/gatehouse/graph"
)

// DecisionEngine records decisions (graph.Engine).
type DecisionEngine interface {
	// DecideInterrupt records in on itr, the interrupt in.InterruptID
	// names as the Decider has just read it (graph.Engine.DecideInterrupt).
	DecideInterrupt(ctx context.Context, taskID string, itr *graph.Interrupt, in graph.DecisionInput) (*graph.Decision, error)
}

// decidableChecker is an engine that tells, without writing, whether a
// decision on itr could be applied under the running definition of the
// task's workflow (graph.Engine.Decidable).
type decidableChecker interface {
	Decidable(ctx context.Context, task *graph.Task, itr *graph.Interrupt) error
}

// DecisionStore is what the Decider reads and writes besides the engine.
type DecisionStore interface {
	Task(ctx context.Context, taskID string) (*graph.Task, error)
	// Interrupt errors: graph.ErrInterruptNotFound.
	Interrupt(ctx context.Context, id string) (*graph.Interrupt, error)
	// RecordApproval adds approver's approval to a pending interrupt of
	// taskID (serialised per interrupt) and appends an approval.recorded
	// event saying how many of required it has. It returns every approver
	// so far, in order, and whether this call added one (false: approver
	// had approved already). Errors: graph.ErrInterruptNotFound,
	// *graph.ConflictError when the interrupt is not pending.
	RecordApproval(ctx context.Context, interruptID, taskID, approver string, required int) (approvers []string, added bool, err error)
	// Approvals lists the approvers of an interrupt so far.
	Approvals(ctx context.Context, interruptID string) ([]string, error)
	AddAudit(ctx context.Context, e AuditEvent) error
}

// Worker is this replica's runner as a decision needs it
// (runner.Runner): a free worker offered for the task a decision makes
// runnable, and a wake-up when none took it.
type Worker interface {
	// Handoff offers a free worker: lease goes with the decision, and
	// settle is called once afterwards whatever happened (nil, nil: no
	// worker is free).
	Handoff() (lease *graph.Lease, settle func(taskID string))
	// Wake asks the runner to look for work now; it never blocks.
	Wake()
}

// WakeWorker is a Worker without workers of its own to offer: it wakes by
// calling itself (nil: nothing).
type WakeWorker func()

// Handoff offers no worker.
func (WakeWorker) Handoff() (*graph.Lease, func(string)) { return nil, nil }

// Wake calls w.
func (w WakeWorker) Wake() {
	if w != nil {
		w()
	}
}

// AnswerError is a decision's value that fails the schema its interrupt
// asks for (an approval request's response_schema, SPEC §17): the API
// answers 422 naming Field ("value.env"), the forms show Problem beside
// the field. Nothing is recorded.
type AnswerError struct {
	Field   string
	Problem string
	// Fields is every field that fails, by path ("value.env" → its
	// problem), Field among them, so that a form can mark each one; nil
	// when only Field is known.
	Fields map[string]string
}

func (e *AnswerError) Error() string { return e.Field + ": " + e.Problem }

// DecisionCheck looks at a decision before it is recorded, after who may
// decide was checked: it may refuse it (*AnswerError, or
// *graph.ValidationError for a malformed value) or put its value in
// canonical form (typed JSON). Approval requests check their answers and
// edits with one (requests.CheckDecision), for every channel alike.
type DecisionCheck func(task *graph.Task, itr *graph.Interrupt, in *graph.DecisionInput) error

// WithDecisionCheck adds a check every decision passes.
func WithDecisionCheck(f DecisionCheck) DeciderOption {
	return func(d *Decider) { d.checks = append(d.checks, f) }
}

// Decider records decisions on behalf of principals, enforcing who may
// decide: the approver role, an approver's kinds, separation of duties
// (the task's creator may not approve its own interrupt of some kinds), and
// kinds that need several distinct approvers before the approval counts.
// It is the one way decisions enter: the API, the desk, action links,
// Slack, the LangGraph API and the terminal client all call DecideOn (or
// Decide), which also hands the task the decision makes runnable to this
// replica's worker (WithWorker).
type Decider struct {
	engine DecisionEngine
	store  DecisionStore
	policy Policy
	log    *slog.Logger
	worker Worker
	checks []DecisionCheck
}

// DeciderOption configures a Decider.
type DeciderOption func(*Decider)

// WithWorker makes the Decider hand each task its decisions make runnable
// to w: leased in the decision's own transaction when w has a free worker,
// else w is woken to claim it. Without it the task waits for a claim (a
// replica's NOTIFY, the sweep).
func WithWorker(w Worker) DeciderOption {
	return func(d *Decider) { d.worker = w }
}

// NewDecider returns a Decider.
func NewDecider(engine DecisionEngine, store DecisionStore, policy Policy, log *slog.Logger, opts ...DeciderOption) *Decider {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Decider{engine: engine, store: store, policy: policy, log: log}
	for _, o := range opts {
		o(d)
	}
	return d
}

// Policy returns the decider's approval policy.
func (d *Decider) Policy() Policy { return d.policy }

// Outcome is what a decision request did: recorded the decision, or
// recorded one approval of several needed (Decision nil).
type Outcome struct {
	Decision  *graph.Decision
	Kind      string
	Approvers []string
	Required  int
}

// Pending reports an approval that did not yet decide the interrupt.
func (o Outcome) Pending() bool { return o.Decision == nil }

// Progress says how many approvals the interrupt has: "1 of 2 approvals".
func (o Outcome) Progress() string { return Progress(len(o.Approvers), o.Required) }

// Progress is "n of m approvals".
func Progress(n, required int) string {
	return fmt.Sprintf("%d of %d approvals", n, required)
}

// MayDecide says whether p may decide itr of task, before any decision is
// tried: nil, or a *ForbiddenError with the reason. The desk uses it to
// offer the form only to those it would accept.
func (d *Decider) MayDecide(p Principal, task *graph.Task, itr *graph.Interrupt) error {
	switch {
	case !p.Can(RoleApprover):
		return forbidden("deciding interrupts needs the approver role; %s is %s", p.Name, p.Role.Article())
	case !p.MayDecide(itr.Kind):
		return forbidden("%s may decide only %s interrupts, not %s", p.Name, strings.Join(p.Kinds, ", "), itr.Kind)
	case !d.policy.MayDecideAt(p, itr.Kind, itr.EscalationLevel):
		return forbidden("%s may not decide %s interrupts%s: the policy lets %s decide them", p.Name, itr.Kind,
			levelNote(itr.EscalationLevel), d.policy.Deciders(itr.Kind, itr.EscalationLevel).Describe())
	}
	return nil
}

func levelNote(level int) string {
	if level == 0 {
		return ""
	}
	return fmt.Sprintf(" at escalation level %d", level)
}

// MayApprove says whether p may approve (or edit) itr of task: nil or a
// *ForbiddenError. Rejecting stays open to anyone who may decide.
func (d *Decider) MayApprove(p Principal, task *graph.Task, itr *graph.Interrupt, approvers []string) error {
	if err := d.MayDecide(p, task, itr); err != nil {
		return err
	}
	if d.policy.SeparateDuties(itr.Kind) && task.CreatedBy == p.Name {
		if task.Workflow == "request" {
			return forbidden("Separation of duties: %s made this request and may not approve its own %s; another approver must approve it.",
				p.Name, itr.Kind)
		}
		return forbidden("Separation of duties: %s started this task and may not approve its own %s; another approver must approve it.",
			p.Name, itr.Kind)
	}
	if n := d.policy.RequiredFor(task, itr); n > 1 && slices.Contains(approvers, p.Name) {
		return forbidden("%s has already approved this %s (%s); a different approver must give the next approval.",
			p.Name, itr.Kind, Progress(len(approvers), n))
	}
	return nil
}

// Decide records p's decision on an interrupt of taskID. Who may decide
// is checked before anything about the decision itself. On a kind that
// needs several approvers, an approve is one approval: below the number
// the interrupt stays pending (Outcome.Pending) and the same approver
// cannot approve twice; at the number the approve decision is recorded,
// naming every approver. A rejection (or an answer) resolves it at once.
// Refusals are *ForbiddenError, recorded in the audit trail. Other errors
// are the engine's (*graph.ValidationError, graph.ErrInterruptNotFound,
// *graph.ConflictError).
func (d *Decider) Decide(ctx context.Context, p Principal, taskID string, in graph.DecisionInput) (Outcome, error) {
	return d.decide(ctx, p, taskID, nil, in)
}

// Subject is what a decision is about as its caller has just read it (the
// API and the desk read both in one statement to check the task exists and
// who may see it): the task, and the interrupt the decision names, nil
// when no interrupt has that id.
type Subject struct {
	Task      *graph.Task
	Interrupt *graph.Interrupt
}

// DecideOn is Decide on a subject already read: neither the task nor the
// interrupt is read again, and every check and error is Decide's. Whether
// the interrupt is still pending is settled where the decision is written
// (one statement), so a subject gone stale meanwhile is a
// *graph.ConflictError, never a second decision. A subject whose
// interrupt has another id than in.InterruptID is read afresh.
func (d *Decider) DecideOn(ctx context.Context, p Principal, s Subject, in graph.DecisionInput) (Outcome, error) {
	return d.decide(ctx, p, s.Task.ID, &s, in)
}

// decide is Decide, reading what s (nil: nothing) does not hold.
func (d *Decider) decide(ctx context.Context, p Principal, taskID string, s *Subject, in graph.DecisionInput) (Outcome, error) {
	in.DecidedBy = p.Name
	in.InterruptID = strings.TrimSpace(in.InterruptID)
	in.Action = strings.TrimSpace(in.Action)
	if !p.Can(RoleApprover) {
		// Before anything about the interrupt: a viewer learns nothing.
		return Outcome{}, d.refuse(ctx, p, taskID, in, "", d.MayDecide(p, nil, &graph.Interrupt{}))
	}
	switch {
	case in.InterruptID == "":
		return Outcome{}, &graph.ValidationError{Field: "interrupt_id", Message: "is required"}
	case !graph.ValidID(in.InterruptID):
		return Outcome{}, &graph.ValidationError{Field: "interrupt_id", Message: "is not a uuid"}
	case in.PayloadSHA256 != "" && !graph.ValidSHA256(in.PayloadSHA256):
		return Outcome{}, &graph.ValidationError{Field: "payload_sha256",
			Message: "must be 64 lowercase hex characters (the SHA-256 of the payload's canonical JSON)"}
	}
	var (
		task *graph.Task
		itr  *graph.Interrupt
	)
	if s != nil {
		task = s.Task
		if s.Interrupt == nil {
			return Outcome{}, graph.ErrInterruptNotFound
		}
		if strings.EqualFold(s.Interrupt.ID, in.InterruptID) {
			itr = s.Interrupt
		}
	}
	if itr == nil {
		var err error
		if itr, err = d.store.Interrupt(ctx, in.InterruptID); err != nil {
			return Outcome{}, err
		}
	}
	if itr.TaskID != taskID {
		return Outcome{}, &graph.WrongTaskError{InterruptID: in.InterruptID, TaskID: taskID}
	}
	if task == nil {
		var err error
		if task, err = d.store.Task(ctx, taskID); err != nil {
			return Outcome{}, err
		}
	}
	out := Outcome{Kind: itr.Kind, Required: d.policy.RequiredFor(task, itr)}
	if err := d.MayDecide(p, task, itr); err != nil {
		return out, d.refuse(ctx, p, taskID, in, itr.Kind, err)
	}
	if itr.Status == graph.InterruptPending && itr.ClaimedBy != "" && itr.ClaimedBy != p.Name {
		return out, &graph.ConflictError{InterruptID: itr.ID, Status: itr.Status, Holder: itr.ClaimedBy}
	}
	if itr.Status == graph.InterruptPending && in.PayloadSHA256 != "" && itr.PayloadSHA256 != "" && in.PayloadSHA256 != itr.PayloadSHA256 {
		return out, &graph.ConflictError{InterruptID: itr.ID, Status: itr.Status, Reason: fmt.Sprintf(
			"payload_sha256 %s is not the hash of interrupt %s's payload (%s): what you saw is not what is asked; reload it",
			in.PayloadSHA256, itr.ID, itr.PayloadSHA256)}
	}
	for _, check := range d.checks {
		if itr.Status != graph.InterruptPending {
			break // the engine says it is not pending
		}
		if err := check(task, itr, &in); err != nil {
			return out, err
		}
	}
	approving := in.Action == graph.ActionApprove || in.Action == graph.ActionEdit
	if approving {
		if err := d.MayApprove(p, task, itr, nil); err != nil {
			return out, d.refuse(ctx, p, taskID, in, itr.Kind, err)
		}
	}
	if out.Required > 1 && in.Action == graph.ActionEdit {
		return out, d.refuse(ctx, p, taskID, in, itr.Kind, forbidden(
			"%s needs %d distinct approvers: an edit would approve alone; approve as it is, or reject with feedback",
			itr.Kind, out.Required))
	}
	if out.Required > 1 && in.Action == graph.ActionApprove {
		// Before an approval is recorded: an interrupt whose node the
		// running definition no longer has can never be decided.
		if c, ok := d.engine.(decidableChecker); ok {
			if err := c.Decidable(ctx, task, itr); err != nil {
				return out, err
			}
		}
		if itr.Status != graph.InterruptPending {
			return out, &graph.ConflictError{InterruptID: itr.ID, Status: itr.Status}
		}
		if !slices.Contains(itr.Payload.Actions, in.Action) {
			return out, &graph.ValidationError{Field: "action", Message: fmt.Sprintf(
				"%q is not offered by this interrupt (offered: %s)", in.Action, strings.Join(itr.Payload.Actions, ", "))}
		}
		approvers, added, err := d.store.RecordApproval(ctx, itr.ID, taskID, p.Name, out.Required)
		if err != nil {
			return out, err
		}
		out.Approvers = approvers
		if !added && len(approvers) < out.Required {
			return out, d.refuse(ctx, p, taskID, in, itr.Kind, forbidden(
				"%s has already approved this %s (%s); a different approver must give the next approval.",
				p.Name, itr.Kind, out.Progress()))
		}
		if len(approvers) < out.Required {
			return out, nil
		}
		// Enough distinct approvers (or a retry of the last one after a
		// failure between its approval and the decision): decide.
		in.Approvers = approvers
	}
	in.Task = task
	dec, err := d.record(ctx, taskID, itr, in)
	if err != nil {
		return out, err
	}
	out.Decision = dec
	if len(out.Approvers) == 0 && in.Action == graph.ActionApprove {
		out.Approvers = []string{p.Name}
	}
	return out, nil
}

// record has the engine record the decision, offering the task it makes
// runnable to a free worker of this replica (leased in the decision's own
// transaction), and wakes the runner when no worker took it.
func (d *Decider) record(ctx context.Context, taskID string, itr *graph.Interrupt, in graph.DecisionInput) (*graph.Decision, error) {
	if d.worker == nil {
		return d.engine.DecideInterrupt(ctx, taskID, itr, in)
	}
	lease, settle := d.worker.Handoff()
	in.Lease = lease
	dec, err := d.engine.DecideInterrupt(ctx, taskID, itr, in)
	if settle != nil {
		settle(taskID)
	}
	if err == nil && (dec == nil || dec.Lease == nil || dec.Lease.Fence == 0) {
		d.worker.Wake()
	}
	return dec, err
}

// refuse records a refused decision in the audit trail and returns err.
func (d *Decider) refuse(ctx context.Context, p Principal, taskID string, in graph.DecisionInput, kind string, err error) error {
	var fe *ForbiddenError
	if !errors.As(err, &fe) {
		return err
	}
	data, _ := json.Marshal(map[string]string{"task_id": taskID, "interrupt_id": in.InterruptID, "kind": kind,
		"action": in.Action, "reason": fe.Reason})
	if aerr := d.store.AddAudit(ctx, AuditEvent{Actor: p.Name, Kind: AuditDecisionRefused, Subject: taskID, Data: data}); aerr != nil {
		d.log.Error("audit event lost", "kind", AuditDecisionRefused, "actor", p.Name, "error", aerr)
	}
	return err
}
