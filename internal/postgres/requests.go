package postgres

// Approval requests (SPEC §16): the rows of package requests.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
	"github.com/gatehousehq/gatehouse/internal/requests"
)

var _ requests.Store = (*Store)(nil)

// requestCreation is a request's row to write in its task's first
// commit (graph.Commit.With, a *requests.Creation): its statement, queued
// before the task's, and the read of the request, queued after them all.
type requestCreation struct {
	cr *requests.Creation
	p  dbsqlc.RequestInsertParams
}

// newRequestCreation checks the With of c, a task's first commit.
func newRequestCreation(c *graph.Commit) (*requestCreation, error) {
	cr, ok := c.With.(*requests.Creation)
	if !ok || c.Create == nil {
		return nil, fmt.Errorf("commit task %s: cannot write a %T with it", c.TaskID, c.With)
	}
	r := cr.Row
	id, ok := parseID(r.ID)
	if !ok || r.ID != c.TaskID {
		return nil, fmt.Errorf("commit task %s: request id %q is not its task's", c.TaskID, r.ID)
	}
	p := dbsqlc.RequestInsertParams{ID: id, CreatedBy: r.CreatedBy, BodySha256: r.BodySHA256, Kind: r.Kind, Body: r.Body,
		CallbackUrl: r.CallbackURL, CallbackSecret: r.CallbackSecret, Via: r.Via, CreatedAt: c.Create.CreatedAt}
	if r.IdempotencyKey != "" {
		p.IdempotencyKey = &r.IdempotencyKey
	}
	return &requestCreation{cr: cr, p: p}, nil
}

// insert queues the row.
func (x *requestCreation) insert(ctx context.Context, b *pgx.Batch) {
	queue(b, func(q *dbsqlc.Queries) error { return q.RequestInsert(ctx, x.p) })
}

// readBack queues the read of the request, once its task is written.
func (x *requestCreation) readBack(ctx context.Context, b *pgx.Batch) {
	queue(b, func(q *dbsqlc.Queries) error { _, err := q.RequestGet(ctx, x.p.ID); return err }).
		QueryRow(func(row pgx.Row) error {
			r, err := fromRow(row).RequestGet(ctx, x.p.ID)
			if err != nil {
				return fmt.Errorf("read request %s back: %w", x.cr.Row.ID, err)
			}
			x.cr.Got = recordOf(r)
			return nil
		})
}

// keyUsed reports whether err is a request's idempotency key used already.
func keyUsed(err *pgconn.PgError) bool {
	return err.Code == "23505" && err.ConstraintName == "requests_idempotency_idx"
}

// RequestByKey implements requests.Store.
func (s *Store) RequestByKey(ctx context.Context, principal, key string) (requests.Keyed, error) {
	r, err := s.q.RequestByKey(ctx, dbsqlc.RequestByKeyParams{CreatedBy: principal, IdempotencyKey: key})
	if errors.Is(err, pgx.ErrNoRows) {
		return requests.Keyed{}, requests.ErrNotFound
	}
	if err != nil {
		return requests.Keyed{}, fmt.Errorf("read request by key: %w", err)
	}
	return requests.Keyed{ID: r.ID.String(), BodySHA256: r.BodySha256, CallbackSecret: r.CallbackSecret}, nil
}

// RequestGet implements requests.Store.
func (s *Store) RequestGet(ctx context.Context, id string) (requests.Record, error) {
	uid, ok := parseID(id)
	if !ok {
		return requests.Record{}, requests.ErrNotFound
	}
	r, err := s.q.RequestGet(ctx, uid)
	if errors.Is(err, pgx.ErrNoRows) {
		return requests.Record{}, requests.ErrNotFound
	}
	if err != nil {
		return requests.Record{}, fmt.Errorf("read request %s: %w", id, err)
	}
	return recordOf(r), nil
}

func recordOf(r dbsqlc.RequestRow) requests.Record {
	return requests.Record{ID: r.ID.String(), CreatedBy: r.CreatedBy, IdempotencyKey: deref(r.IdempotencyKey), Kind: r.Kind,
		Body: r.Body, CallbackURL: r.CallbackUrl, Via: r.Via, CreatedAt: r.CreatedAt, TaskStatus: r.TaskStatus,
		InterruptID: r.InterruptID, InterruptStatus: r.InterruptStatus, Deadline: r.DeadlineAt, PayloadSHA256: r.PayloadSha256,
		ResolvedAt: r.ResolvedAt, DecisionAction: r.DAction, DecisionFeedback: r.DFeedback, DecisionValue: r.DValue,
		DecisionBy: r.DDecidedBy, DecidedAt: r.DDecidedAt, Status: r.Status}
}

// RequestList implements requests.Store.
func (s *Store) RequestList(ctx context.Context, q requests.ListQuery) ([]requests.Record, error) {
	p := dbsqlc.RequestListParams{Kind: q.Kind, Status: q.Status, AfterAt: q.AfterAt, MaxRows: int32(q.Limit)}
	if q.AfterAt != nil {
		id, ok := parseID(q.AfterID)
		if !ok {
			return nil, fmt.Errorf("list requests: bad cursor id %q", q.AfterID)
		}
		p.AfterID = &id
	}
	rows, err := s.q.RequestList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("list requests: %w", err)
	}
	out := make([]requests.Record, len(rows))
	for i, r := range rows {
		out[i] = recordOf(r)
	}
	return out, nil
}

// RequestOrphans implements requests.Store.
func (s *Store) RequestOrphans(ctx context.Context, before time.Time) ([]requests.Record, error) {
	rows, err := s.q.RequestOrphans(ctx, before)
	if err != nil {
		return nil, fmt.Errorf("requests without a task: %w", err)
	}
	out := make([]requests.Record, len(rows))
	for i, r := range rows {
		out[i] = requests.Record{ID: r.ID.String(), CreatedBy: r.CreatedBy, Kind: r.Kind, Body: r.Body, Via: r.Via}
	}
	return out, nil
}

// RequestCallback implements requests.Store.
func (s *Store) RequestCallback(ctx context.Context, id string) (string, string, error) {
	uid, ok := parseID(id)
	if !ok {
		return "", "", requests.ErrNotFound
	}
	r, err := s.q.RequestCallback(ctx, uid)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", requests.ErrNotFound
	}
	if err != nil {
		return "", "", fmt.Errorf("read the callback of request %s: %w", id, err)
	}
	return r.CallbackUrl, r.CallbackSecret, nil
}

// RequestsSettled implements requests.Store.
func (s *Store) RequestsSettled(ctx context.Context, ids []string) ([]string, error) {
	uids := make([]uuid.UUID, 0, len(ids))
	for _, id := range ids {
		if u, ok := parseID(id); ok {
			uids = append(uids, u)
		}
	}
	rows, err := s.q.RequestsSettled(ctx, uids)
	if err != nil {
		return nil, fmt.Errorf("read which requests were settled: %w", err)
	}
	out := make([]string, len(rows))
	for i, u := range rows {
		out[i] = u.String()
	}
	return out, nil
}

// RequestCancel implements requests.Store: Cancel, with the channel in
// task.cancelled's data.via.
func (s *Store) RequestCancel(ctx context.Context, id, actor, via string) error {
	return s.cancel(ctx, id, map[string]string{"cancelled_by": actor, "actor": actor, "via": via})
}
