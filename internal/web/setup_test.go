package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/requests"
	"github.com/gatehousehq/gatehouse/internal/web/api"
	webrequest "github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
	"github.com/gatehousehq/gatehouse/internal/workflows/request"
)

const testToken = "test-token-7f3a9c"

// bundle is what an API test needs: a fresh database, the engine over it
// (feature and linear workflows), a running hub and the server behind an
// httptest server. No runner: tests advance tasks with run.
type bundle struct {
	pool   *pgxpool.Pool
	store  *postgres.Store
	engine *graph.Engine
	stub   *featuretest.StubExecutor
	hub    *live.Hub
	srv    *Server
	base   string // http://127.0.0.1:port
	wakes  atomic.Int64
}

// wake counts a wake-up of the runner (there is none).
func (b *bundle) wake() { b.wakes.Add(1) }

type setupOpts struct {
	token string
	// policy is the approval policy; nil: none (the bootstrap token creates
	// and approves its own tasks, as the API tests do).
	policy   *auth.Policy
	noStart  bool            // do not start an httptest server (the test calls srv.Start)
	tweak    func(s *Server) // adjusts the server before it serves
	claimTTL time.Duration   // Deps.ClaimTTL
}

func setup(t *testing.T, opts ...setupOpts) *bundle {
	t.Helper()
	o := setupOpts{token: testToken}
	if len(opts) > 0 {
		o = opts[0]
	}
	ctx := context.Background()
	cs := pgtest.NewDB(t)
	pool, err := pgxpool.New(ctx, cs)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	store := postgres.NewStore(pool)
	stub := featuretest.NewStub("")
	fw, err := feature.New(stub, feature.WithRetry(graph.RetryPolicy{Attempts: 1}))
	if err != nil {
		t.Fatalf("feature.New: %v", err)
	}
	rw, err := request.New()
	if err != nil {
		t.Fatalf("request.New: %v", err)
	}

	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	hub := live.NewHub(cs, store, log.With("component", "live"))
	hubCtx, stopHub := context.WithCancel(ctx)
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(hubCtx) }()
	t.Cleanup(func() { stopHub(); <-hubDone })
	select {
	case <-hub.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("hub never listened")
	}

	policy := auth.NewPolicy(nil, nil)
	if o.policy != nil {
		policy = *o.policy
	}
	// The policy's deadlines and the tasks' own (options.deadlines) apply
	// to raises, as in serve.
	engine, err := graph.NewEngine(store, []graph.Workflow{fw, graphtest.Linear(2), rw}, graph.WithRaiseHook(policy.Raise))
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	b := &bundle{pool: pool, store: store, engine: engine, stub: stub, hub: hub}
	b.srv = New(Deps{Engine: engine, Store: store, Hub: hub, Wake: b.wake, BootstrapToken: o.token, ClaimTTL: o.claimTTL,
		Decider: auth.NewDecider(engine, store, policy, log, auth.WithWorker(auth.WakeWorker(b.wake)), auth.WithDecisionCheck(requests.CheckDecision)),
		Ready:   func(ctx context.Context) error { return postgres.Ready(ctx, pool) }, Logger: log, Version: "test"})
	if o.tweak != nil {
		o.tweak(b.srv)
	}
	if !o.noStart {
		ts := httptest.NewServer(b.srv.Handler())
		b.base = ts.URL
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := b.srv.Shutdown(ctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
			ts.Close()
		})
	}
	return b
}

// reply is an HTTP answer, read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into v.
func (r reply) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// apiErr is the error body.
func (r reply) apiErr(t *testing.T) response.BodyError {
	t.Helper()
	var e response.Body
	r.json(t, &e)
	return e.Error
}

// do sends a request with the test token. body is a string (sent as is),
// nil (none) or anything else (marshalled).
func (b *bundle) do(t *testing.T, method, path string, body any) reply {
	t.Helper()
	return b.doAuth(t, method, path, body, "Bearer "+testToken)
}

