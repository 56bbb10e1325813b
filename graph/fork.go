package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// ForkRequest asks for a new task that starts from a checkpoint of another.
type ForkRequest struct {
	// TaskID and Step name the source checkpoint.
	TaskID string
	Step   int // the checkpoint of the source task to start from
	// Patch is a JSON merge patch (RFC 7386) of the checkpoint's state;
	// empty or null: the state as it was.
	Patch     json.RawMessage
	Title     string // the fork's title; "" keeps the source's
	CreatedBy string // the principal forking, for the audit trail
}

// TaskStatusError refuses an action on a task in a status that does not
// allow it (a fork of a running task, a cancel of an ended one, a retry of
// one that did not fail): HTTP 409.
type TaskStatusError struct {
	TaskID string     // the task
	Status TaskStatus // its status
	Action string     // what was refused (decide, retry, fork, …)
}

// Error says what was refused or went wrong, for people.
func (e *TaskStatusError) Error() string {
	return fmt.Sprintf("task %s is %s: cannot %s it now", e.TaskID, e.Status, e.Action)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *TaskStatusError) Is(target error) bool { return target == ErrConflict }

// Fork creates a task of the source's workflow, input and options whose
// first checkpoint is the source's checkpoint at req.Step (same step
// number), its state patched with req.Patch and checked against the
// workflow's state type. The new task's event seq 1 is task.forked; it is
// queued to run from that checkpoint's next node, or, when the checkpoint
// rests on an interrupt, waits on a fresh copy of it. The source is only
// read. It is one read (Checkpointer.ForkPoint) and one commit.
//
// Errors: ErrTaskNotFound, ErrCheckpointNotFound, *TaskStatusError (the
// source is running), *ValidationError (field "state…" for the patch,
// "title"), *UnknownWorkflowError, *NodeGoneError (the checkpoint stands
// at a node the running definition no longer has).
func (e *Engine) Fork(ctx context.Context, req ForkRequest) (*Task, error) {
	if req.Step < 0 {
		return nil, ErrCheckpointNotFound
	}
	snap, err := e.cp.ForkPoint(ctx, req.TaskID, req.Step)
	if err != nil {
		return nil, err
	}
	src := &snap.Task
	if src.Status == StatusRunning {
		// Its history is settled, but the caller means to branch off a
		// task that is still moving: let it stop first.
		return nil, &TaskStatusError{TaskID: src.ID, Status: src.Status, Action: "fork"}
	}
	w, err := e.Workflow(src.Workflow)
	if err != nil {
		return nil, err
	}
	cp := snap.Checkpoint
	var itr *Interrupt
	if cp.PendingInterrupt != "" {
		if snap.Interrupt == nil || snap.Interrupt.ID != cp.PendingInterrupt {
			return nil, &StateError{TaskID: src.ID, Err: fmt.Errorf("checkpoint %d names interrupt %s, which is missing", cp.Step, cp.PendingInterrupt)}
		}
		itr = snap.Interrupt
	}
	pos := Position{NextNode: cp.NextNode}
	if itr != nil {
		pos.InterruptNode, pos.InterruptType = itr.Node, itr.Payload.Type
	}
	if err := w.Resumable(pos); err != nil {
		return nil, gone(err, src)
	}
	state := cp.State
	if patch := bytes.TrimSpace(req.Patch); len(patch) > 0 && string(patch) != "null" {
		if state, err = w.patchState(cp.State, patch); err != nil {
			return nil, err
		}
	}
	title := strings.Join(strings.Fields(req.Title), " ")
	switch {
	case !utf8.ValidString(title):
		return nil, &ValidationError{Field: "title", Message: "is not valid UTF-8"}
	case utf8.RuneCountInString(title) > 200:
		return nil, &ValidationError{Field: "title", Message: "is longer than 200 characters"}
	case title == "":
		title = forkTitle(src.Title, cp.Step)
	}

	now := e.now()
	id := NewID()
	next := cp.NextNode
	t := &Task{ID: id, Workflow: src.Workflow, Title: title, Input: src.Input, Options: src.Options,
		Status: StatusQueued, CurrentNode: next, CreatedBy: req.CreatedBy, CreatedAt: now, UpdatedAt: now,
		DefinitionVersion: w.Version(), ForkedFrom: &ForkRef{TaskID: src.ID, Step: cp.Step}}
	if next == END {
		t.CurrentNode = cp.LastNode
	}
	data := map[string]any{"source_task_id": src.ID, "step": cp.Step, "workflow": src.Workflow, "title": title,
		"created_by": req.CreatedBy, "definition_version": t.DefinitionVersion}
	if len(bytes.TrimSpace(req.Patch)) > 0 && string(bytes.TrimSpace(req.Patch)) != "null" {
		data["patch"] = json.RawMessage(bytes.TrimSpace(req.Patch))
	}
	fcp := &Checkpoint{TaskID: id, Step: cp.Step, LastNode: cp.LastNode, NextNode: next, State: state,
		Iterations: maps.Clone(cp.Iterations), Answers: slices.Clone(cp.Answers), UpdatedAt: now}
	if fcp.Iterations == nil {
		fcp.Iterations = map[string]int{}
	}
	// The node runs the fork starts with, for its page's graph.
	data["iterations"] = maps.Clone(fcp.Iterations)
	c := &Commit{TaskID: id, Create: t, Status: StatusQueued, CurrentNode: t.CurrentNode, Reason: "fork",
		Checkpoint: fcp, Events: []Event{newEvent(id, EventTaskForked, "", 0, now, nil, data)}}
	if itr != nil {
		// The decision taken on the source's interrupt stays the source's:
		// the fork asks again, at the same node run.
		fresh := &Interrupt{ID: NewID(), TaskID: id, Node: itr.Node, Kind: itr.Kind, Iteration: itr.Iteration,
			Payload: itr.Payload, Status: InterruptPending, CreatedAt: now}
		fcp.PendingInterrupt = fresh.ID
		c.Raise = fresh
		c.Status, c.CurrentNode = StatusWaiting, itr.Node
		t.CurrentNode = itr.Node
		c.Events = append(c.Events,
			newEvent(id, EventInterruptRaised, itr.Node, itr.Iteration, now, nil,
				map[string]any{"interrupt_id": fresh.ID, "kind": fresh.Kind, "title": fresh.Payload.Title}),
			newEvent(id, EventTaskWaiting, itr.Node, itr.Iteration, now, nil, map[string]any{"interrupt_id": fresh.ID}))
	}
	if err := e.commit(ctx, c); err != nil {
		return nil, err
	}
	t.Status = c.Status
	return t, nil
}

