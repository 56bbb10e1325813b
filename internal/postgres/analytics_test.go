package postgres_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/internal/analytics"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// history writes interrupts and decisions at chosen instants, the way the
// product's statements do (DecisionRecord: the interrupt resolved and the
// decision inserted at one instant), so that the rollup triggers see what
// they see in production.
type history struct {
	t    *testing.T
	pool *pgxpool.Pool
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
}

func (h history) close(itr, status string, at time.Time) {
	h.t.Helper()
	h.exec(`UPDATE interrupts SET status = $2, resolved_at = $3 WHERE id = $1`, itr, status, at)
}

// seedHistory is the history of TestAnalyticsExact; the figures it
// should give are worked out there by hand.
func seedHistory(t *testing.T, pool *pgxpool.Pool) {
	h := history{t, pool}
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

// reportNow is the instant the seeded reports are taken at.
var reportNow = time.Date(2026, 1, 9, 12, 0, 0, 0, time.UTC)

func mustFilter(t *testing.T, since, until, kind, workflow string) analytics.Filter {
	t.Helper()
	f, err := analytics.ParseFilter(since, until, kind, workflow, reportNow)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// jsonOf is the report as the API writes it, decoded generically so that
// the test compares what a client sees (nulls, key names, key order of the
// histogram aside).
func jsonOf(t *testing.T, r *analytics.Report) map[string]any {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func asJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

func equalJSON(t *testing.T, what string, got any, want string) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(asJSON(t, want))
	if !bytes.Equal(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// TestAnalyticsExact: a history with known timings gives, figure by
// figure, what was worked out by hand. Times to decision are kept to two
// significant digits (127 s counts as 120 s, 45.25 s as 45 s), a decider's
// median to one (3600.5 s as 3000 s); maxima are exact; percentiles are
// nearest-rank.
func TestAnalyticsExact(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	seedHistory(t, pool)
	store := postgres.NewStore(pool)
	ctx := context.Background()

	r, err := store.Analytics(ctx, mustFilter(t, "2026-01-05", "2026-01-08", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	got := jsonOf(t, r)
	equalJSON(t, "since", got["since"], `"2026-01-05T00:00:00Z"`)
	equalJSON(t, "until", got["until"], `"2026-01-09T00:00:00Z"`)
	equalJSON(t, "kinds", got["kinds"], `[
	 {"kind":"merge","raised":0,"approved":0,"rejected":0,"edited":0,"answered":0,"expired":0,"pending":1,
	  "oldest_pending_seconds":1771200,"time_to_decision_seconds":{"p50":null,"p90":null,"max":null},
	  "rejections_before_approval":{},"rejection_rate":null},
	 {"kind":"plan","raised":4,"approved":2,"rejected":2,"edited":0,"answered":0,"expired":0,"pending":0,
	  "oldest_pending_seconds":null,"time_to_decision_seconds":{"p50":20,"p90":300,"max":300},
	  "rejections_before_approval":{"0":1,"1":0,"2":1},"rejection_rate":0.5},
	 {"kind":"prd","raised":7,"approved":2,"rejected":1,"edited":1,"answered":0,"expired":1,"pending":1,
	  "oldest_pending_seconds":86400,"time_to_decision_seconds":{"p50":120,"p90":3600,"max":3600.5},
	  "rejections_before_approval":{"0":2,"1":1},"rejection_rate":0.25},
	 {"kind":"question","raised":1,"approved":0,"rejected":0,"edited":0,"answered":1,"expired":0,"pending":0,
	  "oldest_pending_seconds":null,"time_to_decision_seconds":{"p50":45,"p90":45,"max":45.5},
	  "rejections_before_approval":{},"rejection_rate":null}]`)
	equalJSON(t, "deciders", got["deciders"], `[
	 {"decider":"alice","decisions":5,"approvals":2,"rejections":3,"median_seconds":30,"fast_decisions":3},
	 {"decider":"bob","decisions":2,"approvals":2,"rejections":0,"median_seconds":100,"fast_decisions":0},
	 {"decider":"carol","decisions":2,"approvals":1,"rejections":0,"median_seconds":40,"fast_decisions":0}]`)
	equalJSON(t, "days", got["days"], `[
	 {"day":"2026-01-05","kind":"prd","raised":3,"decided":3,"p50_seconds":120},
	 {"day":"2026-01-06","kind":"plan","raised":3,"decided":3,"p50_seconds":45},
	 {"day":"2026-01-06","kind":"prd","raised":1,"decided":1,"p50_seconds":120},
	 {"day":"2026-01-07","kind":"plan","raised":1,"decided":1,"p50_seconds":20},
	 {"day":"2026-01-07","kind":"prd","raised":2,"decided":0,"p50_seconds":null},
	 {"day":"2026-01-07","kind":"question","raised":1,"decided":1,"p50_seconds":45},
	 {"day":"2026-01-08","kind":"prd","raised":1,"decided":0,"p50_seconds":null}]`)
	if len(r.Pending) != 2 || r.Pending[0] != (analytics.PendingLoad{Kind: "merge", Bands: [4]int{0, 0, 0, 1}}) ||
		r.Pending[1] != (analytics.PendingLoad{Kind: "prd", Bands: [4]int{0, 0, 1, 0}}) {
		t.Errorf("pending load: %+v", r.Pending)
	}

	t.Run("CSVEqualsJSON", func(t *testing.T) {
		b, err := r.CSV()
		if err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		kinds := got["kinds"].([]any)
		if len(rows) != len(kinds)+1 {
			t.Fatalf("%d rows for %d kinds:\n%s", len(rows), len(kinds), b)
		}
		for i, k := range kinds {
			k := k.(map[string]any)
			ttd := k["time_to_decision_seconds"].(map[string]any)
			want := map[string]any{"kind": k["kind"], "raised": k["raised"], "approved": k["approved"],
				"rejected": k["rejected"], "edited": k["edited"], "answered": k["answered"], "expired": k["expired"],
				"pending": k["pending"], "oldest_pending_seconds": k["oldest_pending_seconds"],
				"time_to_decision_p50": ttd["p50"], "time_to_decision_p90": ttd["p90"], "time_to_decision_max": ttd["max"],
				"rejections_before_approval": k["rejections_before_approval"], "rejection_rate": k["rejection_rate"]}
			if len(rows[0]) != len(want) {
				t.Fatalf("header %v", rows[0])
			}
			for j, col := range rows[0] {
				cell := rows[i+1][j]
				var v any
				switch {
				case col == "kind":
					v = cell
				case cell == "":
					v = nil
				default:
					v = asJSON(t, cell)
				}
				g, _ := json.Marshal(v)
				w, _ := json.Marshal(want[col])
				if !bytes.Equal(g, w) {
					t.Errorf("kind %v, column %s: CSV %s, JSON %s", k["kind"], col, g, w)
				}
			}
		}
	})

	t.Run("Workflow", func(t *testing.T) {
		r, err := store.Analytics(ctx, mustFilter(t, "2026-01-05", "2026-01-08", "", "feature"))
		if err != nil {
			t.Fatal(err)
		}
		got := jsonOf(t, r)
		kinds := map[string]any{}
		for _, k := range got["kinds"].([]any) {
			kinds[k.(map[string]any)["kind"].(string)] = k
		}
		if _, ok := kinds["question"]; ok || len(kinds) != 3 {
			t.Errorf("kinds of feature: %v", kinds)
		}
		equalJSON(t, "feature plan", kinds["plan"], `{"kind":"plan","raised":3,"approved":1,"rejected":2,"edited":0,
		 "answered":0,"expired":0,"pending":0,"oldest_pending_seconds":null,
		 "time_to_decision_seconds":{"p50":45,"p90":300,"max":300},"rejections_before_approval":{"0":0,"1":0,"2":1},
		 "rejection_rate":0.6666666666666666}`)
		equalJSON(t, "feature deciders", got["deciders"], `[
		 {"decider":"alice","decisions":4,"approvals":1,"rejections":3,"median_seconds":30,"fast_decisions":2},
		 {"decider":"bob","decisions":2,"approvals":2,"rejections":0,"median_seconds":100,"fast_decisions":0},
		 {"decider":"carol","decisions":1,"approvals":1,"rejections":0,"median_seconds":300,"fast_decisions":0}]`)
	})

	t.Run("Kind", func(t *testing.T) {
		r, err := store.Analytics(ctx, mustFilter(t, "2026-01-05", "2026-01-08", "prd", ""))
		if err != nil {
			t.Fatal(err)
		}
		got := jsonOf(t, r)
		if ks := got["kinds"].([]any); len(ks) != 1 || ks[0].(map[string]any)["raised"] != 7.0 {
			t.Errorf("kinds of prd: %v", ks)
		}
		equalJSON(t, "prd deciders", got["deciders"], `[
		 {"decider":"alice","decisions":2,"approvals":1,"rejections":1,"median_seconds":30,"fast_decisions":2},
		 {"decider":"bob","decisions":2,"approvals":2,"rejections":0,"median_seconds":100,"fast_decisions":0}]`)
	})

	t.Run("OneDay", func(t *testing.T) {
		// An RFC 3339 period within one day covers that whole day.
		r, err := store.Analytics(ctx, mustFilter(t, "2026-01-06T09:30:00Z", "2026-01-06T10:00:00+00:00", "", ""))
		if err != nil {
			t.Fatal(err)
		}
		got := jsonOf(t, r)
		equalJSON(t, "until", got["until"], `"2026-01-07T00:00:00Z"`)
		equalJSON(t, "days", got["days"], `[
		 {"day":"2026-01-06","kind":"plan","raised":3,"decided":3,"p50_seconds":45},
		 {"day":"2026-01-06","kind":"prd","raised":1,"decided":1,"p50_seconds":120}]`)
	})

	t.Run("EmptyPeriod", func(t *testing.T) {
		r, err := store.Analytics(ctx, mustFilter(t, "2025-06-01", "2025-06-30", "", ""))
		if err != nil {
			t.Fatal(err)
		}
		if !r.EmptyPeriod() || len(r.Deciders) != 0 || len(r.Days) != 0 {
			t.Errorf("June 2025 should be empty: %+v", r)
		}
		// The backlog is now's, whatever the period.
		for _, k := range r.Kinds {
			if k.Raised != 0 || k.Decided() != 0 || (k.Kind != "prd" && k.Kind != "merge") || k.Pending != 1 {
				t.Errorf("kind in an empty period: %+v", k)
			}
		}
	})

	t.Run("Behind", func(t *testing.T) {
		f := mustFilter(t, "2026-01-05", "2026-01-08", "", "")
		count := func(b postgres.Behind) int {
			b.Filter, b.Limit = f, 100
			rows, err := store.AnalyticsBehind(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			return len(rows)
		}
		// Each figure's drill-down lists as many interrupts as the figure
		// counts.
		for _, c := range []struct {
			b    postgres.Behind
			want int
		}{
			{postgres.Behind{What: "raised"}, 12},
			{postgres.Behind{What: "pending"}, 2},
			{postgres.Behind{What: "decided"}, 9},
			{postgres.Behind{What: "decided", Actions: []string{"reject"}}, 3},
			{postgres.Behind{What: "decided", Decider: "alice"}, 5},
			{postgres.Behind{What: "decided", Decider: "alice", Fast: true}, 3},
			{postgres.Behind{What: "expired"}, 1},
		} {
			if n := count(c.b); n != c.want {
				t.Errorf("%+v: %d rows, want %d", c.b, n, c.want)
			}
		}
	})
}

// TestAnalyticsEmpty: a database with no history gives empty lists, not
// nulls.
func TestAnalyticsEmpty(t *testing.T) {
	t.Parallel()
	store := postgres.NewStore(pgtest.NewPool(t))
	r, err := store.Analytics(context.Background(), mustFilter(t, "", "", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"kinds", "deciders", "days"} {
		if string(m[k]) != "[]" {
			t.Errorf("%s: %s", k, m[k])
		}
	}
	if !r.EmptyPeriod() || r.Until.Sub(r.Since) != 30*24*time.Hour || !r.Until.Equal(analytics.Day(reportNow).AddDate(0, 0, 1)) {
		t.Errorf("default period: %v – %v", r.Since, r.Until)
	}
}

// TestDurationCodes: the SQL functions that code durations in the rollups
// and the Go functions that decode them agree, and a code's lower bound is
// the value with its digits beyond the second (first) cut off.
func TestDurationCodes(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	values := []float64{0, 0.001, 0.0099, 0.05, 0.099, 0.1, 0.1234, 0.999, 1, 1.05, 9.99, 10, 45.25, 45.5, 99.9, 127,
		3600, 3600.5, 11220, 86399.999, 86400, 604800, 31536000}
	for _, v := range values {
		var c, c1 int
		if err := pool.QueryRow(context.Background(), `SELECT gatehouse_duration_code($1), gatehouse_duration_code1($1)`, v).
			Scan(&c, &c1); err != nil {
			t.Fatal(err)
		}
		if c != analytics.Code(v) || c1 != analytics.Code1(v) {
			t.Errorf("%v: SQL codes %d %d, Go %d %d", v, c, c1, analytics.Code(v), analytics.Code1(v))
		}
		lo, lo1 := analytics.CodeSeconds(c), analytics.Code1Seconds(c1)
		if lo > v || analytics.CodeSeconds(c+1) <= v || lo1 > v || analytics.Code1Seconds(c1+1) <= v {
			t.Errorf("%v: codes %d (%v) and %d (%v) do not bound it", v, c, lo, c1, lo1)
		}
	}
	for v, want := range map[float64]float64{127: 120, 45.25: 45, 3600.5: 3600, 11220: 11000, 0.1234: 0.12, 0.05: 0.05} {
		if got := analytics.CodeSeconds(analytics.Code(v)); got != want {
			t.Errorf("CodeSeconds(Code(%v)) = %v, want %v", v, got, want)
		}
	}
	for v, want := range map[float64]float64{127: 100, 45.5: 40, 3600.5: 3000, 8: 8} {
		if got := analytics.Code1Seconds(analytics.Code1(v)); got != want {
			t.Errorf("Code1Seconds(Code1(%v)) = %v, want %v", v, got, want)
		}
	}
}
