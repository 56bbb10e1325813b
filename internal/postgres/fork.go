package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

// ForkPoint implements graph.Checkpointer: the task, its checkpoint at
// step of the history and the interrupt pending at it, in one statement.
func (s *Store) ForkPoint(ctx context.Context, taskID string, step int) (*graph.Snapshot, error) {
	id, ok := parseID(taskID)
	if !ok {
		return nil, graph.ErrTaskNotFound
	}
	if step < 0 || step > 1<<31-1 {
		return nil, graph.ErrCheckpointNotFound
	}
	r, err := s.q.TaskForkPoint(ctx, dbsqlc.TaskForkPointParams{ID: id, Step: int32(step)})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, graph.ErrTaskNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("fork point %d of %s: %w", step, taskID, err)
	}
	if r.HStep == nil {
		return nil, graph.ErrCheckpointNotFound
	}
	state, err := joinState(r.HState, r.HStateRefs, r.BlobKeys, r.BlobValues)
	if err != nil {
		return nil, &graph.StateError{TaskID: taskID, Err: fmt.Errorf("checkpoint %d: %w", step, err)}
	}
	snap := &graph.Snapshot{Task: taskFromRow(r.Task), Checkpoint: graph.Checkpoint{TaskID: taskID, Step: int(*r.HStep),
		LastNode: deref(r.HLastNodeID), NextNode: deref(r.HNextNodeID), State: state, UpdatedAt: deref(r.HCreatedAt)}}
	if err := json.Unmarshal(r.HIterations, &snap.Checkpoint.Iterations); err != nil {
		return nil, &graph.StateError{TaskID: taskID, Err: fmt.Errorf("checkpoint %d iterations: %w", step, err)}
	}
	if err := json.Unmarshal(r.HAnswers, &snap.Checkpoint.Answers); err != nil {
		return nil, &graph.StateError{TaskID: taskID, Err: fmt.Errorf("checkpoint %d answers: %w", step, err)}
	}
	if r.HPendingInterruptID != nil {
		snap.Checkpoint.PendingInterrupt = r.HPendingInterruptID.String()
	}
	if r.IID != nil && r.ITaskID != nil {
		itr, err := interruptFromRow(dbsqlc.Interrupt{ID: *r.IID, TaskID: *r.ITaskID, Node: deref(r.INode), Kind: deref(r.IKind),
			Iteration: deref(r.IIteration), Payload: r.IPayload, Status: deref(r.IStatus), CreatedAt: deref(r.ICreatedAt),
			ResolvedAt: r.IResolvedAt})
		if err != nil {
			return nil, &graph.StateError{TaskID: taskID, Err: err}
		}
		snap.Interrupt = itr
	}
	return snap, nil
}

// maxForks bounds the forks a task page lists.
const maxForks = 200

// Forks lists the tasks forked from taskID, oldest first (at most 200).
func (s *Store) Forks(ctx context.Context, taskID string) ([]graph.Task, error) {
	id, ok := parseID(taskID)
	if !ok {
		return nil, graph.ErrTaskNotFound
	}
	rows, err := s.q.TaskForks(ctx, dbsqlc.TaskForksParams{ID: id, MaxRows: maxForks})
	if err != nil {
		return nil, fmt.Errorf("forks of %s: %w", taskID, err)
	}
	out := make([]graph.Task, 0, len(rows))
	for _, r := range rows {
		out = append(out, taskFromRow(r))
	}
	return out, nil
}

// StandingTask is a waiting or failed task with where it stands: what
// tells whether it can resume under the running definitions.
type StandingTask struct {
	ID                string
	Workflow          string
	Title             string
	Status            graph.TaskStatus
	DefinitionVersion string
	CreatedAt         time.Time
	Position          graph.Position
}

// StandingTasks lists every waiting and failed task, oldest first, with
// its position (one statement over the status index).
func (s *Store) StandingTasks(ctx context.Context) ([]StandingTask, error) {
	rows, err := s.q.TaskResumeCheck(ctx)
	if err != nil {
		return nil, fmt.Errorf("list waiting and failed tasks: %w", err)
	}
	out := make([]StandingTask, 0, len(rows))
	for _, r := range rows {
		out = append(out, StandingTask{ID: r.ID.String(), Workflow: r.Workflow, Title: r.Title, Status: graph.TaskStatus(r.Status),
			DefinitionVersion: r.DefinitionVersion, CreatedAt: r.CreatedAt,
			Position: graph.Position{NextNode: r.NextNodeID, InterruptNode: deref(r.INode), InterruptType: r.IType}})
	}
	return out, nil
}

// taskInsertParams is the row of a task's first commit; a fork's names
// the checkpoint it started from.
func taskInsertParams(id uuid.UUID, t *graph.Task) dbsqlc.TaskInsertParams {
	p := dbsqlc.TaskInsertParams{ID: id, Workflow: t.Workflow, Title: t.Title, Input: t.Input, Options: t.Options,
		Status: string(t.Status), CurrentNode: t.CurrentNode, CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt,
		DefinitionVersion: t.DefinitionVersion}
	if f := t.ForkedFrom; f != nil {
		if src, ok := parseID(f.TaskID); ok {
			step := int32(f.Step)
			p.ForkedFromTask, p.ForkedFromStep = &src, &step
		}
	}
	return p
}
