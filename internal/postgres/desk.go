package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

// The approval desk's reads (db/queries/desk.sql): the web package renders
// what these return and holds no SQL of its own.

// InboxCursor is a position in the oldest-first inbox: the last interrupt
// of the previous page.
type InboxCursor struct {
	// Due is the deadline of the last item shown (nil: it had none).
	Due       *time.Time
	CreatedAt time.Time
	ID        string
}

// InboxFilter selects and pages pending interrupts for InboxPage.
type InboxFilter struct {
	Kind string // empty: any
	// Claim is "mine" (held by Who), "unclaimed" or "" (any).
	Claim string
	Who   string
	// Overdue keeps those whose deadline passed.
	Overdue bool
	Limit   int          // rows per page (at least 1)
	After   *InboxCursor // nil: the first page
}

// InboxPage returns one page of the pending interrupts, oldest first, with
// their tasks, and the cursor of the next page (nil on the last page).
// Interrupts raised at the same instant are paged by id, so none is shown
// twice or skipped. Errors: *graph.ValidationError (field "after") for a
// cursor naming a malformed id.
func (s *Store) InboxPage(ctx context.Context, f InboxFilter) ([]InboxEntry, *InboxCursor, error) {
	limit := max(f.Limit, 1)
	p := dbsqlc.DeskInboxPageFilteredParams{MaxRows: int32(limit + 1), // one more tells whether a next page exists
		Claim: f.Claim, Who: f.Who, Overdue: f.Overdue}
	if f.Kind != "" {
		p.Kind = &f.Kind
	}
	if f.After != nil {
		id, ok := parseID(f.After.ID)
		if !ok {
			return nil, nil, &graph.ValidationError{Field: "after", Message: "names a malformed interrupt id"}
		}
		at := f.After.CreatedAt
		p.AfterAt, p.AfterID, p.AfterDue = &at, &id, f.After.Due
	}
	var rows []dbsqlc.DeskInboxPageFilteredRow
	var err error
	if f.Claim == "" && !f.Overdue {
		var plain []dbsqlc.DeskInboxPageRow
		plain, err = s.q.DeskInboxPage(ctx, dbsqlc.DeskInboxPageParams{Kind: p.Kind, AfterDue: p.AfterDue, AfterAt: p.AfterAt,
			AfterID: p.AfterID, MaxRows: p.MaxRows})
		for _, r := range plain {
			rows = append(rows, dbsqlc.DeskInboxPageFilteredRow(r))
		}
	} else {
		rows, err = s.q.DeskInboxPageFiltered(ctx, p)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("inbox: %w", err)
	}
	var next *InboxCursor
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1].Interrupt
		next = &InboxCursor{Due: last.DeadlineAt, CreatedAt: last.CreatedAt, ID: last.ID.String()}
	}
	out := make([]InboxEntry, 0, len(rows))
	for _, r := range rows {
		itr, err := interruptFromRow(r.Interrupt)
		if err != nil {
			return nil, nil, fmt.Errorf("inbox: %w", err)
		}
		out = append(out, InboxEntry{Interrupt: *itr,
			Task: TaskRef{ID: itr.TaskID, Title: r.TaskTitle, Workflow: r.TaskWorkflow, CreatedBy: r.TaskCreatedBy, Via: r.TaskVia}})
	}
	return out, next, nil
}
