package postgres_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/internal/analytics"
	"github.com/gatehousehq/gatehouse/internal/analytics/analyticstest"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// reportNow is the instant the seeded reports are taken at.
var reportNow = analyticstest.Now

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

// TestAnalyticsFoldedEach: rollups folded a decision at a time (rows
// added to, histograms summed) report what one fold of every delta does.
func TestAnalyticsFoldedEach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	report := func(seed func(testing.TB, *pgxpool.Pool)) map[string]any {
		pool := pgtest.NewPool(t)
		seed(t, pool)
		r, err := postgres.NewStore(pool, postgres.Options{}).Analytics(ctx, mustFilter(t, "2026-01-05", "2026-01-08", "", ""))
		if err != nil {
			t.Fatal(err)
		}
		m := jsonOf(t, r)
		delete(m, "generated_at")
		return m
	}
	once, each := report(analyticstest.Seed), report(analyticstest.SeedFoldingEach)
	a, _ := json.Marshal(once)
	b, _ := json.Marshal(each)
	if !bytes.Equal(a, b) {
		t.Errorf("folded at once:\n%s\nfolded each time:\n%s", a, b)
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
	analyticstest.Seed(t, pool)
	store := postgres.NewStore(pool, postgres.Options{})
	ctx := context.Background()

	r, err := store.Analytics(ctx, mustFilter(t, "2026-01-05", "2026-01-08", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	got := jsonOf(t, r)
	equalJSON(t, "since", got["since"], `"2026-01-05T00:00:00Z"`)
	equalJSON(t, "until", got["until"], `"2026-01-09T00:00:00Z"`)
	equalJSON(t, "kinds", got["kinds"], `[
	 {"kind":"merge","raised":0,"approved":0,"rejected":0,"edited":0,"answered":0,"expired":0,"auto_approved":0,"auto_rejected":0,"pending":1,
	  "oldest_pending_seconds":1771200,"time_to_decision_seconds":{"p50":null,"p90":null,"max":null},
	  "rejections_before_approval":{},"rejection_rate":null},
	 {"kind":"plan","raised":4,"approved":2,"rejected":2,"edited":0,"answered":0,"expired":0,"auto_approved":0,"auto_rejected":0,"pending":0,
	  "oldest_pending_seconds":null,"time_to_decision_seconds":{"p50":20,"p90":300,"max":300},
	  "rejections_before_approval":{"0":1,"1":0,"2":1},"rejection_rate":0.5},
	 {"kind":"prd","raised":7,"approved":2,"rejected":1,"edited":1,"answered":0,"expired":1,"auto_approved":0,"auto_rejected":0,"pending":1,
	  "oldest_pending_seconds":86400,"time_to_decision_seconds":{"p50":120,"p90":3600,"max":3600.5},
	  "rejections_before_approval":{"0":2,"1":1},"rejection_rate":0.25},
	 {"kind":"question","raised":1,"approved":0,"rejected":0,"edited":0,"answered":1,"expired":0,"auto_approved":0,"auto_rejected":0,"pending":0,
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

	t.Run("RebuildEqualsTriggers", func(t *testing.T) {
		// gatehouse_analytics_rebuild (the migration's backfill, and the
		// bulk loader's) computes what the triggers kept.
		snap := func() string {
			var s string
			err := pool.QueryRow(ctx, `SELECT concat_ws('|',
				(SELECT string_agg(format('%s', a), ',' ORDER BY a::text) FROM analytics_interrupts a),
				(SELECT string_agg(format('%s', a), ',' ORDER BY a::text) FROM analytics_kind_days a),
				(SELECT string_agg(format('%s', a), ',' ORDER BY a::text) FROM analytics_approvals a),
				(SELECT string_agg(format('%s', a), ',' ORDER BY a::text) FROM analytics_decider_days a))`).Scan(&s)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		before := snap()
		if _, err := pool.Exec(ctx, `SELECT gatehouse_analytics_rebuild()`); err != nil {
			t.Fatal(err)
		}
		if after := snap(); after != before {
			t.Errorf("rebuilt rollups differ:\ntriggers %s\nrebuild  %s", before, after)
		}
	})

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
				"rejections_before_approval": k["rejections_before_approval"], "rejection_rate": k["rejection_rate"],
				"auto_approved": k["auto_approved"], "auto_rejected": k["auto_rejected"]}
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
		 "answered":0,"expired":0,"auto_approved":0,"auto_rejected":0,"pending":0,"oldest_pending_seconds":null,
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
	store := postgres.NewStore(pgtest.NewPool(t), postgres.Options{})
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
