package postgres

// Storage of the LangGraph API (SPEC §14): threads (a task and its
// metadata; a task started elsewhere is a thread without a row) and runs
// (one stretch of a task through /langgraph, settled from the task's
// events so that every replica answers the same).

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

// Errors of the LangGraph storage.
var (
	ErrThreadNotFound = errors.New("thread not found")
	ErrRunNotFound    = errors.New("run not found")
	// ErrThreadBusy: the thread has an active run already.
	ErrThreadBusy = errors.New("thread is busy with another run")
)

// LGThread is a thread as stored: its task's status and workflow are
// empty before its first run.
type LGThread struct {
	ID         string
	Metadata   json.RawMessage
	CreatedAt  time.Time
	UpdatedAt  time.Time
	TaskStatus graph.TaskStatus
	Workflow   string
	// EventSeq is the task's last event seq (0 without a task).
	EventSeq int64
	// Stored: the thread has its row (a task started elsewhere has none
	// until its first run here).
	Stored bool
}

// LGRun is one run of a thread.
type LGRun struct {
	ID                string
	ThreadID          string
	AssistantID       string
	Status            string
	AfterSeq          int64
	EndSeq            *int64
	StartStep         int
	Metadata          json.RawMessage
	Kwargs            json.RawMessage
	MultitaskStrategy string
	CreatedBy         string
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// Active reports a run that has not ended.
func (r *LGRun) Active() bool { return r.Status == "pending" || r.Status == "running" }

// LGThreadQuery filters threads. Assistants maps each workflow to its
// assistant id (the metadata of tasks started elsewhere).
type LGThreadQuery struct {
	Status     string
	Metadata   json.RawMessage
	IDs        []string
	SortBy     string
	Descending bool
	Limit      int
	Offset     int
	Assistants json.RawMessage
}

// LGCreateThread inserts a thread; false when one (or a task) has this id.
func (s *Store) LGCreateThread(ctx context.Context, id string, metadata json.RawMessage, createdBy string) (bool, error) {
	u, ok := parseID(id)
	if !ok {
		return false, ErrThreadNotFound
	}
	if _, err := s.q.TaskGet(ctx, u); err == nil {
		return false, nil
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("create thread %s: %w", id, err)
	}
	_, err := s.q.LGThreadInsert(ctx, dbsqlc.LGThreadInsertParams{ID: u, Metadata: metadata, CreatedBy: createdBy})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create thread %s: %w", id, err)
	}
	return true, nil
}

// LGMergeThreadMetadata merges patch into the thread's metadata.
func (s *Store) LGMergeThreadMetadata(ctx context.Context, id string, patch json.RawMessage) error {
	u, ok := parseID(id)
	if !ok {
		return ErrThreadNotFound
	}
	if err := s.q.LGThreadMergeMetadata(ctx, dbsqlc.LGThreadMergeMetadataParams{ID: u, Patch: patch}); err != nil {
		return fmt.Errorf("thread %s metadata: %w", id, err)
	}
	return nil
}

// LGThread returns one thread. Errors: ErrThreadNotFound.
func (s *Store) LGThread(ctx context.Context, id string, assistants json.RawMessage) (*LGThread, error) {
	u, ok := parseID(id)
	if !ok {
		return nil, ErrThreadNotFound
	}
	r, err := s.q.LGThreadGet(ctx, dbsqlc.LGThreadGetParams{ID: u, Assistants: assistants})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrThreadNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get thread %s: %w", id, err)
	}
	t := &LGThread{ID: r.ID.String(), Metadata: r.Metadata, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Stored: r.Stored}
	if r.TaskStatus != nil {
		t.TaskStatus = graph.TaskStatus(*r.TaskStatus)
	}
	if r.TaskWorkflow != nil {
		t.Workflow = *r.TaskWorkflow
	}
	if r.TaskEventSeq != nil {
		t.EventSeq = *r.TaskEventSeq
	}
	return t, nil
}

