package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// DecisionInput is a human's decision as submitted.
type DecisionInput struct {
	InterruptID string          // the pending interrupt decided (required)
	Action      string          // ActionApprove, ActionReject, ActionEdit or ActionRespond
	Feedback    string          // why, for a rejection (required there)
	Value       json.RawMessage // the edited artifact (a JSON string) for edit, the answer for respond
	DecidedBy   string          // the principal deciding, for the audit trail
	// PayloadSHA256, when set, is the hash of the payload the decider saw:
	// a different one than the interrupt's refuses the decision
	// (*ConflictError).
	PayloadSHA256 string
	// Approvers, when an interrupt needed several, names them all (the
	// decision.recorded event carries them as "approvers").
	Approvers []string
	// Lease, when set, leases the task the decision makes runnable to a
	// worker in the same transaction (Decision.Lease); Lease.Fence tells
	// whether it was.
	Lease *Lease
	// Task is the task as the caller has just read it, if it has: the
	// engine checks the interrupt's node against the task's workflow
	// without reading the task again.
	Task *Task
}

// Decide records a decision on a pending interrupt of the task; the task
// becomes runnable. It does not run the task. Errors: *ValidationError,
// ErrInterruptNotFound (also *WrongTaskError), *ConflictError.
func (e *Engine) Decide(ctx context.Context, taskID string, in DecisionInput) (*Decision, error) {
	return e.decide(ctx, taskID, nil, in)
}

// DecideInterrupt is Decide for a caller that has just read the interrupt
// in.InterruptID names (the approval desk reads it to check who may
// decide): the engine does not read it again. A copy that went stale
// meanwhile does no harm: Checkpointer.Decide writes only while the
// interrupt is still pending, so a decision that lost a race is a
// *ConflictError as before. An itr of another id is ignored and read.
func (e *Engine) DecideInterrupt(ctx context.Context, taskID string, itr *Interrupt, in DecisionInput) (*Decision, error) {
	return e.decide(ctx, taskID, itr, in)
}