func (b *bundle) doAuth(t *testing.T, method, path string, body any, auth string) reply {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	case io.Reader:
		rd = v
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, b.base+path, rd)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return reply{status: res.StatusCode, header: res.Header, body: raw}
}

// featureInput is a valid feature task request; gates {} makes every gate
// wait for a human.
func featureTask(gates map[string]bool) map[string]any {
	req := map[string]any{"workflow": "feature", "input": map[string]any{"description": featuretest.DefaultDescription}}
	if gates != nil {
		req["options"] = map[string]any{"gates": gates}
	}
	return req
}

// create starts a task through the API.
func (b *bundle) create(t *testing.T, req any) api.Task {
	t.Helper()
	r := b.do(t, http.MethodPost, "/api/v1/tasks", req)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var task api.Task
	r.json(t, &task)
	return task
}

// run advances the task as a worker would, with its current fence.
func (b *bundle) run(t *testing.T, id string) graph.Outcome {
	t.Helper()
	ctx := context.Background()
	task, err := b.store.Task(ctx, id)
	if err != nil {
		t.Fatalf("task %s: %v", id, err)
	}
	out, err := b.engine.Run(ctx, id, task.Fence)
	if err != nil {
		t.Fatalf("run %s: %v", id, err)
	}
	return out
}

// getTask reads a task through the API.
func (b *bundle) getTask(t *testing.T, id string) api.Task {
	t.Helper()
	r := b.do(t, http.MethodGet, "/api/v1/tasks/"+id, nil)
	if r.status != http.StatusOK {
		t.Fatalf("get task: %d %s", r.status, r.body)
	}
	var task api.Task
	r.json(t, &task)
	return task
}

// decide posts a decision and expects 202.
func (b *bundle) decide(t *testing.T, taskID string, body map[string]any) api.Task {
	t.Helper()
	r := b.do(t, http.MethodPost, "/api/v1/tasks/"+taskID+"/decisions", body)
	if r.status != http.StatusAccepted {
		t.Fatalf("decide %v: %d %s", body, r.status, r.body)
	}
	var task api.Task
	r.json(t, &task)
	return task
}

// waitingTask creates a feature task with human gates and runs it to its
// first interrupt (prd).
func (b *bundle) waitingTask(t *testing.T) api.Task {
	t.Helper()
	task := b.create(t, featureTask(map[string]bool{}))
	if out := b.run(t, task.ID); out.Status != graph.StatusWaiting {
		t.Fatalf("run: %+v, want waiting", out)
	}
	got := b.getTask(t, task.ID)
	if got.PendingInterrupt == nil {
		t.Fatalf("waiting task has no pending interrupt: %+v", got)
	}
	return got
}

// fingerprint sums up every table the API may write: row counts, and the
// columns an action changes.
func (b *bundle) fingerprint(t *testing.T) string {
	t.Helper()
	var s string
	err := b.pool.QueryRow(context.Background(), `SELECT concat_ws(' ',
		(SELECT count(*) FROM tasks), (SELECT count(*) FROM workflow_checkpoints),
		(SELECT count(*) FROM checkpoint_history), (SELECT count(*) FROM interrupts),
		(SELECT count(*) FROM decisions), (SELECT count(*) FROM task_events), (SELECT count(*) FROM artifacts),
		(SELECT md5(coalesce(string_agg(t.id::text || t.status || t.updated_at::text || t.lease_fence || c.event_seq, ',' ORDER BY t.id), ''))
		 FROM tasks t LEFT JOIN workflow_checkpoints c ON c.task_id = t.id),
		(SELECT md5(coalesce(string_agg(id::text || status, ',' ORDER BY id), '')) FROM interrupts))`).Scan(&s)
	if err != nil {
		t.Fatalf("fingerprint: %v", err)
	}
	return s
}

func (b *bundle) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// The desk session's names as a browser sees them.
const (
	sessionCookie       = webrequest.SessionCookie
	secureSessionCookie = webrequest.SecureSessionCookie
	csrfHeader          = webrequest.CSRFHeader
	csrfField           = webrequest.CSRFField
	loginCookie         = "gatehouse_login"
)
