package graph

import (
	"errors"
	"fmt"
)

// Sentinel errors callers branch on.
var (
	ErrTaskNotFound      = errors.New("task not found")
	ErrInterruptNotFound = errors.New("interrupt not found")
	ErrLeaseLost         = errors.New("lease lost")
	ErrUnknownWorkflow   = errors.New("unknown workflow")
	ErrConflict          = errors.New("conflict")
	ErrInvalid           = errors.New("invalid input")
	// ErrCheckpointNotFound is a step a task's checkpoint history does not
	// hold (never written, or pruned).
	ErrCheckpointNotFound = errors.New("checkpoint not found")
)

// ConflictError refuses a decision on an interrupt that is not pending.
type ConflictError struct {
	InterruptID string // the interrupt decided
	Status      string // its status (resolved, cancelled, expired, or pending when claimed)
	// Holder, when set, is who holds the pending interrupt's claim.
	Holder string
	// Reason, when set, replaces the default message.
	Reason string
}

// Error says what was refused or went wrong, for people.
func (e *ConflictError) Error() string {
	switch {
	case e.Reason != "":
		return e.Reason
	case e.Holder != "":
		return fmt.Sprintf("interrupt %s is claimed by %s: only they may decide it until they release it or the claim ends", e.InterruptID, e.Holder)
	case e.Status == InterruptExpired:
		return fmt.Sprintf("interrupt %s expired: its deadline passed", e.InterruptID)
	}
	return fmt.Sprintf("interrupt %s is %s, not pending", e.InterruptID, e.Status)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// ClaimHolderError refuses a release of an interrupt's claim by someone
// who does not hold it (HTTP 403).
type ClaimHolderError struct{ InterruptID, Holder string }

// Error says what was refused or went wrong, for people.
func (e *ClaimHolderError) Error() string {
	return fmt.Sprintf("interrupt %s is claimed by %s: only they or an admin may release it", e.InterruptID, e.Holder)
}

// ValidationError names the field of bad input.
type ValidationError struct {
	Field   string // the field, dotted ("input.order_id")
	Message string // what is wrong with it, for people
}

// Error says what was refused or went wrong, for people.
func (e *ValidationError) Error() string { return e.Field + ": " + e.Message }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// UnknownWorkflowError names a workflow no graph is registered for.
type UnknownWorkflowError struct{ Name string }

// Error says what was refused or went wrong, for people.
func (e *UnknownWorkflowError) Error() string { return fmt.Sprintf("unknown workflow %q", e.Name) }

// Is makes errors.Is(err, ErrUnknownWorkflow) true.
func (e *UnknownWorkflowError) Is(target error) bool { return target == ErrUnknownWorkflow }

// WrongTaskError is a decision naming an interrupt of another task.
type WrongTaskError struct {
	InterruptID string // the interrupt named
	TaskID      string // the task it was named with
}

// Error says what was refused or went wrong, for people.
func (e *WrongTaskError) Error() string {
	return fmt.Sprintf("interrupt %s does not belong to task %s", e.InterruptID, e.TaskID)
}

// Is makes errors.Is(err, ErrInterruptNotFound) true: for the caller, an
// interrupt of another task does not exist.
func (e *WrongTaskError) Is(target error) bool { return target == ErrInterruptNotFound }

// StateError is stored data that cannot be read back (malformed state JSON).
type StateError struct {
	TaskID string // the task whose stored data it is
	Err    error  // the underlying error
}

// Error says what was refused or went wrong, for people.
func (e *StateError) Error() string {
	var ng *NodeGoneError
	if errors.As(e.Err, &ng) {
		return fmt.Sprintf("task %s: %v", e.TaskID, e.Err)
	}
	return fmt.Sprintf("task %s: stored state is unreadable: %v", e.TaskID, e.Err)
}

// Unwrap returns the underlying error.
func (e *StateError) Unwrap() error { return e.Err }

// RouteError is a router returning a node it did not declare.
type RouteError struct {
	From     string   // the node whose router it is
	Returned string   // what the router returned
	Declared []string // the targets the route declared
}

// Error says what was refused or went wrong, for people.
func (e *RouteError) Error() string {
	return fmt.Sprintf("router of node %q returned undeclared node %q (declared: %v)", e.From, e.Returned, e.Declared)
}

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying whatever the node's policy.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

var errInvalidJSON = errors.New("state is not valid JSON")
