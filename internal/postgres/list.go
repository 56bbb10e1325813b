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

// ErrCheckpointNotFound is a step a task's checkpoint history does not hold.
var ErrCheckpointNotFound = graph.ErrCheckpointNotFound

// TaskCursor is a position in the newest-first task list: the last task of
// the previous page.
type TaskCursor struct {
	CreatedAt time.Time
	ID        string
}

// TaskFilter selects and pages tasks for ListTasks.
type TaskFilter struct {
	Status   graph.TaskStatus // empty: any
	Workflow string           // empty: any
	Limit    int              // rows per page (at least 1)
	After    *TaskCursor      // nil: the first page
}

// ListTasks returns one page of tasks, newest first, and the cursor of the
// next page (nil on the last page). Errors: *graph.ValidationError for a
// cursor naming a malformed id.
func (s *Store) ListTasks(ctx context.Context, f TaskFilter) ([]graph.Task, *TaskCursor, error) {
	limit := max(f.Limit, 1)
	var beforeAt *time.Time
	var beforeID *uuid.UUID
	if f.After != nil {
		id, ok := parseID(f.After.ID)
		if !ok {
			return nil, nil, &graph.ValidationError{Field: "cursor", Message: "names a malformed task id"}
		}
		at := f.After.CreatedAt
		beforeAt, beforeID = &at, &id
	}
	// One row more than asked tells whether a next page exists.
	maxRows := int32(limit + 1)
	var rows []dbsqlc.Task
	var err error
	switch {
	case f.Status != "" && f.Workflow == "":
		rows, err = s.q.TaskListByStatusOnly(ctx, dbsqlc.TaskListByStatusOnlyParams{Status: string(f.Status),
			BeforeAt: beforeAt, BeforeID: beforeID, MaxRows: maxRows})
	case f.Status != "":
		rows, err = s.q.TaskListByStatus(ctx, dbsqlc.TaskListByStatusParams{Status: string(f.Status), Workflow: &f.Workflow,
			BeforeAt: beforeAt, BeforeID: beforeID, MaxRows: maxRows})
	case f.Workflow != "":
		rows, err = s.q.TaskListByWorkflow(ctx, dbsqlc.TaskListByWorkflowParams{Workflow: f.Workflow,
			BeforeAt: beforeAt, BeforeID: beforeID, MaxRows: maxRows})
	default:
		rows, err = s.q.TaskList(ctx, dbsqlc.TaskListParams{BeforeAt: beforeAt, BeforeID: beforeID, MaxRows: maxRows})
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list tasks: %w", err)
	}
	var next *TaskCursor
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		next = &TaskCursor{CreatedAt: last.CreatedAt, ID: last.ID.String()}
	}
	out := make([]graph.Task, 0, len(rows))
	for _, r := range rows {
		out = append(out, taskFromRow(r))
	}
	return out, next, nil
}

func taskFromRow(r dbsqlc.Task) graph.Task {
	return graph.Task{ID: r.ID.String(), Workflow: r.Workflow, Title: r.Title, Input: r.Input, Options: r.Options,
		Status: graph.TaskStatus(r.Status), CurrentNode: r.CurrentNode, Result: r.Result, Error: r.Error,
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, CompletedAt: r.CompletedAt,
		Fence: r.LeaseFence, DefinitionVersion: r.DefinitionVersion, ForkedFrom: forkRef(r.ForkedFromTask, r.ForkedFromStep)}
}

func forkRef(task *uuid.UUID, step *int32) *graph.ForkRef {
	if task == nil || step == nil {
		return nil
	}
	return &graph.ForkRef{TaskID: task.String(), Step: int(*step)}
}

// PendingInterrupt returns the interrupt the task waits on, or nil when it
// waits on none (a task has at most one pending interrupt). A task that
// does not exist has none: check the task itself for ErrTaskNotFound.
func (s *Store) PendingInterrupt(ctx context.Context, taskID string) (*graph.Interrupt, error) {
	id, ok := parseID(taskID)
	if !ok {
		return nil, nil
	}
	m, err := s.PendingInterrupts(ctx, taskID)
	if err != nil {
		return nil, err
	}
	if itr, ok := m[id.String()]; ok {
		return &itr, nil
	}
	return nil, nil
}

