package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/analytics/analyticstest"
)

// BenchmarkAnalytics90Days: GET /analytics (the page: every query of the
// report, the charts drawn, the HTML rendered) for the last 90 days of a
// history of 1,000,000 decisions loaded by COPY, with 1,000 interrupts
// pending. Target (issue 12): p95 ≤ 300 ms. It also reports the JSON API's
// p95 on the same data.
func BenchmarkAnalytics90Days(b *testing.B) {
	e := setup(b, withRunner())
	ctx := context.Background()
	start := time.Now()
	st, err := analyticstest.Load(ctx, e.pool, 1_000_000, 90, 1000, time.Now())
	if err != nil {
		b.Fatalf("load: %v", err)
	}
	b.Logf("loaded %+v in %v", st, time.Since(start).Round(time.Millisecond))
	var rollup int
	if err := e.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM analytics_kind_days) + (SELECT count(*) FROM analytics_decider_days)
		+ (SELECT count(*) FROM analytics_interrupts) + (SELECT count(*) FROM analytics_approvals)`).Scan(&rollup); err != nil {
		b.Fatal(err)
	}
	b.Logf("rollup rows: %d", rollup)

	h := e.srvHandler()
	sess := e.session(defaultUser)
	q := url.Values{"since": {time.Now().UTC().AddDate(0, 0, -89).Format(time.DateOnly)}}.Encode()
	get := func(path, want string) time.Duration {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.AddCookie(sess.cookie)
		rec := httptest.NewRecorder()
		t0 := time.Now()
		h.ServeHTTP(rec, req)
		d := time.Since(t0)
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
		}
		if want != "" && !strings.Contains(rec.Body.String(), want) {
			b.Fatalf("GET %s: no %q in the answer", path, want)
		}
		return d
	}
	page, api := "/analytics?"+q, "/api/v1/analytics?"+q
	for range 3 { // warm the pool, the plans and the caches
		get(page, `id="chart-trend"`)
		get(api, `"deciders"`)
	}
	var pageTimes, apiTimes []time.Duration
	b.ResetTimer()
	for b.Loop() {
		pageTimes = append(pageTimes, get(page, ""))
		apiTimes = append(apiTimes, get(api, ""))
	}
	b.StopTimer()
	reportPercentiles(b, pageTimes, "p50_ms", 0.50)
	reportPercentiles(b, pageTimes, "p95_ms", 0.95)
	reportPercentiles(b, apiTimes, "api_p95_ms", 0.95)
}
