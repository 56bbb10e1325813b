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

// DecisionSubject returns the task and the interrupt with id interruptID,
// read together in one statement: what a decision request is about, for
// the caller to check who may decide without reading either again. The
// interrupt is nil when none has that id (or the id is malformed); it may
// belong to another task. Errors: graph.ErrTaskNotFound.
func (s *Store) DecisionSubject(ctx context.Context, taskID, interruptID string) (*graph.Task, *graph.Interrupt, error) {
	id, ok := parseID(taskID)
	if !ok {
		return nil, nil, graph.ErrTaskNotFound
	}
	p := dbsqlc.DecisionSubjectParams{TaskID: id}
	if iid, ok := parseID(interruptID); ok {
		p.InterruptID = &iid
	}
	r, err := s.q.DecisionSubject(ctx, p)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, graph.ErrTaskNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get task %s: %w", taskID, err)
	}
	return joinedTask(r.Task, joinedInterrupt{r.IID, r.ITaskID, r.INode, r.IKind, r.IIteration, r.IPayload, r.IStatus,
		r.ICreatedAt, r.IResolvedAt, r.IDeadlineAt, r.IOverdue, r.IEscalationLevel, r.IClaimedBy, r.IClaimExpiresAt,
		r.IPayloadSha256})
}

// TaskWithPending returns the task and the interrupt it waits on (nil:
// none), read together in one statement. Errors: graph.ErrTaskNotFound.
func (s *Store) TaskWithPending(ctx context.Context, taskID string) (*graph.Task, *graph.Interrupt, error) {
	id, ok := parseID(taskID)
	if !ok {
		return nil, nil, graph.ErrTaskNotFound
	}
	r, err := s.q.TaskWithPending(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, graph.ErrTaskNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get task %s: %w", taskID, err)
	}
	return joinedTask(r.Task, joinedInterrupt{r.IID, r.ITaskID, r.INode, r.IKind, r.IIteration, r.IPayload, r.IStatus,
		r.ICreatedAt, r.IResolvedAt, r.IDeadlineAt, r.IOverdue, r.IEscalationLevel, r.IClaimedBy, r.IClaimExpiresAt,
		r.IPayloadSha256})
}

// joinedInterrupt is an interrupt's columns from the nullable side of a
// LEFT JOIN.
type joinedInterrupt struct {
	id, taskID            *uuid.UUID
	node, kind            *string
	iteration             *int32
	payload               json.RawMessage
	status                *string
	createdAt, resolvedAt *time.Time
	deadlineAt            *time.Time
	overdue               *bool
	level                 *int32
	claimedBy             *string
	claimExpiresAt        *time.Time
	sha                   *string
}

func joinedTask(t dbsqlc.Task, j joinedInterrupt) (*graph.Task, *graph.Interrupt, error) {
	task := taskFromRow(t)
	if j.id == nil || j.taskID == nil {
		return &task, nil, nil
	}
	itr, err := interruptFromRow(dbsqlc.Interrupt{ID: *j.id, TaskID: *j.taskID, Node: deref(j.node), Kind: deref(j.kind),
		Iteration: deref(j.iteration), Payload: j.payload, Status: deref(j.status), CreatedAt: deref(j.createdAt),
		ResolvedAt: j.resolvedAt, DeadlineAt: j.deadlineAt, Overdue: deref(j.overdue), EscalationLevel: deref(j.level),
		ClaimedBy: j.claimedBy, ClaimExpiresAt: j.claimExpiresAt, PayloadSha256: deref(j.sha)})
	if err != nil {
		return nil, nil, err
	}
	return &task, itr, nil
}
