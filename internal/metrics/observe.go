package metrics

import (
	"context"
	"encoding/json"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
)

var _ graph.EventSink = (*Metrics)(nil)

// Publish implements graph.EventSink: it keeps what the metrics need of
// the events and queues it for Run. It never blocks: when the queue is
// full the events are dropped and counted.
func (m *Metrics) Publish(evs []graph.Event) {
	var b batch
	for i := range evs {
		ev := &evs[i]
		switch ev.Type {
		case graph.EventNodeCompleted, graph.EventTaskCompleted, graph.EventTaskFailed, graph.EventTaskCancelled,
			graph.EventDecisionRecorded:
		default:
			continue
		}
		e := event{typ: ev.Type, task: ev.TaskID, node: ev.Node, at: ev.At}
		if ev.DurationMS != nil {
			e.dur, e.hasDur = time.Duration(*ev.DurationMS)*time.Millisecond, true
		}
		if ev.Type == graph.EventDecisionRecorded {
			var d struct {
				InterruptID string `json:"interrupt_id"`
				Kind        string `json:"kind"`
				Action      string `json:"action"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			e.interruptID, e.kind, e.action = d.InterruptID, d.Kind, d.Action
		}
		b.evs = append(b.evs, e)
	}
	if len(b.evs) == 0 {
		return
	}
	select {
	case m.queue <- b:
	default:
		m.dropped.Add(float64(len(b.evs)))
	}
}

// Run turns queued events into observations until ctx ends.
func (m *Metrics) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-m.queue:
			if b.flush != nil {
				close(b.flush)
				continue
			}
			for _, e := range b.evs {
				m.observe(ctx, e)
			}
		}
	}
}

// Flush waits until the events published before it are observed (tests),
// or ctx ends. Run must be running.
func (m *Metrics) Flush(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case m.queue <- batch{flush: done}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Metrics) observe(ctx context.Context, e event) {
	switch e.typ {
	case graph.EventNodeCompleted:
		if !e.hasDur {
			return
		}
		wf := m.workflowOf(ctx, e.task)
		if wf == "" {
			return
		}
		m.nodeRun.WithLabelValues(wf, e.node).Observe(e.dur.Seconds())
	case graph.EventTaskCompleted, graph.EventTaskFailed, graph.EventTaskCancelled:
		m.ended(ctx, e)
	case graph.EventDecisionRecorded:
		if m.rd == nil || e.interruptID == "" {
			return
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		itr, err := m.rd.Interrupt(lctx, e.interruptID)
		if err != nil {
			m.lookupFailed("interrupt", e.interruptID, err)
			return
		}
		kind := e.kind
		if kind == "" {
			kind = itr.Kind
		}
		if d := e.at.Sub(itr.CreatedAt); d >= 0 {
			m.decision.WithLabelValues(kind).Observe(d.Seconds())
			if e.action != "" {
				m.decisionAction.WithLabelValues(kind, e.action).Observe(d.Seconds())
			}
		}
	}
}

// ended observes a task run that ended: its reason, duration and turns.
func (m *Metrics) ended(ctx context.Context, e event) {
	m.forget(e.task)
	if m.rd == nil {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t, err := m.rd.Task(lctx, e.task)
	if err != nil {
		m.lookupFailed("task", e.task, err)
		return
	}
	reason := string(graph.StatusSucceeded)
	switch e.typ {
	case graph.EventTaskFailed:
		reason = string(graph.StatusFailed)
	case graph.EventTaskCancelled:
		reason = string(graph.StatusCancelled)
	}
	res := readResult(t.Result)
	if e.typ == graph.EventTaskCompleted && res.CompletionReason != "" {
		reason = res.CompletionReason
	}
	m.runs.WithLabelValues(t.Workflow, reason).Inc()
	end := e.at
	if t.CompletedAt != nil && e.typ == graph.EventTaskCompleted {
		end = *t.CompletedAt
	}
	if d := end.Sub(t.CreatedAt); d >= 0 && !t.CreatedAt.IsZero() {
		m.workflowDuration.WithLabelValues(t.Workflow).Observe(d.Seconds())
	}
	if n, ok := res.turns(); ok && e.typ == graph.EventTaskCompleted {
		m.turns.WithLabelValues(t.Workflow).Observe(float64(n))
	}
}

// result is what the metrics read of a task's result.
type result struct {
	CompletionReason string          `json:"completion_reason"`
	TurnCount        *int            `json:"turn_count"`
	Turns            json.RawMessage `json:"turns"`
}

func readResult(raw json.RawMessage) result {
	var r result
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &r)
	}
	return r
}

// turns is turn_count, else turns as a number, else the length of turns
// as a list.
func (r result) turns() (int, bool) {
	if r.TurnCount != nil {
		return *r.TurnCount, true
	}
	if len(r.Turns) == 0 {
		return 0, false
	}
	var n int
	if json.Unmarshal(r.Turns, &n) == nil {
		return n, true
	}
	var list []json.RawMessage
	if json.Unmarshal(r.Turns, &list) == nil {
		return len(list), true
	}
	return 0, false
}

func (m *Metrics) lookupFailed(what, id string, err error) {
	m.lookupErrors.Inc()
	m.log.Debug("metrics lookup failed", "what", what, "id", id, "error", err)
}

// remember notes a task's workflow (the checkpointer sees it on Load and
// on create), sparing a lookup per node run.
func (m *Metrics) remember(taskID, workflow string) {
	if taskID == "" || workflow == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.workflows) >= maxRemembered {
		clear(m.workflows) // a cache: forgetting costs one lookup each
	}
	m.workflows[taskID] = workflow
}

func (m *Metrics) forget(taskID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.workflows, taskID)
}

func (m *Metrics) workflowOf(ctx context.Context, taskID string) string {
	m.mu.Lock()
	wf := m.workflows[taskID]
	m.mu.Unlock()
	if wf != "" || m.rd == nil {
		return wf
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t, err := m.rd.Task(lctx, taskID)
	if err != nil {
		m.lookupFailed("task", taskID, err)
		return ""
	}
	m.remember(taskID, t.Workflow)
	return t.Workflow
}