// LGSearchThreads returns a page of threads and how many match in all.
func (s *Store) LGSearchThreads(ctx context.Context, q LGThreadQuery) ([]LGThread, int64, error) {
	ids := make([]uuid.UUID, 0, len(q.IDs))
	for _, id := range q.IDs {
		if u, ok := parseID(id); ok {
			ids = append(ids, u)
		} else {
			// An id that cannot exist matches nothing, not everything.
			ids = append(ids, uuid.Nil)
		}
	}
	md := q.Metadata
	if len(md) == 0 {
		md = json.RawMessage(`{}`)
	}
	rows, err := s.q.LGThreadSearch(ctx, dbsqlc.LGThreadSearchParams{Status: q.Status, Metadata: md, Ids: ids,
		SortBy: q.SortBy, Descending: q.Descending, MaxRows: int32(q.Limit), Skip: int32(q.Offset), Assistants: q.Assistants})
	if err != nil {
		return nil, 0, fmt.Errorf("search threads: %w", err)
	}
	out := make([]LGThread, 0, len(rows))
	var total int64
	for _, r := range rows {
		t := LGThread{ID: r.ID.String(), Metadata: r.Metadata, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
		if r.TaskStatus != nil {
			t.TaskStatus = graph.TaskStatus(*r.TaskStatus)
		}
		if r.TaskWorkflow != nil {
			t.Workflow = *r.TaskWorkflow
		}
		total = r.Total
		out = append(out, t)
	}
	return out, total, nil
}

// LGCreateRun inserts r as the thread's active run, starting after the
// task's last event at its current step (both set in r). With adopt, a
// task started elsewhere gets its thread row with that metadata in the
// same statement. An active run still stored is settled first, if its
// end is in the task's events. Errors: ErrThreadBusy when another run
// is active.
func (s *Store) LGCreateRun(ctx context.Context, r *LGRun, adopt json.RawMessage) error {
	id, ok1 := parseID(r.ID)
	tid, ok2 := parseID(r.ThreadID)
	aid, ok3 := parseID(r.AssistantID)
	if !ok1 || !ok2 || !ok3 {
		return fmt.Errorf("create run: malformed id")
	}
	p := dbsqlc.LGRunInsertParams{ID: id, ThreadID: tid, AssistantID: aid, Metadata: emptyObject(r.Metadata),
		Kwargs: emptyObject(r.Kwargs), MultitaskStrategy: r.MultitaskStrategy, CreatedBy: r.CreatedBy,
		Adopt: adopt != nil, AdoptMetadata: emptyObject(adopt)}
	row, err := s.lgRunInsert(ctx, p)
	if isUniqueViolation(err) {
		// Usually the previous run's stream settled it; when nobody
		// followed it, settle now and try once more.
		if err := s.q.LGRunsSettle(ctx, tid); err != nil {
			return fmt.Errorf("settle runs of %s: %w", r.ThreadID, err)
		}
		row, err = s.lgRunInsert(ctx, p)
	}
	if isUniqueViolation(err) {
		return ErrThreadBusy
	}
	if err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	*r = *runFromInsert(row)
	return nil
}

// lgRunInsert writes a run's row without waiting for its WAL flush: every
// caller's next step (the decision, the task's creation, the retry, or
// the run's undoing) commits synchronously before anything is answered,
// and flushes the row with it, WAL being flushed in order. A crash before
// that step loses a run nobody was told of. This takes a flush off the
// path of every resume.
func (s *Store) lgRunInsert(ctx context.Context, p dbsqlc.LGRunInsertParams) (dbsqlc.LgRun, error) {
	var row dbsqlc.LgRun
	b := asyncBatch(ctx, false)
	queue(b, func(q *dbsqlc.Queries) error { _, err := q.LGRunInsert(ctx, p); return err }).
		QueryRow(func(r pgx.Row) error {
			var err error
			row, err = fromRow(r).LGRunInsert(ctx, p)
			return err
		})
	err := s.pool.SendBatch(ctx, b).Close()
	return row, err
}

func emptyObject(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || string(b) == "null" {
		return json.RawMessage(`{}`)
	}
	return b
}

// LGDeleteRun removes a run whose start was refused.
func (s *Store) LGDeleteRun(ctx context.Context, id string) error {
	u, ok := parseID(id)
	if !ok {
		return ErrRunNotFound
	}
	if err := s.q.LGRunDelete(ctx, u); err != nil {
		return fmt.Errorf("delete run %s: %w", id, err)
	}
	return nil
}

// LGSettleRuns ends the thread's active runs whose end is in the task's events.
func (s *Store) LGSettleRuns(ctx context.Context, threadID string) error {
	u, ok := parseID(threadID)
	if !ok {
		return ErrThreadNotFound
	}
	if err := s.q.LGRunsSettle(ctx, u); err != nil {
		return fmt.Errorf("settle runs of %s: %w", threadID, err)
	}
	return nil
}

// LGSettleRun ends one active run as status at endSeq.
func (s *Store) LGSettleRun(ctx context.Context, runID, status string, endSeq int64) error {
	u, ok := parseID(runID)
	if !ok {
		return ErrRunNotFound
	}
	if err := s.q.LGRunSettle(ctx, dbsqlc.LGRunSettleParams{ID: u, Status: status, EndSeq: &endSeq}); err != nil {
		return fmt.Errorf("settle run %s: %w", runID, err)
	}
	return nil
}

// LGRun returns a run of a thread, settled first. Errors: ErrRunNotFound.
func (s *Store) LGRun(ctx context.Context, threadID, runID string) (*LGRun, error) {
	tid, ok1 := parseID(threadID)
	id, ok2 := parseID(runID)
	if !ok1 || !ok2 {
		return nil, ErrRunNotFound
	}
	if err := s.q.LGRunsSettle(ctx, tid); err != nil {
		return nil, fmt.Errorf("settle runs of %s: %w", threadID, err)
	}
	r, err := s.q.LGRunGet(ctx, dbsqlc.LGRunGetParams{ThreadID: tid, ID: id})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrRunNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", runID, err)
	}
	return runFromRow(r), nil
}