// PendingInterrupts returns the pending interrupt of each of the tasks that
// has one, by task id (canonical lower-case text), in one query. Malformed
// ids have none.
func (s *Store) PendingInterrupts(ctx context.Context, taskIDs ...string) (map[string]graph.Interrupt, error) {
	ids := parseIDs(taskIDs)
	out := make(map[string]graph.Interrupt, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.q.InterruptPendingByTasks(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("pending interrupts: %w", err)
	}
	for _, r := range rows {
		itr, err := interruptFromRow(r)
		if err != nil {
			return nil, err
		}
		out[itr.TaskID] = *itr
	}
	return out, nil
}

// TaskRef names a task beside something of it.
type TaskRef struct {
	ID       string
	Title    string
	Workflow string
	// CreatedBy is who started the task, and Via the channel an approval
	// request came through ("api", "mcp"; "" for other tasks); both
	// filled by InboxPage.
	CreatedBy string
	Via       string
}

// InboxEntry is an interrupt with the task it belongs to.
type InboxEntry struct {
	graph.Interrupt
	Task TaskRef
}

// InterruptFilter selects interrupts for ListInterrupts.
type InterruptFilter struct {
	Status string // pending, resolved or cancelled
	Kind   string // empty: any
	Limit  int    // at least 1
}

// ListInterrupts returns interrupts of one status (and kind), oldest first,
// with their tasks.
func (s *Store) ListInterrupts(ctx context.Context, f InterruptFilter) ([]InboxEntry, error) {
	var kind *string
	if f.Kind != "" {
		kind = &f.Kind
	}
	rows, err := s.q.InterruptList(ctx, dbsqlc.InterruptListParams{Status: f.Status, Kind: kind, MaxRows: int32(max(f.Limit, 1))})
	if err != nil {
		return nil, fmt.Errorf("list interrupts: %w", err)
	}
	out := make([]InboxEntry, 0, len(rows))
	for _, r := range rows {
		itr, err := interruptFromRow(r.Interrupt)
		if err != nil {
			return nil, err
		}
		out = append(out, InboxEntry{Interrupt: *itr,
			Task: TaskRef{ID: itr.TaskID, Title: r.TaskTitle, Workflow: r.TaskWorkflow}})
	}
	return out, nil
}

// CurrentCheckpoint returns the task's current checkpoint: state, position
// and step (Iterations, Answers and PendingInterrupt are left empty).
// Errors: graph.ErrTaskNotFound.
func (s *Store) CurrentCheckpoint(ctx context.Context, taskID string) (*graph.Checkpoint, error) {
	id, ok := parseID(taskID)
	if !ok {
		return nil, graph.ErrTaskNotFound
	}
	r, err := s.q.CheckpointCurrent(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, graph.ErrTaskNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("current checkpoint of %s: %w", taskID, err)
	}
	state, err := joinState(r.State, r.StateRefs, r.BlobKeys, r.BlobValues)
	if err != nil {
		return nil, &graph.StateError{TaskID: taskID, Err: err}
	}
	return &graph.Checkpoint{TaskID: r.TaskID.String(), Step: int(r.Step), LastNode: r.LastNodeID, NextNode: r.NextNodeID,
		State: state, UpdatedAt: r.UpdatedAt}, nil
}

// HistoryCheckpoint is one checkpoint of a task's history with its state.
type HistoryCheckpoint struct {
	HistoryEntry
	State json.RawMessage
}

// CheckpointAt returns the checkpoint of the task's history at step.
// Errors: ErrCheckpointNotFound (also for a task that does not exist).
func (s *Store) CheckpointAt(ctx context.Context, taskID string, step int) (*HistoryCheckpoint, error) {
	id, ok := parseID(taskID)
	if !ok || step < 0 || step > 1<<31-1 {
		return nil, ErrCheckpointNotFound
	}
	r, err := s.q.CheckpointHistoryGet(ctx, dbsqlc.CheckpointHistoryGetParams{TaskID: id, Step: int32(step)})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrCheckpointNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %d of %s: %w", step, taskID, err)
	}
	state, err := joinState(r.State, r.StateRefs, r.BlobKeys, r.BlobValues)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %d of %s: %w", step, taskID, err)
	}
	return &HistoryCheckpoint{HistoryEntry: HistoryEntry{Step: int(r.Step), Reason: r.Reason, LastNode: r.LastNodeID,
		NextNode: r.NextNodeID, CreatedAt: r.CreatedAt}, State: state}, nil
}
