package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gatehousehq/gatehouse/internal/analytics"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

// Analytics computes the approval analytics of f from the rollups, folding
// into them first what the triggers appended since (migration 00080). The
// five reads run at once, each on its own connection: on a large history
// the report costs the slowest of them, not their sum.
func (s *Store) Analytics(ctx context.Context, f analytics.Filter) (*analytics.Report, error) {
	if _, err := s.FoldAnalytics(ctx); err != nil {
		return nil, err
	}
	in := analytics.Input{Filter: f}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	run := func(name string, fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("analytics %s: %w", name, err))
				mu.Unlock()
			}
		}()
	}
	since, until := f.Since.UTC(), f.Until.UTC()
	if f.Now.IsZero() {
		f.Now = time.Now()
		in.Filter.Now = f.Now
	}
	run("interrupts", func() error {
		rows, err := s.q.AnalyticsInterruptDays(ctx, dbsqlc.AnalyticsInterruptDaysParams{Since: since, Until: until,
			Kind: f.Kind, Workflow: f.Workflow})
		for _, r := range rows {
			in.Interrupts = append(in.Interrupts, analytics.InterruptDay{Day: r.Day, Kind: r.Kind,
				Closed: int(r.Closed), Expired: int(r.Expired), Canceled: int(r.Cancelled)})
		}
		return err
	})
	run("decisions", func() error {
		rows, err := s.q.AnalyticsDecisionDays(ctx, dbsqlc.AnalyticsDecisionDaysParams{Since: since, Until: until,
			Kind: f.Kind, Workflow: f.Workflow})
		in.Decisions = make([]analytics.DecisionDay, 0, len(rows))
		for _, r := range rows {
			in.Decisions = append(in.Decisions, analytics.DecisionDay{Day: r.Day, Kind: r.Kind,
				Approved: int(r.Approved), Rejected: int(r.Rejected), Edited: int(r.Edited), Answered: int(r.Answered),
				MaxSeconds: r.MaxSeconds, Hist: r.Hist})
		}
		return err
	})
	run("approvals", func() error {
		rows, err := s.q.AnalyticsApprovals(ctx, dbsqlc.AnalyticsApprovalsParams{Since: since, Until: until,
			Kind: f.Kind, Workflow: f.Workflow})
		for _, r := range rows {
			in.Approvals = append(in.Approvals, analytics.ApprovalCount{Kind: r.Kind, Rejections: int(r.Rejections), N: int(r.N)})
		}
		return err
	})
	run("deciders", func() error {
		rows, err := s.q.AnalyticsDeciders(ctx, dbsqlc.AnalyticsDecidersParams{Since: since, Until: until,
			Kind: f.Kind, Workflow: f.Workflow})
		for _, r := range rows {
			in.Deciders = append(in.Deciders, analytics.DeciderDay{Decider: r.Decider,
				Decisions: int(r.Decisions), Approvals: int(r.Approvals), Rejections: int(r.Rejections), Fast: int(r.Fast),
				Hist: r.Hist})
		}
		return err
	})
	run("ruled", func() error {
		rows, err := s.q.AnalyticsRuled(ctx, dbsqlc.AnalyticsRuledParams{Since: since, Until: until, Kind: f.Kind, Workflow: f.Workflow})
		for _, r := range rows {
			in.Ruled = append(in.Ruled, analytics.RuledCount{Kind: r.Kind, Approved: int(r.Approved), Rejected: int(r.Rejected)})
		}
		return err
	})
	run("pending", func() error {
		rows, err := s.q.AnalyticsPending(ctx, dbsqlc.AnalyticsPendingParams{Now: f.Now, Kind: f.Kind, Workflow: f.Workflow})
		for _, r := range rows {
			in.Pending = append(in.Pending, analytics.PendingGroup{Kind: r.Kind, Day: r.Day, Band: int(r.Band), N: int(r.N),
				OldestSeconds: r.OldestSeconds})
		}
		return err
	})
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return analytics.Build(in), nil
}

// RecordInterruptView notes that viewer opened the interrupt now, unless
// they had opened it before (only the first view counts).
func (s *Store) RecordInterruptView(ctx context.Context, interruptID, viewer string) error {
	id, ok := parseID(interruptID)
	if !ok || viewer == "" {
		return nil
	}
	if err := s.q.InterruptViewRecord(ctx, dbsqlc.InterruptViewRecordParams{InterruptID: id, Viewer: viewer}); err != nil {
		return fmt.Errorf("record view of interrupt %s: %w", interruptID, err)
	}
	return nil
}

// PendingStat is the backlog of one interrupt kind.
type PendingStat struct {
	Pending       int
	OldestSeconds float64
}

