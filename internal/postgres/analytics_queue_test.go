package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/internal/analytics/analyticstest"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

func count(t *testing.T, pool *pgxpool.Pool, sql string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// TestAnalyticsDecisionQueued: a decision's transaction only queues the
// decision (00095); the fold works its figures out, and a report counts
// every decision committed before it.
func TestAnalyticsDecisionQueued(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	analyticstest.Seed(t, pool)
	const decisions = `SELECT count(*) FROM decisions`
	if q, d := count(t, pool, `SELECT count(*) FROM analytics_decision_queue`), count(t, pool, decisions); q != d || q == 0 {
		t.Errorf("%d decisions queued of %d", q, d)
	}
	if n := count(t, pool, `SELECT count(*) FROM analytics_deltas WHERE what = 'decision'`); n != 0 {
		t.Errorf("%d decision deltas written by the decisions' transactions", n)
	}
	// A decided interrupt's closing is the fold's too (00096); the
	// interrupts trigger writes only the closings no decision makes.
	const undecided = `SELECT count(*) FROM interrupts WHERE status IN ('expired', 'cancelled')`
	if n, u := count(t, pool, `SELECT count(*) FROM analytics_deltas WHERE what = 'closed'`), count(t, pool, undecided); n != u || n == count(t, pool, `SELECT count(*) FROM interrupts WHERE status <> 'pending'`) {
		t.Errorf("%d closing deltas written before the fold, want one per expired or cancelled interrupt (%d)", n, u)
	}
	if _, err := postgres.NewStore(pool, postgres.Options{}).Analytics(context.Background(), mustFilter(t, "2026-01-05", "2026-01-08", "", "")); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, `SELECT count(*) FROM analytics_decision_queue`) + count(t, pool, `SELECT count(*) FROM analytics_deltas`); n != 0 {
		t.Errorf("%d rows left in the queue and deltas after a report", n)
	}
	if n, d := count(t, pool, `SELECT coalesce(sum(decisions), 0)::int FROM analytics_decider_days`), count(t, pool, decisions); n != d {
		t.Errorf("rollups count %d decisions of %d", n, d)
	}
	if n, c := count(t, pool, `SELECT coalesce(sum(closed), 0)::int FROM analytics_interrupts`), count(t, pool, `SELECT count(*) FROM interrupts WHERE status <> 'pending'`); n != c {
		t.Errorf("rollups count %d closed interrupts of %d", n, c)
	}
}

// TestAnalyticsRejectionsFoldedAtOnce: a task cycling through two gates,
// each rejected a few times before its approval (an edit is an approval),
// gives the same rejection counts whether its decisions are folded one at
// a time, all at once, or rebuilt from the raw rows: the fold counts a
// gate's rejections since its own previous approval, whatever the other
// gate and the decisions after the approval did.
func TestAnalyticsRejectionsFoldedAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// rounds of gate a then gate b: how many rejections before the
	// approval, and whether the approval is an edit.
	rounds := []struct {
		a, b   int
		aEdits bool
	}{{2, 0, false}, {0, 1, true}, {3, 0, false}, {0, 0, false}, {1, 2, true}}
	approvals := func(foldEach bool) string {
		pool := pgtest.NewPool(t)
		exec := func(sql string, args ...any) {
			t.Helper()
			if _, err := pool.Exec(ctx, sql, args...); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
		task := uuid.NewString()
		exec(`INSERT INTO tasks (id, workflow, title, status) VALUES ($1, 'cycle', 'cycle', 'waiting')`, task)
		at := time.Date(2026, 1, 6, 9, 0, 0, 0, time.UTC)
		decide := func(node, kind, action string) {
			itr := uuid.NewString()
			exec(`INSERT INTO interrupts (id, task_id, node, kind, iteration, payload, status, created_at)
				VALUES ($1, $2, $3, $4, 1, '{}', 'pending', $5)`, itr, task, node, kind, at)
			at = at.Add(time.Minute)
			exec(`WITH i AS (UPDATE interrupts SET status = 'resolved', resolved_at = $4 WHERE id = $1 RETURNING id, task_id, resolved_at)
				INSERT INTO decisions (interrupt_id, task_id, action, decided_by, decided_at)
				SELECT i.id, i.task_id, $2, $3, i.resolved_at FROM i`, itr, action, "dana", at)
			at = at.Add(time.Minute)
			if foldEach {
				exec(`SELECT gatehouse_analytics_fold()`)
			}
		}
		for _, r := range rounds {
			for range r.a {
				decide("a", "prd", "reject")
			}
			if r.aEdits {
				decide("a", "prd", "edit")
			} else {
				decide("a", "prd", "approve")
			}
			for range r.b {
				decide("b", "plan", "reject")
			}
			decide("b", "plan", "approve")
		}
		exec(`SELECT gatehouse_analytics_fold()`)
		var s string
		snap := `SELECT string_agg(format('%s:%s=%s', kind, rejections, n), ' ' ORDER BY kind, rejections) FROM analytics_approvals`
		if err := pool.QueryRow(ctx, snap).Scan(&s); err != nil {
			t.Fatal(err)
		}
		exec(`SELECT gatehouse_analytics_rebuild()`)
		var rebuilt string
		if err := pool.QueryRow(ctx, snap).Scan(&rebuilt); err != nil {
			t.Fatal(err)
		}
		if rebuilt != s {
			t.Errorf("fold each %v: folded %s, rebuilt %s", foldEach, s, rebuilt)
		}
		return s
	}
	// By hand: gate a was approved after 2, 0, 3, 0, 1 rejections; gate b
	// after 0, 1, 0, 0, 2.
	want := fmt.Sprintf("plan:0=%d plan:1=%d plan:2=%d prd:0=%d prd:1=%d prd:2=%d prd:3=%d", 3, 1, 1, 2, 1, 1, 1)
	if got := approvals(false); got != want {
		t.Errorf("folded at once: %s, want %s", got, want)
	}
	if got := approvals(true); got != want {
		t.Errorf("folded each time: %s, want %s", got, want)
	}
}