// LGRuns lists a thread's runs, newest first, settled first.
func (s *Store) LGRuns(ctx context.Context, threadID, status string, limit, offset int) ([]LGRun, error) {
	tid, ok := parseID(threadID)
	if !ok {
		return nil, ErrThreadNotFound
	}
	if err := s.q.LGRunsSettle(ctx, tid); err != nil {
		return nil, fmt.Errorf("settle runs of %s: %w", threadID, err)
	}
	rows, err := s.q.LGRunList(ctx, dbsqlc.LGRunListParams{ThreadID: tid, Status: status, MaxRows: int32(limit), Skip: int32(offset)})
	if err != nil {
		return nil, fmt.Errorf("list runs of %s: %w", threadID, err)
	}
	out := make([]LGRun, 0, len(rows))
	for _, r := range rows {
		out = append(out, *runFromRow(dbsqlc.LGRunGetRow(r)))
	}
	return out, nil
}

// runFromInsert is the run a row written by LGRunInsert or
// LGRunInsertResume holds.
func runFromInsert(row dbsqlc.LgRun) *LGRun {
	return runFromRow(dbsqlc.LGRunGetRow{ID: row.ID, ThreadID: row.ThreadID, AssistantID: row.AssistantID, Status: row.Status,
		AfterSeq: row.AfterSeq, EndSeq: row.EndSeq, StartStep: row.StartStep, Metadata: row.Metadata, Kwargs: row.Kwargs,
		MultitaskStrategy: row.MultitaskStrategy, CreatedBy: row.CreatedBy, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt})
}

func runFromRow(r dbsqlc.LGRunGetRow) *LGRun {
	out := &LGRun{ID: r.ID.String(), ThreadID: r.ThreadID.String(), AssistantID: r.AssistantID.String(), Status: r.Status,
		AfterSeq: r.AfterSeq, EndSeq: r.EndSeq, StartStep: int(r.StartStep), Metadata: r.Metadata, Kwargs: r.Kwargs,
		MultitaskStrategy: r.MultitaskStrategy, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if out.Status == "pending" && r.TaskStatus != nil && *r.TaskStatus == string(graph.StatusRunning) {
		out.Status = "running"
	}
	return out
}

// CancelBecause is Cancel with a reason, carried by the task.cancelled
// event beside cancelled_by ("resolved by alice" from a LangGraph client's
// "mark as resolved").
func (s *Store) CancelBecause(ctx context.Context, taskID, actor, reason string) error {
	id, ok := parseID(taskID)
	if !ok {
		return graph.ErrTaskNotFound
	}
	data, _ := json.Marshal(map[string]string{"cancelled_by": actor, "actor": actor, "reason": reason})
	return s.transition(ctx, taskID, "cancel", func(q *dbsqlc.Queries) (int64, error) {
		seq, err := q.TaskCancel(ctx, dbsqlc.TaskCancelParams{ID: id, Data: data})
		if err != nil {
			return 0, err
		}
		return seq, q.InterruptsCancelPending(ctx, id)
	}, false)
}

// LGNodeCheckpointNth returns the n-th (from 0) checkpoint a node run
// wrote after step: its step and state. Errors: ErrCheckpointNotFound.
func (s *Store) LGNodeCheckpointNth(ctx context.Context, taskID string, after, n int) (int, json.RawMessage, error) {
	id, ok := parseID(taskID)
	if !ok {
		return 0, nil, ErrCheckpointNotFound
	}
	r, err := s.q.LGNodeCheckpointNth(ctx, dbsqlc.LGNodeCheckpointNthParams{TaskID: id, After: int32(after), N: int32(n)})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, ErrCheckpointNotFound
	}
	if err != nil {
		return 0, nil, fmt.Errorf("node checkpoint %d of %s after %d: %w", n, taskID, after, err)
	}
	state, err := joinState(r.State, r.StateRefs, r.BlobKeys, r.BlobValues)
	if err != nil {
		return 0, nil, fmt.Errorf("node checkpoint %d of %s after %d: %w", n, taskID, after, err)
	}
	return int(r.Step), state, nil
}

