package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// MemoryCheckpointer keeps everything in process memory. It has the same
// semantics as the PostgreSQL one (fences, one decision per interrupt) and
// serves unit tests and the in-memory benchmark.
type MemoryCheckpointer struct {
	mu         sync.Mutex
	tasks      map[string]*Task
	cps        map[string]Checkpoint
	history    map[string][]Checkpoint
	events     map[string][]Event
	artifacts  map[string][]Artifact
	interrupts map[string]*Interrupt
	decisions  map[string]*Decision // by interrupt id
	// KeepHistory retains checkpoint history, events and artifacts (on by
	// default; the benchmark turns it off to measure the engine alone).
	KeepHistory bool
}

var _ Checkpointer = (*MemoryCheckpointer)(nil)

// NewMemoryCheckpointer returns an empty store.
func NewMemoryCheckpointer() *MemoryCheckpointer {
	return &MemoryCheckpointer{tasks: map[string]*Task{}, cps: map[string]Checkpoint{},
		history: map[string][]Checkpoint{}, events: map[string][]Event{}, artifacts: map[string][]Artifact{},
		interrupts: map[string]*Interrupt{}, decisions: map[string]*Decision{}, KeepHistory: true}
}

// Load implements Checkpointer.
func (m *MemoryCheckpointer) Load(_ context.Context, taskID string) (*Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tasks[taskID]
	if !ok {
		return nil, ErrTaskNotFound
	}
	cp := m.cps[taskID]
	cp.Iterations = maps.Clone(cp.Iterations)
	cp.Answers = slices.Clone(cp.Answers)
	snap := &Snapshot{Task: *t, Checkpoint: cp}
	if !json.Valid(cp.State) {
		return nil, &StateError{TaskID: taskID, Err: errInvalidJSON}
	}
	if cp.PendingInterrupt != "" {
		if itr, ok := m.interrupts[cp.PendingInterrupt]; ok {
			c := *itr
			snap.Interrupt = &c
		}
		if d, ok := m.decisions[cp.PendingInterrupt]; ok {
			c := *d
			snap.Decision = &c
		}
	}
	return snap, nil
}

// Commit implements Checkpointer.
func (m *MemoryCheckpointer) Commit(_ context.Context, c *Commit) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := c.Before; b != nil {
		// Same task and fence: when the first fails, nothing is written.
		if err := m.commit(b); err != nil {
			return err
		}
	}
	return m.commit(c)
}

func (m *MemoryCheckpointer) commit(c *Commit) error {
	if c.With != nil {
		return fmt.Errorf("commit task %s: the memory checkpointer cannot write a %T with it", c.TaskID, c.With)
	}
	now := time.Now()
	if c.Create != nil {
		t := *c.Create
		m.tasks[t.ID] = &t
	}
	t, ok := m.tasks[c.TaskID]
	if !ok {
		return ErrTaskNotFound
	}
	if t.Fence != c.Fence {
		return ErrLeaseLost
	}
	t.Status, t.CurrentNode, t.UpdatedAt = c.Status, c.CurrentNode, now
	if c.Result != nil {
		t.Result = c.Result
	}
	if c.Error != "" || c.Status != StatusFailed {
		t.Error = c.Error
	}
	if c.Status.Terminal() {
		t.CompletedAt = &now
	}
	if c.Checkpoint != nil {
		cp := *c.Checkpoint
		m.cps[c.TaskID] = cp
		if m.KeepHistory {
			m.history[c.TaskID] = append(m.history[c.TaskID], cp)
		}
	}
	seq := int64(len(m.events[c.TaskID]))
	if !m.KeepHistory {
		seq = int64(t.Fence) // events are not kept; seqs need only be assigned
	}
	for i := range c.Events {
		seq++
		c.Events[i].Seq = seq
		c.Events[i].TaskID = c.TaskID
	}
	if m.KeepHistory {
		m.events[c.TaskID] = append(m.events[c.TaskID], c.Events...)
		for i := range c.Artifacts {
			a := &c.Artifacts[i]
			a.Version = 1
			for _, old := range m.artifacts[c.TaskID] {
				if old.Name == a.Name && old.Version >= a.Version {
					a.Version = old.Version + 1
				}
			}
			m.artifacts[c.TaskID] = append(m.artifacts[c.TaskID], *a)
		}
	}
	if c.Raise != nil {
		itr := *c.Raise
		m.interrupts[itr.ID] = &itr
		if r := itr.Ruled; r != nil {
			m.decisions[itr.ID] = &Decision{ID: NewID(), InterruptID: itr.ID, TaskID: itr.TaskID, Action: r.Action,
				Feedback: r.Feedback, DecidedBy: r.By, DecidedAt: itr.CreatedAt}
		}
	}
	return nil
}

