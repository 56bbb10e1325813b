package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

// Task returns one task. Errors: graph.ErrTaskNotFound.
func (s *Store) Task(ctx context.Context, taskID string) (*graph.Task, error) {
	id, ok := parseID(taskID)
	if !ok {
		return nil, graph.ErrTaskNotFound
	}
	r, err := s.q.TaskGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, graph.ErrTaskNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", taskID, err)
	}
	t := taskFromRow(r)
	return &t, nil
}

// Events returns the task's events with seq > after, in seq order, at most limit.
func (s *Store) Events(ctx context.Context, taskID string, after int64, limit int) ([]graph.Event, error) {
	id, ok := parseID(taskID)
	if !ok {
		return nil, graph.ErrTaskNotFound
	}
	rows, err := s.q.EventListAfter(ctx, dbsqlc.EventListAfterParams{TaskID: id, After: after, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list events of %s: %w", taskID, err)
	}
	out := make([]graph.Event, 0, len(rows))
	for _, r := range rows {
		out = append(out, graph.Event{Seq: r.Seq, TaskID: taskID, Type: r.Type, Node: r.Node,
			Iteration: int(r.Iteration), Phase: r.Phase, At: r.CreatedAt, DurationMS: r.DurationMs, Data: r.Data})
	}
	return out, nil
}

// HistoryEntry is one checkpoint of a task's history, without its state.
type HistoryEntry struct {
	Step      int
	Reason    string
	LastNode  string
	NextNode  string
	CreatedAt time.Time
}

// History returns the task's checkpoints in step order, without state.
func (s *Store) History(ctx context.Context, taskID string) ([]HistoryEntry, error) {
	id, ok := parseID(taskID)
	if !ok {
		return nil, graph.ErrTaskNotFound
	}
	rows, err := s.q.CheckpointHistoryList(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of %s: %w", taskID, err)
	}
	out := make([]HistoryEntry, 0, len(rows))
	for _, r := range rows {
		out = append(out, HistoryEntry{Step: int(r.Step), Reason: r.Reason, LastNode: r.LastNodeID, NextNode: r.NextNodeID,
			CreatedAt: r.CreatedAt})
	}
	return out, nil
}

// Artifacts returns every version of every artifact of the task.
func (s *Store) Artifacts(ctx context.Context, taskID string) ([]graph.Artifact, error) {
	id, ok := parseID(taskID)
	if !ok {
		return nil, graph.ErrTaskNotFound
	}
	rows, err := s.q.ArtifactListByTask(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("list artifacts of %s: %w", taskID, err)
	}
	out := make([]graph.Artifact, 0, len(rows))
	for _, r := range rows {
		out = append(out, graph.Artifact{Name: r.Name, Version: int(r.Version), Node: r.Node, Iteration: int(r.Iteration),
			ContentType: r.ContentType, Content: r.Content, CreatedAt: r.CreatedAt})
	}
	return out, nil
}

// Interrupts returns every interrupt of the task, oldest first.
func (s *Store) Interrupts(ctx context.Context, taskID string) ([]graph.Interrupt, error) {
	id, ok := parseID(taskID)
	if !ok {
		return nil, graph.ErrTaskNotFound
	}
	rows, err := s.q.InterruptListByTask(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("list interrupts of %s: %w", taskID, err)
	}
	out := make([]graph.Interrupt, 0, len(rows))
	for _, r := range rows {
		itr, err := interruptFromRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, *itr)
	}
	return out, nil
}

// Decisions returns every decision on the task, oldest first.
func (s *Store) Decisions(ctx context.Context, taskID string) ([]graph.Decision, error) {
	id, ok := parseID(taskID)
	if !ok {
		return nil, graph.ErrTaskNotFound
	}
	rows, err := s.q.DecisionListByTask(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("list decisions of %s: %w", taskID, err)
	}
	out := make([]graph.Decision, 0, len(rows))
	for _, r := range rows {
		out = append(out, *decisionFromRow(r))
	}
	return out, nil
}