func (e *Engine) decide(ctx context.Context, taskID string, itr *Interrupt, in DecisionInput) (*Decision, error) {
	if in.InterruptID == "" {
		return nil, &ValidationError{Field: "interrupt_id", Message: "is required"}
	}
	if !ValidID(in.InterruptID) {
		return nil, &ValidationError{Field: "interrupt_id", Message: "is not a uuid"}
	}
	switch in.Action {
	case ActionApprove, ActionReject, ActionEdit, ActionRespond:
	case "":
		return nil, &ValidationError{Field: "action", Message: "is required"}
	default:
		return nil, &ValidationError{Field: "action", Message: fmt.Sprintf("unknown action %q (approve, reject, edit, respond)", in.Action)}
	}
	if itr == nil || !strings.EqualFold(itr.ID, in.InterruptID) {
		var err error
		if itr, err = e.cp.Interrupt(ctx, in.InterruptID); err != nil {
			return nil, err
		}
	}
	if itr.TaskID != taskID {
		return nil, &WrongTaskError{InterruptID: in.InterruptID, TaskID: taskID}
	}
	if itr.Status != InterruptPending {
		return nil, &ConflictError{InterruptID: itr.ID, Status: itr.Status}
	}
	if err := e.decidable(ctx, taskID, itr, in.Task); err != nil {
		return nil, err
	}
	if !slices.Contains(itr.Payload.Actions, in.Action) {
		return nil, &ValidationError{Field: "action", Message: fmt.Sprintf("%q is not offered by this interrupt (offered: %s)",
			in.Action, strings.Join(itr.Payload.Actions, ", "))}
	}
	in.Feedback = strings.TrimSpace(in.Feedback)
	text := strings.TrimSpace(valueText(in.Value))
	switch {
	case in.Action == ActionReject && in.Feedback == "":
		return nil, &ValidationError{Field: "feedback", Message: "is required to reject"}
	case in.Action == ActionEdit && text == "":
		return nil, &ValidationError{Field: "value", Message: "must hold the edited artifact"}
	case in.Action == ActionRespond && text == "" && in.Feedback == "":
		return nil, &ValidationError{Field: "value", Message: "must hold the answer"}
	}
	if in.PayloadSHA256 != "" && !ValidSHA256(in.PayloadSHA256) {
		return nil, &ValidationError{Field: "payload_sha256", Message: "must be 64 lowercase hex characters (the SHA-256 of the payload's canonical JSON)"}
	}
	if in.PayloadSHA256 != "" && itr.PayloadSHA256 != "" && in.PayloadSHA256 != itr.PayloadSHA256 {
		return nil, &ConflictError{InterruptID: itr.ID, Status: itr.Status, Reason: fmt.Sprintf(
			"payload_sha256 %s is not the hash of interrupt %s's payload (%s): what you saw is not what is asked; reload it",
			in.PayloadSHA256, itr.ID, itr.PayloadSHA256)}
	}
	if len(in.Value) > 0 && !json.Valid(in.Value) {
		return nil, &ValidationError{Field: "value", Message: "is not valid JSON"}
	}
	if in.Action == ActionEdit && itr.Payload.Type == InterruptGate {
		// An edit the gate would refuse must be refused now, while the
		// interrupt is still open, not fail the task once it is consumed.
		// (A question that offers edit takes the edit as its answer.)
		snap, err := e.cp.Load(ctx, taskID)
		if err != nil {
			return nil, err
		}
		w, err := e.Workflow(snap.Task.Workflow)
		if err != nil {
			return nil, err
		}
		if err := w.checkEdit(snap.Checkpoint.State, itr.Node, valueText(in.Value)); err != nil {
			return nil, &ValidationError{Field: "value", Message: err.Error()}
		}
	}
	d := &Decision{InterruptID: itr.ID, TaskID: taskID, Action: in.Action, Feedback: in.Feedback,
		Value: in.Value, DecidedBy: in.DecidedBy, Lease: in.Lease, PayloadSHA256: in.PayloadSHA256}
	data := map[string]any{
		"interrupt_id": itr.ID, "kind": itr.Kind, "action": in.Action, "feedback": in.Feedback, "decided_by": in.DecidedBy, "actor": in.DecidedBy}
	if len(in.Approvers) > 0 {
		data["approvers"] = in.Approvers
	}
	if itr.PayloadSHA256 != "" {
		data["payload_sha256"] = itr.PayloadSHA256
	} else if in.PayloadSHA256 != "" {
		data["payload_sha256"] = in.PayloadSHA256
	}
	ev := newEvent(taskID, EventDecisionRecorded, itr.Node, itr.Iteration, e.now(), nil, data)
	if err := e.cp.Decide(ctx, d, &ev); err != nil {
		return nil, err
	}
	e.publish([]Event{ev})
	return d, nil
}

// Decidable reports whether a decision on itr, an interrupt of task,
// could be applied under the running definition of the task's workflow.
// Errors: *NodeGoneError, *UnknownWorkflowError.
func (e *Engine) Decidable(ctx context.Context, task *Task, itr *Interrupt) error {
	return e.decidable(ctx, itr.TaskID, itr, task)
}

// decidable refuses a decision on an interrupt whose node the running
// definition of the task's workflow no longer has (or no longer gates):
// applying it would leave the task nowhere to go. t is the task if the
// caller read it; nil reads it.
func (e *Engine) decidable(ctx context.Context, taskID string, itr *Interrupt, t *Task) error {
	if t == nil || t.ID != taskID || t.Workflow == "" {
		snap, err := e.cp.Load(ctx, taskID)
		if err != nil {
			return err
		}
		t = &snap.Task
	}
	w, err := e.Workflow(t.Workflow)
	if err != nil {
		return err
	}
	return gone(w.Resumable(Position{InterruptNode: itr.Node, InterruptType: itr.Payload.Type}), t)
}

// ValidSHA256 reports whether s is a SHA-256 in lowercase hex.
func ValidSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