// PendingInterruptStats counts the pending interrupts by kind with the age
// of the oldest, by the database's clock.
func (s *Store) PendingInterruptStats(ctx context.Context) (map[string]PendingStat, error) {
	rows, err := s.q.InterruptPendingStats(ctx)
	if err != nil {
		return nil, fmt.Errorf("pending interrupt stats: %w", err)
	}
	out := make(map[string]PendingStat, len(rows))
	for _, r := range rows {
		out[r.Kind] = PendingStat{Pending: int(r.Pending), OldestSeconds: r.OldestSeconds}
	}
	return out, nil
}

// Behind selects the interrupts behind a figure of the analytics.
type Behind struct {
	Filter analytics.Filter
	// What: raised, pending, decided, expired, cancelled.
	What string
	// Actions narrow decided (approve, reject, edit, respond); empty: all.
	Actions []string
	Decider string
	Fast    bool
	Limit   int
}

// BehindRow is one interrupt behind a figure, with its task and decision.
type BehindRow struct {
	InterruptID, TaskID, Kind, Node, Status string
	Title, Workflow                         string
	Raised                                  time.Time
	Action, DecidedBy                       string
	Decided                                 *time.Time
	Closed                                  *time.Time
}

// AnalyticsBehind lists the interrupts behind a figure, newest first.
func (s *Store) AnalyticsBehind(ctx context.Context, b Behind) ([]BehindRow, error) {
	f := b.Filter
	limit := int32(max(b.Limit, 1))
	var out []BehindRow
	switch b.What {
	case "raised", "pending":
		status, since, until := "", f.Since, f.Until
		if b.What == "pending" {
			status, since, until = "pending", time.Unix(0, 0), time.Now().Add(24*time.Hour)
		}
		rows, err := s.q.AnalyticsRaisedList(ctx, dbsqlc.AnalyticsRaisedListParams{Since: since, Until: until,
			Kind: f.Kind, Workflow: f.Workflow, Status: status, MaxRows: limit})
		if err != nil {
			return nil, fmt.Errorf("analytics %s list: %w", b.What, err)
		}
		for _, r := range rows {
			row := BehindRow{InterruptID: r.ID.String(), TaskID: r.TaskID.String(), Kind: r.Kind, Node: r.Node,
				Status: r.Status, Title: r.Title, Workflow: r.Workflow, Raised: r.CreatedAt, Decided: r.DDecidedAt}
			if r.DAction != nil {
				row.Action = *r.DAction
			}
			if r.DDecidedBy != nil {
				row.DecidedBy = *r.DDecidedBy
			}
			out = append(out, row)
		}
	case "decided":
		actions := b.Actions
		if actions == nil {
			actions = []string{}
		}
		rows, err := s.q.AnalyticsDecisionList(ctx, dbsqlc.AnalyticsDecisionListParams{Since: f.Since, Until: f.Until,
			Kind: f.Kind, Workflow: f.Workflow, Actions: actions, Decider: b.Decider, Fast: b.Fast, MaxRows: limit})
		if err != nil {
			return nil, fmt.Errorf("analytics decision list: %w", err)
		}
		for _, r := range rows {
			out = append(out, BehindRow{InterruptID: r.ID.String(), TaskID: r.TaskID.String(), Kind: r.Kind, Node: r.Node,
				Status: r.Status, Title: r.Title, Workflow: r.Workflow, Raised: r.CreatedAt, Action: r.DAction,
				DecidedBy: r.DDecidedBy, Decided: &r.DDecidedAt})
		}
	case "expired", "cancelled":
		rows, err := s.q.AnalyticsClosedList(ctx, dbsqlc.AnalyticsClosedListParams{Status: b.What, Since: f.Since,
			Until: f.Until, Kind: f.Kind, Workflow: f.Workflow, MaxRows: limit})
		if err != nil {
			return nil, fmt.Errorf("analytics %s list: %w", b.What, err)
		}
		for _, r := range rows {
			out = append(out, BehindRow{InterruptID: r.ID.String(), TaskID: r.TaskID.String(), Kind: r.Kind, Node: r.Node,
				Status: r.Status, Title: r.Title, Workflow: r.Workflow, Raised: r.CreatedAt, Closed: r.ResolvedAt})
		}
	default:
		return nil, fmt.Errorf("analytics: unknown figure %q", b.What)
	}
	return out, nil
}

// FoldAnalytics moves the analytics deltas into the rollups and returns
// how many it moved. Reports fold first; cmd/web also folds once a minute
// so that the deltas stay few.
func (s *Store) FoldAnalytics(ctx context.Context) (int, error) {
	n, err := s.q.AnalyticsFold(ctx)
	if err != nil {
		return 0, fmt.Errorf("fold analytics: %w", err)
	}
	return int(n), nil
}
