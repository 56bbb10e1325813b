package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

// ClaimRequest asks for a claim on an interrupt.
type ClaimRequest struct {
	InterruptID string
	Who         string
	TTL         time.Duration
	// TakeOver takes the claim from its holder (an admin, with Reason).
	TakeOver bool
	Reason   string
}

// ClaimInterrupt claims a pending interrupt for req.Who for req.TTL, or renews
// their own claim (no event then). The interrupt row is the
// compare-and-swap: of concurrent claims exactly one finds it free. A new
// claim appends interrupt.claimed, a take-over interrupt.taken_over
// (data.actor, data.previous, data.reason), in the same transaction.
// Errors: graph.ErrInterruptNotFound; *graph.ConflictError with Holder
// when someone else holds it, with Status when it is not pending.
func (s *Store) ClaimInterrupt(ctx context.Context, req ClaimRequest) (*graph.Interrupt, error) {
	id, ok := parseID(req.InterruptID)
	if !ok {
		return nil, graph.ErrInterruptNotFound
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	q := s.q.WithTx(tx)
	row, err := q.InterruptClaim(ctx, dbsqlc.InterruptClaimParams{ID: id, Who: req.Who, TtlSeconds: req.TTL.Seconds(),
		TakeOver: req.TakeOver})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, s.claimConflict(ctx, q, req.InterruptID)
	}
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", req.InterruptID, err)
	}
	var evs []timerEvent
	data := map[string]any{"interrupt_id": row.ID.String(), "kind": row.Kind, "actor": req.Who}
	if row.ClaimExpiresAt != nil {
		data["expires_at"] = row.ClaimExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	switch {
	case row.Previous != "" && row.Previous != req.Who:
		data["previous"], data["reason"] = row.Previous, req.Reason
		evs = append(evs, timerEvent{task: row.TaskID, typ: EventInterruptTakenOver, node: row.Node, iteration: row.Iteration, data: data})
	case row.Previous == "":
		evs = append(evs, timerEvent{task: row.TaskID, typ: EventInterruptClaimed, node: row.Node, iteration: row.Iteration, data: data})
	}
	notes, err := appendEvents(ctx, q, evs)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("claim: commit: %w", err)
	}
	s.announce(ctx, notes...)
	return s.Interrupt(ctx, req.InterruptID)
}

// ReleaseInterrupt ends who's claim on an interrupt (admin: anyone's) and appends
// interrupt.released. An interrupt nobody holds is returned as it is.
// Errors: graph.ErrInterruptNotFound, *graph.ClaimHolderError when someone
// else holds it and who is not an admin, *graph.ConflictError when it is
// not pending.
func (s *Store) ReleaseInterrupt(ctx context.Context, interruptID, who string, admin bool) (*graph.Interrupt, error) {
	id, ok := parseID(interruptID)
	if !ok {
		return nil, graph.ErrInterruptNotFound
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("release: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	q := s.q.WithTx(tx)
	row, err := q.InterruptRelease(ctx, dbsqlc.InterruptReleaseParams{ID: id, Who: who, Admin: admin})
	if errors.Is(err, pgx.ErrNoRows) {
		// Read within the transaction: it holds the row's lock, and the
		// pool may have no other connection to give.
		itr, gerr := interruptIn(ctx, q, id)
		switch {
		case gerr != nil:
			return nil, gerr
		case itr.Status != graph.InterruptPending:
			return nil, &graph.ConflictError{InterruptID: interruptID, Status: itr.Status}
		case itr.ClaimedBy == "":
			return itr, nil
		}
		return nil, &graph.ClaimHolderError{InterruptID: interruptID, Holder: itr.ClaimedBy}
	}
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", interruptID, err)
	}
	data := map[string]any{"interrupt_id": row.ID.String(), "kind": row.Kind, "actor": who}
	if row.Previous != who {
		data["previous"] = row.Previous
	}
	notes, err := appendEvents(ctx, q, []timerEvent{{task: row.TaskID, typ: EventInterruptReleased, node: row.Node,
		iteration: row.Iteration, data: data}})
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("release: commit: %w", err)
	}
	s.announce(ctx, notes...)
	return s.Interrupt(ctx, interruptID)
}

// RenewClaims extends who's claims on the pending interrupt of a task
// (their page of it is open) and reports how many it renewed.
func (s *Store) RenewClaims(ctx context.Context, taskID, who string, ttl time.Duration) (int64, error) {
	id, ok := parseID(taskID)
	if !ok {
		return 0, graph.ErrTaskNotFound
	}
	return s.q.ClaimsRenew(ctx, dbsqlc.ClaimsRenewParams{TaskID: id, Who: who, TtlSeconds: ttl.Seconds()})
}

func (s *Store) claimConflict(ctx context.Context, q *dbsqlc.Queries, interruptID string) error {
	id, _ := parseID(interruptID)
	itr, err := interruptIn(ctx, q, id)
	if err != nil {
		return err
	}
	if itr.Status != graph.InterruptPending {
		return &graph.ConflictError{InterruptID: interruptID, Status: itr.Status}
	}
	return &graph.ConflictError{InterruptID: interruptID, Status: itr.Status, Holder: itr.ClaimedBy}
}

// interruptIn reads an interrupt through q (a transaction's queries).
func interruptIn(ctx context.Context, q *dbsqlc.Queries, id uuid.UUID) (*graph.Interrupt, error) {
	row, err := q.InterruptGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, graph.ErrInterruptNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get interrupt %s: %w", id, err)
	}
	return interruptFromRow(row)
}
