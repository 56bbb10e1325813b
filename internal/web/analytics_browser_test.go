package web

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehousehq/gatehouse/internal/analytics/analyticstest"
	"github.com/gatehousehq/gatehouse/internal/auth"
)

// TestAnalyticsPageBrowser: a viewer opens /analytics for the seeded
// history in Chromium; the page draws its three charts as SVG on the
// server (a point per day and kind with decisions, a bar per pending kind
// and per decider), its figures match the API's, a figure leads to the
// tasks behind it, and an empty period says so.
func TestAnalyticsPageBrowser(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	analyticstest.Seed(t, e.pool)
	e.user("vicky", auth.RoleViewer)
	b := e.openTab(t, "vicky")
	console := b.watchConsole()

	b.do(chromedp.Navigate(e.base + "/analytics?since=2026-01-05&until=2026-01-08"))
	b.waitJS(`document.querySelector("#chart-trend svg")`, 10*time.Second)
	if n := eval[int](b, `document.querySelectorAll("svg.chart-svg").length`); n != 3 {
		t.Errorf("%d charts, want 3", n)
	}
	// Points per kind: prd 2 days, plan 2, question 1 (days with decisions).
	for kind, want := range map[string]int{"prd": 2, "plan": 2, "question": 1} {
		if n := eval[int](b, `document.querySelectorAll('#chart-trend [data-series="`+kind+`"] circle').length`); n != want {
			t.Errorf("trend %s: %d points, want %d", kind, n, want)
		}
	}
	if got := b.texts(`#chart-pending .bar-label`); got != "merge\nprd" {
		t.Errorf("pending bars: %q", got)
	}
	if got := b.texts(`#chart-load .bar-label`); got != "alice\nbob\ncarol" {
		t.Errorf("load bars: %q", got)
	}
	// The rendered SVG has a real size (it drew, not only parsed).
	if w := eval[float64](b, `document.querySelector("#chart-trend svg").getBoundingClientRect().width`); w < 300 {
		t.Errorf("trend chart %v px wide", w)
	}
	for field, want := range map[string]string{"raised": "7", "approved": "2", "rejected": "1", "expired": "1",
		"p50": "2 min", "p90": "1 h", "rejection_rate": "25 %"} {
		if got := strings.TrimSpace(b.text(`#kinds tr[data-kind="prd"] [data-field="` + field + `"]`)); got != want {
			t.Errorf("prd %s: %q, want %q", field, got, want)
		}
	}
	if got := strings.TrimSpace(b.text(`#deciders tr[data-decider="alice"] [data-field="fast"]`)); !strings.HasPrefix(got, "3") ||
		!strings.Contains(got, "rubber stamp") {
		t.Errorf("alice's fast decisions: %q", got)
	}
	b.screenshot("analytics")
	// At 1,366 px the tables fit their cards and the time chart fills its
	// card (issue 27, item 11).
	b.do(chromedp.EmulateViewport(1366, 900))
	b.do(chromedp.Reload())
	b.waitJS(`document.querySelector("#chart-trend svg")`, 10*time.Second)
	for _, table := range []string{"#kinds", "#deciders"} {
		// (The table scrolls inside its card when it must: what is cut
		// is its scroll width beyond its box.)
		over := eval[float64](b, `(function(){var t=document.querySelector(`+jsq(table)+`),c=t.closest(".card");`+
			`return Math.max(t.scrollWidth - t.clientWidth, t.getBoundingClientRect().right - (c.getBoundingClientRect().right - parseFloat(getComputedStyle(c).paddingRight)))})()`)
		if over > 1 {
			t.Errorf("at 1366 px the %s table sticks %.0f px out of its card", table, over)
		}
	}
	gap := eval[float64](b, `(function(){var s=document.querySelector("#chart-trend svg"),c=s.closest(".card"),cs=getComputedStyle(c);`+
		`var inner=c.clientWidth-parseFloat(cs.paddingLeft)-parseFloat(cs.paddingRight);var r=s.getBoundingClientRect();`+
		`return inner - r.width})()`)
	if gap > 8 {
		t.Errorf("at 1366 px the time chart leaves %.0f px of its card empty", gap)
	}
	b.screenshot("analytics-1366")

	// The rejected figure of prd lists the one rejection.
	b.click(`#kinds tr[data-kind="prd"] [data-field="rejected"] a`)
	b.waitJS(`location.pathname === "/analytics/tasks" && document.querySelector("#behind")`, 10*time.Second)
	if n := eval[int](b, `document.querySelectorAll("#behind tbody tr").length`); n != 1 {
		t.Errorf("behind prd rejected: %d rows", n)
	}
	if got := b.text(`#behind tbody td:nth-child(5)`); got != "alice" {
		t.Errorf("rejected by %q", got)
	}
	b.screenshot("behind")

	// An empty period.
	b.do(chromedp.Navigate(e.base + "/analytics?since=2025-06-01&until=2025-06-30"))
	b.waitJS(`document.querySelector("#analytics-empty")`, 10*time.Second)
	if n := eval[int](b, `document.querySelectorAll("#chart-trend, #kinds, #deciders").length`); n != 0 {
		t.Errorf("an empty period draws %d figures", n)
	}
	if !strings.Contains(b.text("#analytics-empty"), "1 Jun – 30 Jun 2025") {
		t.Errorf("empty state: %q", b.text("#analytics-empty"))
	}
	b.screenshot("empty")
	if msgs := console(); len(msgs) > 0 {
		t.Errorf("console: %v", msgs)
	}

	// A bad period is a 400 page naming the field.
	s := e.session("vicky")
	if st, _, body := e.getAs(t, &s, "/analytics?since=nope", nil); st != http.StatusBadRequest || !strings.Contains(body, "since") {
		t.Errorf("bad since: %d", st)
	}
}
