package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

// Every notification leaves rows behind: its delivery in outbox, an
// attempt per try in outbox_attempts, and for an email its action link.
// PruneNotifications trims the ones whose work is over
// (GATEHOUSE_OUTBOX_RETENTION).

// DefaultOutboxPruneBatch bounds one statement of a notification prune:
// each deletes at most this many deliveries (with their attempts) or
// links, in a transaction of its own, so no lock is held for long.
const DefaultOutboxPruneBatch = 1000

// outboxPruneLockKey is the advisory lock of a notification prune
// ("ghoutbx!" in ASCII); the history prune holds another.
const outboxPruneLockKey int64 = 0x6768_6f75_7462_7821

// ErrOutboxPruneBusy is returned when another replica is pruning the
// notification rows.
var ErrOutboxPruneBusy = errors.New("another prune of the notification rows is running")

// NotificationPrune says which notification rows to prune.
type NotificationPrune struct {
	// Before: deliveries that finished (delivered or failed), created and
	// last attempted before this instant, and action links that ended
	// (used, or expired unused) before it. Pending deliveries stay.
	Before time.Time
	// Batch bounds one statement (zero: DefaultOutboxPruneBatch).
	Batch int
}

// NotificationsPruned is what a prune deleted.
type NotificationsPruned struct {
	Deliveries int64 // outbox rows
	Attempts   int64 // outbox_attempts rows of those deliveries
	Links      int64 // action_links rows
}

// PruneNotifications deletes the notification rows that p names, in
// statements of at most p.Batch rows, each its own transaction: a
// cancelled prune keeps what it did. One prune at a time per database:
// ErrOutboxPruneBusy when another holds the lock.
func (s *Store) PruneNotifications(ctx context.Context, p NotificationPrune) (NotificationsPruned, error) {
	var out NotificationsPruned
	if p.Before.IsZero() {
		return out, errors.New("prune notifications: no cutoff")
	}
	if p.Batch <= 0 {
		p.Batch = DefaultOutboxPruneBatch
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return out, fmt.Errorf("prune notifications: %w", err)
	}
	q := dbsqlc.New(conn)
	locked, err := q.HistoryPruneLock(ctx, outboxPruneLockKey)
	if err != nil {
		conn.Release()
		return out, fmt.Errorf("prune notifications: %w", err)
	}
	if !locked {
		conn.Release()
		return out, ErrOutboxPruneBusy
	}
	defer func() {
		after, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := q.HistoryPruneUnlock(after, outboxPruneLockKey); err != nil {
			// A connection that may still hold the lock must not go back
			// to the pool: the lock would outlive the prune.
			_ = conn.Hijack().Close(after)
			return
		}
		conn.Release()
	}()
	for {
		r, err := q.OutboxPruneDelete(ctx, dbsqlc.OutboxPruneDeleteParams{Cutoff: p.Before, MaxRows: int32(p.Batch)})
		if err != nil {
			return out, fmt.Errorf("prune notifications: deliveries: %w", err)
		}
		out.Deliveries += r.Deliveries
		out.Attempts += r.Attempts
		if r.Deliveries < int64(p.Batch) {
			break
		}
	}
	for {
		n, err := q.ActionLinkPruneDelete(ctx, dbsqlc.ActionLinkPruneDeleteParams{Cutoff: p.Before, MaxRows: int32(p.Batch)})
		if err != nil {
			return out, fmt.Errorf("prune notifications: action links: %w", err)
		}
		out.Links += n
		if n < int64(p.Batch) {
			break
		}
	}
	return out, nil
}
