package main

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestE2EMetrics: a serve process exposes /metrics without a token; after
// feature tasks ran, the run, node, LLM and checkpoint series are there.
func TestE2EMetrics(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	p := serve(t, d.url, "GATEHOUSE_WORKERS=2")
	for range 2 {
		p.createFeature(nil, "Let users export their reports as CSV files.")
	}
	d.waitAll(60 * time.Second)

	var body string
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := http.Get(p.url("/metrics"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics: %d %s", res.StatusCode, b)
		}
		body = string(b)
		if strings.Contains(body, `workflow_runs_total{reason="succeeded",workflow="feature"} 2`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{
		`workflow_runs_total{reason="succeeded",workflow="feature"} 2`,
		`workflow_duration_seconds_count{workflow="feature"} 2`,
		`node_run_duration_seconds_count{node="merge",workflow="feature"} 2`,
		`llm_call_duration_seconds_count{provider="scripted",role="feature.plan"} 2`,
		`pending_interrupts{kind="prd"} 0`,
		`websockets_open 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	m := regexp.MustCompile(`(?m)^checkpoint_write_seconds_count (\d+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no checkpoint_write_seconds_count in\n%s", body)
	}
	if n, _ := strconv.Atoi(m[1]); n < 2*10 {
		t.Errorf("checkpoint_write_seconds_count %d, want at least one per node run", n)
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