func forkTitle(src string, step int) string {
	suffix := fmt.Sprintf(" (fork of step %d)", step)
	r := []rune(src)
	if max := 200 - utf8.RuneCountInString(suffix); len(r) > max {
		src = string(r[:max-1]) + "…"
	}
	return src + suffix
}

// patchState applies a JSON merge patch to a state and checks the result
// against the state type: every field must be one of S's (by its JSON
// name) with a value of its type, and the workflow's ValidateState must
// accept it. The state comes back as S marshals it.
func (g *Graph[S]) patchState(state, patch json.RawMessage) (json.RawMessage, error) {
	var p any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, &ValidationError{Field: "state", Message: "is not valid JSON: " + err.Error()}
	}
	if _, ok := p.(map[string]any); !ok {
		return nil, &ValidationError{Field: "state", Message: "must be a JSON object (a JSON merge patch of the state)"}
	}
	var cur any
	if err := json.Unmarshal(state, &cur); err != nil {
		return nil, &StateError{Err: err}
	}
	merged, err := json.Marshal(MergePatch(cur, p))
	if err != nil {
		return nil, err
	}
	s, err := g.decodeState(merged)
	if err != nil {
		return nil, err
	}
	if g.validateState != nil {
		if err := g.validateState(s); err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) {
				return nil, err
			}
			return nil, &ValidationError{Field: "state", Message: err.Error()}
		}
	}
	return json.Marshal(s)
}

// decodeState reads a person's state strictly, naming the field at fault.
func (g *Graph[S]) decodeState(raw json.RawMessage) (S, error) {
	var s S
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(&s)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return s, nil
	case errors.As(err, &te):
		field := "state"
		if te.Field != "" {
			field += "." + te.Field
		}
		return s, &ValidationError{Field: field, Message: fmt.Sprintf("must be %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return s, &ValidationError{Field: "state." + name, Message: fmt.Sprintf("is not a field of the %s workflow's state", g.name)}
	default:
		return s, &ValidationError{Field: "state", Message: err.Error()}
	}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	default:
		return "of type " + goKind
	}
}

// MergePatch applies a JSON merge patch (RFC 7386) to target, both as
// encoding/json decodes them (map[string]any for objects): members of an
// object patch replace the target's, null removes them, and any other
// patch replaces the target whole.
func MergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	} else {
		t = maps.Clone(t)
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = MergePatch(t[k], v)
	}
	return t
}