// Interrupt implements Checkpointer.
func (m *MemoryCheckpointer) Interrupt(_ context.Context, id string) (*Interrupt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	itr, ok := m.interrupts[id]
	if !ok {
		return nil, ErrInterruptNotFound
	}
	c := *itr
	return &c, nil
}

// Decide implements Checkpointer.
func (m *MemoryCheckpointer) Decide(_ context.Context, d *Decision, ev *Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	itr, ok := m.interrupts[d.InterruptID]
	if !ok || itr.TaskID != d.TaskID {
		return ErrInterruptNotFound
	}
	if itr.Status != InterruptPending {
		return &ConflictError{InterruptID: itr.ID, Status: itr.Status}
	}
	now := time.Now()
	itr.Status, itr.ResolvedAt = InterruptResolved, &now
	d.ID, d.DecidedAt = NewID(), now
	c := *d
	m.decisions[d.InterruptID] = &c
	t := m.tasks[d.TaskID]
	waiting := t.Status == StatusWaiting
	t.Status, t.UpdatedAt = StatusQueued, now
	if l := d.Lease; l != nil && l.Owner != "" && waiting {
		t.Status = StatusRunning
		t.Fence++
		l.Fence = t.Fence
	}
	ev.Seq = int64(len(m.events[d.TaskID])) + 1
	ev.TaskID = d.TaskID
	m.events[d.TaskID] = append(m.events[d.TaskID], *ev)
	return nil
}

// Events returns the task's committed events in seq order.
func (m *MemoryCheckpointer) Events(taskID string) []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.events[taskID])
}

// History returns the task's checkpoints in step order.
func (m *MemoryCheckpointer) History(taskID string) []Checkpoint {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.history[taskID])
}

// Artifacts returns the task's artifacts in commit order.
func (m *MemoryCheckpointer) Artifacts(taskID string) []Artifact {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.artifacts[taskID])
}

// Task returns a copy of the task row.
func (m *MemoryCheckpointer) Task(taskID string) (Task, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tasks[taskID]
	if !ok {
		return Task{}, false
	}
	return *t, true
}

// SetFence simulates a lease takeover (tests).
func (m *MemoryCheckpointer) SetFence(taskID string, fence int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.tasks[taskID]; ok {
		t.Fence = fence
	}
}

// ForkPoint implements Checkpointer.
func (m *MemoryCheckpointer) ForkPoint(_ context.Context, taskID string, step int) (*Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tasks[taskID]
	if !ok {
		return nil, ErrTaskNotFound
	}
	for _, cp := range m.history[taskID] {
		if cp.Step != step {
			continue
		}
		cp.Iterations = maps.Clone(cp.Iterations)
		cp.Answers = slices.Clone(cp.Answers)
		snap := &Snapshot{Task: *t, Checkpoint: cp}
		if itr, ok := m.interrupts[cp.PendingInterrupt]; ok && cp.PendingInterrupt != "" {
			c := *itr
			snap.Interrupt = &c
		}
		return snap, nil
	}
	return nil, ErrCheckpointNotFound
}
