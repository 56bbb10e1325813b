package web

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/gatehousehq/gatehouse/internal/graph"
)

// The inbox paged by keyset is the desk's one read query the store does
// not offer yet; it walks interrupts_pending_idx and belongs in
// internal/postgres with sqlc once that package grows a read model for the
// desk. Counts come from the store.

// statusCounts counts tasks by status.
func (d *desk) statusCounts(ctx context.Context) (map[string]int, error) {
	return d.s.store.TaskCounts(ctx)
}

// pendingCount counts pending interrupts.
func (d *desk) pendingCount(ctx context.Context) (int, error) {
	byKind, err := d.s.store.PendingInterruptCounts(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range byKind {
		n += c
	}
	return n, nil
}

// kindCount is the number of pending interrupts of one kind.
type kindCount struct {
	Kind string
	N    int
}

// pendingKinds counts pending interrupts by kind, in kind order.
func (d *desk) pendingKinds(ctx context.Context) ([]kindCount, error) {
	byKind, err := d.s.store.PendingInterruptCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]kindCount, 0, len(byKind))
	for k, n := range byKind {
		out = append(out, kindCount{Kind: k, N: n})
	}
	slices.SortFunc(out, func(a, b kindCount) int { return strings.Compare(a.Kind, b.Kind) })
	return out, nil
}

// inboxCursor is a position in the oldest-first inbox.
type inboxCursor struct {
	CreatedAt time.Time
	ID        string
}

// inboxEntry is a pending interrupt with its task's title and workflow.
type inboxEntry struct {
	graph.Interrupt
	TaskTitle    string
	TaskWorkflow string
}

// inboxPage returns up to limit pending interrupts after the cursor, oldest
// first, of one kind or all, and the cursor of the next page.
func (d *desk) inboxPage(ctx context.Context, kind string, after *inboxCursor, limit int) ([]inboxEntry, *inboxCursor, error) {
	var afterAt *time.Time
	var afterID *uuid.UUID
	if after != nil {
		id, err := uuid.Parse(after.ID)
		if err != nil {
			return nil, nil, badRequest("after", "after is not a cursor this server handed out")
		}
		afterAt, afterID = &after.CreatedAt, &id
	}
	var kindArg *string
	if kind != "" {
		kindArg = &kind
	}
	rows, err := d.s.store.Pool().Query(ctx, `
SELECT i.id, i.task_id, i.node, i.kind, i.iteration, i.payload, i.created_at, t.title, t.workflow
FROM interrupts i
JOIN tasks t ON t.id = i.task_id
WHERE i.status = 'pending'
  AND ($1::text IS NULL OR i.kind = $1::text)
  AND (i.created_at, i.id) > (COALESCE($2::timestamptz, '-infinity'::timestamptz),
                              COALESCE($3::uuid, '00000000-0000-0000-0000-000000000000'::uuid))
ORDER BY i.created_at, i.id
LIMIT $4`, kindArg, afterAt, afterID, limit+1)
	if err != nil {
		return nil, nil, fmt.Errorf("inbox: %w", err)
	}
	defer rows.Close()
	var out []inboxEntry
	for rows.Next() {
		var e inboxEntry
		var id, task uuid.UUID
		var payload []byte
		if err := rows.Scan(&id, &task, &e.Node, &e.Kind, &e.Iteration, &payload, &e.CreatedAt, &e.TaskTitle,
			&e.TaskWorkflow); err != nil {
			return nil, nil, fmt.Errorf("inbox: %w", err)
		}
		e.ID, e.TaskID, e.Status = id.String(), task.String(), graph.InterruptPending
		if err := json.Unmarshal(payload, &e.Payload); err != nil {
			return nil, nil, fmt.Errorf("inbox: payload of interrupt %s: %w", e.ID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("inbox: %w", err)
	}
	var next *inboxCursor
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		next = &inboxCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return out, next, nil
}
