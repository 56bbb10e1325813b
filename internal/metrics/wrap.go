package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm"
)

// Provider returns p measured: llm_call_duration_seconds and
// llm_call_errors_total by p's name and the request's role. A call ended
// by its context's cancellation (a cancelled task, a shutdown) is timed
// but not counted as an error.
func (m *Metrics) Provider(p llm.Provider) llm.Provider { return &provider{p: p, m: m} }

type provider struct {
	p llm.Provider
	m *Metrics
}

var _ llm.Provider = (*provider)(nil)

func (w *provider) Name() string { return w.p.Name() }

// Unwrap returns the measured provider.
func (w *provider) Unwrap() llm.Provider { return w.p }

func (w *provider) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	start := time.Now()
	resp, err := w.p.Complete(ctx, req)
	d := resp.Duration
	if d <= 0 {
		d = time.Since(start)
	}
	name := w.p.Name()
	w.m.llmDuration.WithLabelValues(name, req.Role).Observe(d.Seconds())
	if err != nil && !errors.Is(err, context.Canceled) {
		w.m.llmErrors.WithLabelValues(name, req.Role).Inc()
	}
	return resp, err
}

// Checkpointer returns cp measured: checkpoint_write_seconds times each
// Commit. It also tells the metrics each task's workflow as the engine
// loads or creates it.
// A FieldCheckpointer stays one, so that the engine keeps the large fields
// of states apart through it.
func (m *Metrics) Checkpointer(cp graph.Checkpointer) graph.Checkpointer {
	c := &checkpointer{Checkpointer: cp, m: m}
	if fc, ok := cp.(graph.FieldCheckpointer); ok {
		return &fieldCheckpointer{checkpointer: c, fc: fc}
	}
	return c
}

type fieldCheckpointer struct {
	*checkpointer
	fc graph.FieldCheckpointer
}

func (c *fieldCheckpointer) LoadRun(ctx context.Context, taskID string) (*graph.Snapshot, error) {
	snap, err := c.fc.LoadRun(ctx, taskID)
	if err == nil {
		c.m.remember(snap.Task.ID, snap.Task.Workflow)
	}
	return snap, err
}

type checkpointer struct {
	graph.Checkpointer
	m *Metrics
}

func (c *checkpointer) Load(ctx context.Context, taskID string) (*graph.Snapshot, error) {
	snap, err := c.Checkpointer.Load(ctx, taskID)
	if err == nil {
		c.m.remember(snap.Task.ID, snap.Task.Workflow)
	}
	return snap, err
}

func (c *checkpointer) Commit(ctx context.Context, cm *graph.Commit) error {
	start := time.Now()
	err := c.Checkpointer.Commit(ctx, cm)
	c.m.cpWrite.Observe(time.Since(start).Seconds())
	if err == nil && cm.Create != nil {
		c.m.remember(cm.TaskID, cm.Create.Workflow)
	}
	return err
}

// TouchTask forwards graph.Toucher to the measured checkpointer (a no-op
// for one that has none).
func (c *checkpointer) TouchTask(ctx context.Context, taskID string, fence int64, node string) error {
	if t, ok := c.Checkpointer.(graph.Toucher); ok {
		return t.TouchTask(ctx, taskID, fence, node)
	}
	return nil
}