// LGInterruptWithFeedback returns an interrupt and the feedback of the
// last rejection at its node before it ("" when none), in one statement.
// Errors: graph.ErrInterruptNotFound.
func (s *Store) LGInterruptWithFeedback(ctx context.Context, interruptID string) (*graph.Interrupt, string, error) {
	id, ok := parseID(interruptID)
	if !ok {
		return nil, "", graph.ErrInterruptNotFound
	}
	r, err := s.q.LGInterruptWithFeedback(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", graph.ErrInterruptNotFound
	}
	if err != nil {
		return nil, "", fmt.Errorf("interrupt %s: %w", interruptID, err)
	}
	itr, err := interruptFromRow(dbsqlc.Interrupt{ID: r.ID, TaskID: r.TaskID, Node: r.Node, Kind: r.Kind, Iteration: r.Iteration,
		Payload: r.Payload, Status: r.Status, CreatedAt: r.CreatedAt, ResolvedAt: r.ResolvedAt})
	if err != nil {
		return nil, "", err
	}
	return itr, r.Feedback, nil
}

// LGLastRejection is the feedback of the task's last rejection at node,
// other than of the interrupt named; "" when there is none.
func (s *Store) LGLastRejection(ctx context.Context, taskID, node, interruptID string) (string, error) {
	id, ok1 := parseID(taskID)
	iid, ok2 := parseID(interruptID)
	if !ok1 || !ok2 {
		return "", nil
	}
	fb, err := s.q.LGLastRejection(ctx, dbsqlc.LGLastRejectionParams{TaskID: id, Node: node, InterruptID: iid})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("last rejection of %s at %s: %w", taskID, node, err)
	}
	return fb, nil
}

// TaskWithPendingResuming is TaskWithPending for a resume of the task by
// the run r of graph workflow: the run's row (LGRunInsertResume) travels
// in the same round trip, after the read, and is written only when the
// task waits and runs workflow. started says whether it was; when it was
// not (the task does not wait, runs another graph, or the thread has an
// active run: ErrThreadBusy is LGCreateRun's to sort out), the caller
// refuses the resume or writes the run with LGCreateRun. Like LGCreateRun
// it commits without waiting for its flush: the decision that follows
// flushes it. Errors: graph.ErrTaskNotFound.
func (s *Store) TaskWithPendingResuming(ctx context.Context, workflow string, r *LGRun, adopt json.RawMessage) (
	task *graph.Task, pending *graph.Interrupt, started bool, err error) {
	tid, ok1 := parseID(r.ThreadID)
	id, ok2 := parseID(r.ID)
	aid, ok3 := parseID(r.AssistantID)
	if !ok1 || !ok2 || !ok3 {
		return nil, nil, false, graph.ErrTaskNotFound
	}
	p := dbsqlc.LGRunInsertResumeParams{ID: id, ThreadID: tid, AssistantID: aid, Metadata: emptyObject(r.Metadata),
		Kwargs: emptyObject(r.Kwargs), MultitaskStrategy: r.MultitaskStrategy, CreatedBy: r.CreatedBy, Workflow: workflow,
		AdoptMetadata: emptyObject(adopt)}
	var read dbsqlc.TaskWithPendingRow
	var readErr, insErr error
	var row dbsqlc.LgRun
	b := asyncBatch(ctx, false)
	queue(b, func(q *dbsqlc.Queries) error { _, err := q.TaskWithPending(ctx, tid); return err }).
		QueryRow(func(r pgx.Row) error {
			read, readErr = fromRow(r).TaskWithPending(ctx, tid)
			return nil
		})
	queue(b, func(q *dbsqlc.Queries) error { _, err := q.LGRunInsertResume(ctx, p); return err }).
		QueryRow(func(r pgx.Row) error {
			row, insErr = fromRow(r).LGRunInsertResume(ctx, p)
			return nil
		})
	berr := s.pool.SendBatch(ctx, b).Close()
	switch {
	case errors.Is(readErr, pgx.ErrNoRows):
		return nil, nil, false, graph.ErrTaskNotFound
	case readErr != nil:
		return nil, nil, false, fmt.Errorf("get task %s: %w", r.ThreadID, readErr)
	case insErr != nil && !errors.Is(insErr, pgx.ErrNoRows) && !isUniqueViolation(insErr):
		return nil, nil, false, fmt.Errorf("create run: %w", insErr)
	case berr != nil && !isUniqueViolation(berr):
		return nil, nil, false, fmt.Errorf("get task %s: %w", r.ThreadID, berr)
	}
	task, pending, err = joinedTask(read.Task, joinedInterrupt{read.IID, read.ITaskID, read.INode, read.IKind, read.IIteration,
		read.IPayload, read.IStatus, read.ICreatedAt, read.IResolvedAt, read.IDeadlineAt, read.IOverdue, read.IEscalationLevel,
		read.IClaimedBy, read.IClaimExpiresAt, read.IPayloadSha256})
	if err != nil || insErr != nil {
		return task, pending, false, err
	}
	*r = *runFromInsert(row)
	return task, pending, true, nil
}
