package graph

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// StateVersion declares the version of the state's shape. Its author bumps
// it when a change of the state type would make old checkpoints mean
// something else (a field renamed, its meaning changed), so that tasks
// stored under the old shape are flagged as created under another
// definition even when the nodes, edges and gates stayed the same.
func (b *Builder[S]) StateVersion(v int) *Builder[S] {
	b.g.stateVersion = v
	return b
}

// ValidateState sets a check of the state beyond its JSON types, run on a
// state a person supplied (a fork's patched state). It should return a
// *ValidationError naming the field as "state.<json name>".
func (b *Builder[S]) ValidateState(fn func(S) error) *Builder[S] {
	b.g.validateState = fn
	return b
}

// Version is the definition version: a hash of the graph's nodes, edges
// (plain, routed and rejection edges), gates (node, kind, option) and its
// state version. Descriptions, titles and edge labels are left out, and so
// is the order of declaration: they change nothing a stored task depends
// on. It reads "s<state version>-<12 hex digits>".
func (g *Graph[S]) Version() string { return g.version }

// StateVersionOf is the declared state version.
func (g *Graph[S]) StateVersionOf() int { return g.stateVersion }

func definitionVersion(d Description, stateVersion int) string {
	var lines []string
	for _, n := range d.Nodes {
		lines = append(lines, "node "+n.Name)
	}
	for _, e := range d.Edges {
		kind := "edge"
		switch {
		case e.Condition == "rejected":
			kind = "reject"
		case e.Condition != "":
			kind = "route"
		}
		lines = append(lines, fmt.Sprintf("%s %s %s", kind, e.From, e.To))
	}
	for _, gt := range d.Gates {
		lines = append(lines, fmt.Sprintf("gate %s %s %s", gt.Node, gt.Kind, gt.Option))
	}
	slices.Sort(lines)
	h := sha256.New()
	fmt.Fprintf(h, "gatehouse definition 1\nworkflow %s\nstate %d\nentry %s\n", d.Name, stateVersion, d.Entry)
	h.Write([]byte(strings.Join(lines, "\n")))
	return fmt.Sprintf("s%d-%s", stateVersion, hex.EncodeToString(h.Sum(nil))[:12])
}

// Position is where a stored task stands, as far as resuming it goes: the
// node its checkpoint runs next, and the interrupt it waits on, if any.
type Position struct {
	NextNode string // the checkpoint's next node
	// InterruptNode and InterruptType ("gate" or "question") describe the
	// pending interrupt; empty when the task waits on none.
	InterruptNode string
	InterruptType string // the pending interrupt's type (InterruptGate or InterruptQuestion), "" for none
}

// Resumable reports whether a task standing at p can go on under this
// definition: the node it runs next exists, and so does the node of the
// interrupt it waits on (still gated, for a gate). Errors: *NodeGoneError.
func (g *Graph[S]) Resumable(p Position) error {
	if p.InterruptNode != "" {
		n := g.nodes[p.InterruptNode]
		switch {
		case n == nil:
			return &NodeGoneError{Workflow: g.name, Node: p.InterruptNode, Running: g.version}
		case p.InterruptType == InterruptGate && n.gate == nil:
			return &NodeGoneError{Workflow: g.name, Node: p.InterruptNode, Running: g.version, Gate: true}
		}
	}
	if p.NextNode != "" && p.NextNode != END && g.nodes[p.NextNode] == nil {
		return &NodeGoneError{Workflow: g.name, Node: p.NextNode, Running: g.version}
	}
	return nil
}

// NodeGoneError is a task standing at a node the running definition of
// its workflow no longer has (or no longer gates): a decision on it or a
// retry of it cannot be applied.
type NodeGoneError struct {
	TaskID   string // the task
	Workflow string // its workflow
	Node     string // the node it stands at
	// Gate is set when the node exists but is no longer gated.
	Gate bool
	// Version is the task's definition version; Running the binary's.
	Version, Running string
}

// Error says what was refused or went wrong, for people.
func (e *NodeGoneError) Error() string {
	what := fmt.Sprintf("node %q no longer exists in workflow %q", e.Node, e.Workflow)
	if e.Gate {
		what = fmt.Sprintf("node %q of workflow %q is no longer gated", e.Node, e.Workflow)
	}
	if e.Version != "" && e.Version != e.Running {
		what += fmt.Sprintf(" (the task was created under definition %s; this binary runs %s)", e.Version, e.Running)
	} else if e.Running != "" {
		what += fmt.Sprintf(" (this binary runs definition %s)", e.Running)
	}
	return what + ": the task cannot resume there; fork it from an earlier step, or cancel it"
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *NodeGoneError) Is(target error) bool { return target == ErrConflict }

// DefinitionChanged reports whether t was stored under another definition
// of its workflow than w's. A task older than versions (no version) is not
// reported: nothing is known of its definition.
func DefinitionChanged(t *Task, w Workflow) bool {
	return t.DefinitionVersion != "" && w != nil && t.DefinitionVersion != w.Version()
}

// Resumable checks that taskID can resume under the running definition of
// its workflow: retry and tasks check use it. Errors: ErrTaskNotFound,
// *UnknownWorkflowError, *NodeGoneError.
func (e *Engine) Resumable(ctx context.Context, taskID string) error {
	snap, err := e.cp.Load(ctx, taskID)
	if err != nil {
		return err
	}
	w, err := e.Workflow(snap.Task.Workflow)
	if err != nil {
		return err
	}
	p := Position{NextNode: snap.Checkpoint.NextNode}
	if snap.Interrupt != nil && snap.Interrupt.Status == InterruptPending {
		p.InterruptNode, p.InterruptType = snap.Interrupt.Node, snap.Interrupt.Payload.Type
	}
	return gone(w.Resumable(p), &snap.Task)
}

// ResumableTask is Resumable for t as the caller has just read it: only a
// task stored under another definition of its workflow than the running
// one is checked; for the others (and a workflow this binary does not
// know) nothing is read.
func (e *Engine) ResumableTask(ctx context.Context, t *Task) error {
	if t.DefinitionVersion != "" {
		if w, err := e.Workflow(t.Workflow); err != nil || !DefinitionChanged(t, w) {
			return nil
		}
	}
	return e.Resumable(ctx, t.ID)
}

// gone fills in the task of a *NodeGoneError.
func gone(err error, t *Task) error {
	var ng *NodeGoneError
	if errors.As(err, &ng) {
		ng.TaskID, ng.Version = t.ID, t.DefinitionVersion
	}
	return err
}
