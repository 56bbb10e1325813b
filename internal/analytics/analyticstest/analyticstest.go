// Package analyticstest seeds a database with a history of interrupts and
// decisions at chosen instants, for the tests of the analytics.
//
// Test support: it writes SQL on the pool it is given and imports nothing
// of the module.
package analyticstest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Now is the instant the seeded reports are taken at (the pending
// interrupts' ages are measured at it).
var Now = time.Date(2026, 1, 9, 12, 0, 0, 0, time.UTC)

// history writes interrupts and decisions at chosen instants, the way the
// product's statements do (DecisionRecord: the interrupt resolved and the
// decision inserted at one instant), so that the rollup triggers see what
// they see in production.
type history struct {
	t    testing.TB
	pool *pgxpool.Pool
	// foldEach: fold the analytics deltas after every decision and
	// closing, so that rollup rows are added to, not only created.
	foldEach bool
}

func (h history) folded() {
	if h.foldEach {
		h.exec(`SELECT gatehouse_analytics_fold()`)
	}
}

func (h history) exec(sql string, args ...any) {
	h.t.Helper()
	if _, err := h.pool.Exec(context.Background(), sql, args...); err != nil {
		h.t.Fatalf("%s: %v", sql, err)
	}
}

func (h history) task(workflow string) string {
	h.t.Helper()
	id := uuid.NewString()
	h.exec(`INSERT INTO tasks (id, workflow, title, status) VALUES ($1, $2, $3, 'waiting')`, id, workflow, "task "+id[:8])
	return id
}

func (h history) raise(task, kind, node string, at time.Time) string {
	h.t.Helper()
	id := uuid.NewString()
	h.exec(`INSERT INTO interrupts (id, task_id, node, kind, iteration, payload, status, created_at)
		VALUES ($1, $2, $3, $4, 1, '{}', 'pending', $5)`, id, task, node, kind, at)
	return id
}

func (h history) view(itr, who string, at time.Time) {
	h.t.Helper()
	h.exec(`INSERT INTO interrupt_views (interrupt_id, viewer, first_viewed_at) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING`, itr, who, at)
}

func (h history) decide(itr, action, who string, at time.Time) {
	h.t.Helper()
	h.exec(`WITH i AS (
		UPDATE interrupts SET status = 'resolved', resolved_at = $4 WHERE id = $1 AND status = 'pending'
		RETURNING id, task_id, resolved_at)
	INSERT INTO decisions (interrupt_id, task_id, action, decided_by, decided_at)
	SELECT i.id, i.task_id, $2, $3, i.resolved_at FROM i`, itr, action, who, at)
	h.folded()
}

func (h history) close(itr, status string, at time.Time) {
	h.t.Helper()
	h.exec(`UPDATE interrupts SET status = $2, resolved_at = $3 WHERE id = $1`, itr, status, at)
	h.folded()
}

// Seed writes the history of the analytics tests: the figures it gives
// for 5–8 January 2026 are worked out by hand in internal/postgres
// (TestAnalyticsExact).
func Seed(t testing.TB, pool *pgxpool.Pool) { seed(history{t: t, pool: pool}) }

// SeedFoldingEach is Seed with the analytics deltas folded into the
// rollups after every decision and closing: the report must not differ.
func SeedFoldingEach(t testing.TB, pool *pgxpool.Pool) {
	seed(history{t: t, pool: pool, foldEach: true})
}

func seed(h history) {
	t := h.t
	t.Helper()
	// SPEC §11 adds the status expired (another migration); allow it here
	// as that migration will.
	h.exec(`ALTER TABLE interrupts DROP CONSTRAINT IF EXISTS interrupts_status_check`)
	d := func(day, hh, mm, ss int, frac time.Duration) time.Time {
		return time.Date(2026, 1, 5+day, hh, mm, ss, 0, time.UTC).Add(frac)
	}
	// feature / prd
	t1 := h.task("feature")
	a1 := h.raise(t1, "prd", "requirements", d(0, 10, 0, 0, 0))
	h.view(a1, "alice", d(0, 10, 0, 25, 0))
	h.decide(a1, "reject", "alice", d(0, 10, 0, 30, 0)) // 30 s, 5 s after opening: fast
	a2 := h.raise(t1, "prd", "requirements", d(0, 10, 1, 0, 0))
	h.view(a2, "bob", d(0, 10, 2, 40, 0))
	h.view(a2, "bob", d(0, 10, 2, 55, 0))             // a later view changes nothing
	h.decide(a2, "approve", "bob", d(0, 10, 3, 0, 0)) // 120 s, 20 s after opening; 1 rejection before
	t2 := h.task("feature")
	a3 := h.raise(t2, "prd", "requirements", d(0, 11, 0, 0, 0))
	h.view(a3, "alice", d(0, 11, 59, 55, 0))
	h.view(a3, "bob", d(0, 11, 0, 1, 0))                                   // another person's view is not alice's
	h.decide(a3, "approve", "alice", d(0, 12, 0, 0, 500*time.Millisecond)) // 3600.5 s, 5.5 s after opening: fast
	t3 := h.task("feature")
	a4 := h.raise(t3, "prd", "requirements", d(1, 9, 0, 0, 0))
	h.decide(a4, "edit", "bob", d(1, 9, 2, 7, 0)) // 127 s, never opened
	// feature / plan: rejected twice, then approved
	t4 := h.task("feature")
	b1 := h.raise(t4, "plan", "plan", d(1, 10, 0, 0, 0))
	h.decide(b1, "reject", "alice", d(1, 10, 0, 8, 0)) // 8 s
	b2 := h.raise(t4, "plan", "plan", d(1, 10, 1, 0, 0))
	h.decide(b2, "reject", "alice", d(1, 10, 1, 45, 250*time.Millisecond)) // 45.25 s
	b3 := h.raise(t4, "plan", "plan", d(1, 10, 3, 0, 0))
	h.view(b3, "carol", d(1, 10, 7, 49, 0))
	h.decide(b3, "approve", "carol", d(1, 10, 8, 0, 0)) // 300 s, 11 s after opening: not fast
	// analyze / question
	t5 := h.task("analyze")
	c1 := h.raise(t5, "question", "ask", d(2, 8, 0, 0, 0))
	h.decide(c1, "respond", "carol", d(2, 8, 0, 45, 500*time.Millisecond)) // 45.5 s
	// pm / plan
	t11 := h.task("pm")
	w1 := h.raise(t11, "plan", "plan_steps", d(2, 12, 0, 0, 0))
	h.view(w1, "alice", d(2, 12, 0, 10, 0))
	h.decide(w1, "approve", "alice", d(2, 12, 0, 20, 0)) // 20 s, 10 s after opening: fast (at most 10 s)
	// closed without a decision
	t6 := h.task("feature")
	e1 := h.raise(t6, "prd", "requirements", d(2, 9, 0, 0, 0))
	h.close(e1, "expired", d(3, 9, 0, 0, 0))
	t7 := h.task("feature")
	e2 := h.raise(t7, "prd", "requirements", d(2, 10, 0, 0, 0))
	h.close(e2, "cancelled", d(2, 11, 0, 0, 0))
	// pending: one raised in the period, one before it
	h.raise(h.task("feature"), "prd", "requirements", d(3, 12, 0, 0, 0))
	h.raise(h.task("feature"), "merge", "merge", time.Date(2025, 12, 20, 0, 0, 0, 0, time.UTC))
	// after the period
	t10 := h.task("feature")
	o1 := h.raise(t10, "prd", "requirements", time.Date(2026, 2, 14, 10, 0, 0, 0, time.UTC))
	h.decide(o1, "approve", "alice", time.Date(2026, 2, 14, 10, 0, 10, 0, time.UTC))
}

// combo is a workflow's gate or question, with its share of the traffic.
type combo struct {
	workflow, kind, node string
	weight               int
}

var combos = []combo{
	{"feature", "prd", "requirements", 6}, {"feature", "plan", "plan", 5}, {"feature", "merge", "merge", 4},
	{"sdd", "sdd", "human_review", 3}, {"pm", "plan", "plan_steps", 2}, {"analyze", "question", "ask", 3},
	{"slogan", "review", "reviewer", 2},
}

// LoadStats is what Load wrote.
type LoadStats struct {
	Tasks, Interrupts, Decisions, Pending, Views int
}

// Load fills the database with a history of n decisions over the days
// before now, by COPY, the way a busy team's would look: seven gates and
// questions of five workflows, tasks whose gate is rejected a few times
// before it is approved, 40 deciders (a few decide most), times to
// decision spread log-normally around 20 minutes (seconds to days), a
// third of the decisions opened on the desk first (some within 10 s), and
// pendingN interrupts waiting. The rollup triggers are off during the
// load; gatehouse_analytics_rebuild computes the rollups after it, as the
// migration does for an existing history.
func Load(ctx context.Context, pool *pgxpool.Pool, n, days, pendingN int, now time.Time) (LoadStats, error) {
	rng := rand.New(rand.NewPCG(12, uint64(n)))
	var st LoadStats
	var tasks, itrs, decs, views [][]any
	start := now.Add(-time.Duration(days) * 24 * time.Hour)
	span := float64(days*24) * float64(time.Hour)
	total := 0
	for _, c := range combos {
		total += c.weight
	}
	pick := func() combo {
		w := rng.IntN(total)
		for _, c := range combos {
			if w < c.weight {
				return c
			}
			w -= c.weight
		}
		return combos[0]
	}
	decider := func() string {
		f := rng.Float64()
		return fmt.Sprintf("user%02d", 1+int(f*f*40))
	}
	wait := func() time.Duration {
		s := math.Exp(math.Log(1200) + 1.6*rng.NormFloat64())
		s = min(max(s, 1), 14*86400)
		return time.Duration(s * float64(time.Second))
	}
	for st.Decisions < n {
		c := pick()
		tid := uuid.New()
		at := start.Add(time.Duration(rng.Float64() * span))
		tasks = append(tasks, []any{tid, c.workflow, "Loaded task " + tid.String()[:8], "succeeded", at, at})
		st.Tasks++
		for it := 1; st.Decisions < n; it++ {
			iid := uuid.New()
			dec := at.Add(wait())
			if dec.After(now) {
				dec = now.Add(-time.Second)
				if !dec.After(at) {
					break
				}
			}
			action := "approve"
			switch {
			case c.kind == "question":
				action = "respond"
			case it < 5 && rng.Float64() < 0.25:
				action = "reject"
			case rng.Float64() < 0.08:
				action = "edit"
			}
			who := decider()
			itrs = append(itrs, []any{iid, tid, c.node, c.kind, it, "{}", "resolved", at, dec})
			decs = append(decs, []any{uuid.New(), iid, tid, action, "", who, dec})
			st.Interrupts++
			st.Decisions++
			if rng.Float64() < 0.33 {
				seen := dec.Add(-time.Duration((1 + rng.Float64()*119) * float64(time.Second)))
				if seen.Before(at) {
					seen = at
				}
				views = append(views, []any{iid, who, seen})
				st.Views++
			}
			if action != "reject" {
				break
			}
			at = dec.Add(time.Minute)
		}
	}
	for range pendingN {
		c := pick()
		tid, iid := uuid.New(), uuid.New()
		at := now.Add(-time.Duration(rng.Float64() * 10 * 24 * float64(time.Hour)))
		tasks = append(tasks, []any{tid, c.workflow, "Waiting task " + tid.String()[:8], "waiting", at, at})
		itrs = append(itrs, []any{iid, tid, c.node, c.kind, 1, "{}", "pending", at, nil})
		st.Tasks++
		st.Interrupts++
		st.Pending++
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return st, err
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return st, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, q := range []string{
		`ALTER TABLE interrupts DISABLE TRIGGER interrupts_analytics`,
		`ALTER TABLE decisions DISABLE TRIGGER decisions_analytics`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return st, fmt.Errorf("%s: %w", q, err)
		}
	}
	for _, cp := range []struct {
		table string
		cols  []string
		rows  [][]any
	}{
		{"tasks", []string{"id", "workflow", "title", "status", "created_at", "updated_at"}, tasks},
		{"interrupts", []string{"id", "task_id", "node", "kind", "iteration", "payload", "status", "created_at", "resolved_at"}, itrs},
		{"decisions", []string{"id", "interrupt_id", "task_id", "action", "feedback", "decided_by", "decided_at"}, decs},
		{"interrupt_views", []string{"interrupt_id", "viewer", "first_viewed_at"}, views},
	} {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{cp.table}, cp.cols, pgx.CopyFromRows(cp.rows)); err != nil {
			return st, fmt.Errorf("copy %s: %w", cp.table, err)
		}
	}
	for _, q := range []string{
		`ALTER TABLE interrupts ENABLE TRIGGER interrupts_analytics`,
		`ALTER TABLE decisions ENABLE TRIGGER decisions_analytics`,
		`SELECT gatehouse_analytics_rebuild()`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return st, fmt.Errorf("%s: %w", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return st, err
	}
	_, err = conn.Exec(ctx, `ANALYZE`)
	return st, err
}
