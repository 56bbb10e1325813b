package metrics_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/llm/scripted"
	"github.com/gatehousehq/gatehouse/internal/metrics"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
)

// scrape GETs the handler and returns every sample by its series text,
// e.g. `workflow_runs_total{reason="succeeded",workflow="feature"}`.
func scrape(t *testing.T, h http.Handler) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %d %s", resp.StatusCode, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

func want(t *testing.T, samples map[string]float64, series string, check func(float64) bool, what string) {
	t.Helper()
	v, ok := samples[series]
	if !ok {
		var near []string
		name := series
		if i := strings.IndexByte(series, '{'); i > 0 {
			name = series[:i]
		}
		for k := range samples {
			if strings.HasPrefix(k, name) {
				near = append(near, k)
			}
		}
		t.Errorf("no series %s (have %v)", series, near)
		return
	}
	if !check(v) {
		t.Errorf("%s = %v, want %s", series, v, what)
	}
}

func eq(n float64) func(float64) bool { return func(v float64) bool { return v == n } }
func positive(v float64) bool         { return v > 0 }

// TestFeatureRunMetrics runs feature tasks on PostgreSQL through an engine
// wired as serve wires it, and scrapes /metrics.
func TestFeatureRunMetrics(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	store := postgres.NewStore(pgtest.NewPool(t), postgres.Options{})
	m := metrics.New(metrics.Config{Reader: store, PendingInterrupts: store.PendingInterruptCounts,
		PendingStats: func(ctx context.Context) (map[string]metrics.PendingStat, error) {
			st, err := store.PendingInterruptStats(ctx)
			out := map[string]metrics.PendingStat{}
			for k, v := range st {
				out[k] = metrics.PendingStat{Pending: v.Pending, OldestSeconds: v.OldestSeconds}
			}
			return out, err
		},
		InterruptKinds: []string{feature.GatePRD, feature.GatePlan, feature.GateMerge}})
	go m.Run(ctx)
	// The store the engine commits through tells m of what it commits on
	// its own (a cancel), as serve's does.
	store = store.With(postgres.Options{Sinks: []graph.EventSink{m}})
	open := 3
	m.WatchWebsockets(func() int { return open })

	p := m.Provider(scripted.New(scripted.Chain(feature.Builtin), nil))
	wf, err := feature.New(feature.LLMExecutor(p))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Checkpointer(store).(graph.FieldCheckpointer); !ok {
		t.Error("the measured store no longer keeps large state fields apart")
	}
	eng, err := graph.NewEngine(m.Checkpointer(store), []graph.Workflow{wf}, graph.WithSink(m))
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(feature.Input{Description: "Let users export their reports as CSV files."})
	task, err := eng.Create(ctx, graph.NewTask{Workflow: feature.Name, Title: "csv", Input: in, Options: json.RawMessage(`{"gates":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := eng.Run(ctx, task.ID, 0)
	if err != nil || out.Status != graph.StatusWaiting || out.Interrupt.Kind != feature.GatePRD {
		t.Fatalf("first run: %+v, %v", out, err)
	}
	s := scrape(t, m.Handler())
	want(t, s, `pending_interrupts{kind="prd"}`, eq(1), "1 while the PRD waits")
	want(t, s, `pending_interrupts{kind="merge"}`, eq(0), "0")
	want(t, s, `gatehouse_interrupts_pending{kind="prd"}`, eq(1), "1 while the PRD waits")
	want(t, s, `gatehouse_interrupts_pending{kind="merge"}`, eq(0), "0")
	want(t, s, `gatehouse_interrupt_oldest_pending_seconds{kind="merge"}`, eq(0), "0 without a pending merge")
	// The PRD was raised moments ago by the database's clock.
	want(t, s, `gatehouse_interrupt_oldest_pending_seconds{kind="prd"}`, func(v float64) bool { return v >= 0 && v < 60 },
		"the age of the waiting PRD")
	time.Sleep(1100 * time.Millisecond)
	s2 := scrape(t, m.Handler())
	want(t, s2, `gatehouse_interrupt_oldest_pending_seconds{kind="prd"}`,
		func(v float64) bool { return v >= s[`gatehouse_interrupt_oldest_pending_seconds{kind="prd"}`]+1 }, "a second older a second later")
	want(t, s, `websockets_open`, eq(3), "3")

	// Reject the PRD once, then approve every gate.
	time.Sleep(20 * time.Millisecond) // a measurable wait for interrupt_decision_seconds
	decisions := 0
	for out.Status == graph.StatusWaiting {
		action, fb := graph.ActionApprove, ""
		if decisions == 0 {
			action, fb = graph.ActionReject, "Name the file format options."
		}
		if _, err := eng.Decide(ctx, task.ID, graph.DecisionInput{InterruptID: out.Interrupt.ID, Action: action, Feedback: fb, DecidedBy: "tester"}); err != nil {
			t.Fatal(err)
		}
		decisions++
		if out, err = eng.Run(ctx, task.ID, 0); err != nil {
			t.Fatal(err)
		}
	}
	if out.Status != graph.StatusSucceeded || decisions != 4 {
		t.Fatalf("ended %+v after %d decisions", out, decisions)
	}

	// A second task, cancelled while it waits (the store commits that).
	other, err := eng.Create(ctx, graph.NewTask{Workflow: feature.Name, Title: "other", Input: in, Options: json.RawMessage(`{"gates":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Run(ctx, other.ID, 0); err != nil {
		t.Fatal(err)
	}
	if err := store.Cancel(ctx, other.ID, "tester"); err != nil {
		t.Fatal(err)
	}
	if err := m.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	s = scrape(t, m.Handler())
	want(t, s, `workflow_runs_total{reason="succeeded",workflow="feature"}`, eq(1), "1")
	want(t, s, `workflow_runs_total{reason="cancelled",workflow="feature"}`, eq(1), "1")
	want(t, s, `workflow_duration_seconds_count{workflow="feature"}`, eq(2), "2 (one succeeded, one cancelled)")
	want(t, s, `workflow_duration_seconds_sum{workflow="feature"}`, func(v float64) bool { return v > 0.02 && v < 120 }, "the runs' wall time")
	// requirements ran twice (one rejection); every other producer once.
	want(t, s, `node_run_duration_seconds_count{node="requirements",workflow="feature"}`, eq(3), "3 (2 for the first task, 1 for the second)")
	want(t, s, `node_run_duration_seconds_count{node="merge",workflow="feature"}`, eq(1), "1")
	want(t, s, `node_run_duration_seconds_count{node="validate_plan_tasks",workflow="feature"}`, eq(1), "1")
	want(t, s, `llm_call_duration_seconds_count{provider="scripted",role="feature.requirements"}`, eq(3), "3")
	want(t, s, `llm_call_duration_seconds_count{provider="scripted",role="feature.analyze"}`, eq(2), "2")
	want(t, s, `interrupt_decision_seconds_count{kind="prd"}`, eq(2), "2 (reject, approve)")
	want(t, s, `interrupt_decision_seconds_count{kind="merge"}`, eq(1), "1")
	want(t, s, `interrupt_decision_seconds_sum{kind="prd"}`, func(v float64) bool { return v >= 0.02 && v < 120 }, "at least the 20ms wait")
	want(t, s, `gatehouse_decision_seconds_count{action="reject",kind="prd"}`, eq(1), "1")
	want(t, s, `gatehouse_decision_seconds_count{action="approve",kind="prd"}`, eq(1), "1")
	want(t, s, `gatehouse_decision_seconds_count{action="approve",kind="merge"}`, eq(1), "1")
	want(t, s, `gatehouse_decision_seconds_sum{action="reject",kind="prd"}`, func(v float64) bool { return v >= 0.02 && v < 120 }, "at least the 20ms wait")
	want(t, s, `gatehouse_interrupts_pending{kind="prd"}`, eq(0), "0 once decided and cancelled")
	want(t, s, `gatehouse_interrupt_oldest_pending_seconds{kind="prd"}`, eq(0), "0 once none waits")
	// One per commit: 17 for these two runs (a decision applied while its
	// node runs is written in the node's commit).
	want(t, s, `checkpoint_write_seconds_count`, func(v float64) bool { return v >= 15 }, "one per commit")
	want(t, s, `checkpoint_write_seconds_sum`, positive, "> 0")
	want(t, s, `pending_interrupts{kind="prd"}`, eq(0), "0 once decided and cancelled")
	if _, ok := s[`llm_call_errors_total{provider="scripted",role="feature.requirements"}`]; ok {
		t.Errorf("an error counted for calls that all succeeded")
	}
	if _, ok := s[`workflow_turns_count{workflow="feature"}`]; ok {
		t.Errorf("workflow_turns observed for a workflow that reports no turns")
	}
	want(t, s, `go_goroutines`, positive, "> 0")
}

// fakeReader serves tasks and interrupts from maps.
type fakeReader struct {
	tasks      map[string]*graph.Task
	interrupts map[string]*graph.Interrupt
}

func (r fakeReader) Task(_ context.Context, id string) (*graph.Task, error) {
	if t, ok := r.tasks[id]; ok {
		return t, nil
	}
	return nil, graph.ErrTaskNotFound
}

func (r fakeReader) Interrupt(_ context.Context, id string) (*graph.Interrupt, error) {
	if i, ok := r.interrupts[id]; ok {
		return i, nil
	}
	return nil, graph.ErrInterruptNotFound
}

// TestCompletionReasonsAndTurns: a workflow's own completion_reason and
// turns (slogan's) label and feed the run metrics; failures count as
// failed whatever the result says.
func TestCompletionReasonsAndTurns(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	done := t0.Add(90 * time.Second)
	rd := fakeReader{tasks: map[string]*graph.Task{
		"a": {ID: "a", Workflow: "slogan", CreatedAt: t0, CompletedAt: &done,
			Result: json.RawMessage(`{"completion_reason":"approved","turn_count":2,"turns":[{},{}]}`)},
		"b": {ID: "b", Workflow: "slogan", CreatedAt: t0, CompletedAt: &done,
			Result: json.RawMessage(`{"completion_reason":"max_turns","turns":[{},{},{},{},{}]}`)},
		"c": {ID: "c", Workflow: "slogan", CreatedAt: t0},
		"d": {ID: "d", Workflow: "pm", CreatedAt: t0, CompletedAt: &done, Result: json.RawMessage(`{"turns":3}`)},
	}, interrupts: map[string]*graph.Interrupt{"i": {ID: "i", Kind: "review", CreatedAt: t0}}}
	m := metrics.New(metrics.Config{Reader: rd})
	go m.Run(ctx)
	ms := func(d time.Duration) *int64 { v := d.Milliseconds(); return &v }
	m.Publish([]graph.Event{
		{TaskID: "a", Type: graph.EventNodeCompleted, Node: "write", DurationMS: ms(1500 * time.Millisecond)},
		{TaskID: "a", Type: graph.EventLLMCall, Node: "write"},
		{TaskID: "a", Type: graph.EventDecisionRecorded, Node: "review", At: t0.Add(30 * time.Second),
			Data: json.RawMessage(`{"interrupt_id":"i","kind":"review","action":"approve"}`)},
		{TaskID: "a", Type: graph.EventTaskCompleted, At: done},
		{TaskID: "b", Type: graph.EventTaskCompleted, At: done},
		{TaskID: "c", Type: graph.EventTaskFailed, At: t0.Add(10 * time.Second)},
		{TaskID: "d", Type: graph.EventTaskCompleted, At: done},
		{TaskID: "missing", Type: graph.EventTaskCompleted, At: done},
	})
	if err := m.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s := scrape(t, m.Handler())
	want(t, s, `workflow_runs_total{reason="approved",workflow="slogan"}`, eq(1), "1")
	want(t, s, `workflow_runs_total{reason="max_turns",workflow="slogan"}`, eq(1), "1")
	want(t, s, `workflow_runs_total{reason="failed",workflow="slogan"}`, eq(1), "1")
	want(t, s, `workflow_runs_total{reason="succeeded",workflow="pm"}`, eq(1), "1")
	want(t, s, `workflow_turns_count{workflow="slogan"}`, eq(2), "2")
	want(t, s, `workflow_turns_sum{workflow="slogan"}`, eq(7), "2 + 5")
	want(t, s, `workflow_turns_sum{workflow="pm"}`, eq(3), "3")
	want(t, s, `workflow_duration_seconds_sum{workflow="slogan"}`, eq(190), "90 + 90 + 10")
	want(t, s, `node_run_duration_seconds_sum{node="write",workflow="slogan"}`, eq(1.5), "1.5")
	want(t, s, `interrupt_decision_seconds_sum{kind="review"}`, eq(30), "30")
	want(t, s, `gatehouse_metrics_lookup_errors_total`, eq(1), "1 (the missing task)")
}

type failing struct{ err error }

func (f failing) Name() string { return "ollama" }
func (f failing) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	return llm.Response{Model: "m", Duration: 250 * time.Millisecond}, f.err
}

func TestProviderErrors(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{})
	req := llm.Request{Role: "slogan.writer"}
	if _, err := m.Provider(failing{llm.Transient(errors.New("503"))}).Complete(context.Background(), req); err == nil {
		t.Fatal("no error")
	}
	if p := m.Provider(failing{}); p.Name() != "ollama" {
		t.Errorf("name %q", p.Name())
	}
	_, _ = m.Provider(failing{}).Complete(context.Background(), req)
	_, _ = m.Provider(failing{context.Canceled}).Complete(context.Background(), req)
	s := scrape(t, m.Handler())
	want(t, s, `llm_call_errors_total{provider="ollama",role="slogan.writer"}`, eq(1), "1 (a cancelled call is no error)")
	want(t, s, `llm_call_duration_seconds_count{provider="ollama",role="slogan.writer"}`, eq(3), "3")
	want(t, s, `llm_call_duration_seconds_sum{provider="ollama",role="slogan.writer"}`, eq(0.75), "3 × 250ms")
}

func TestPendingCountError(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{PendingInterrupts: func(context.Context) (map[string]int, error) {
		return nil, errors.New("database down")
	}})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The rest of the metrics are still served.
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "go_goroutines") || strings.Contains(string(b), "pending_interrupts{") {
		t.Errorf("status %d:\n%.500s", resp.StatusCode, b)
	}
}
