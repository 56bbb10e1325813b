package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/requests"
	"github.com/gatehousehq/gatehouse/internal/runner"
	"github.com/gatehousehq/gatehouse/internal/servetest"
	"github.com/gatehousehq/gatehouse/internal/sso"
	"github.com/gatehousehq/gatehouse/internal/web/api"
	webrequest "github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
	"github.com/gatehousehq/gatehouse/internal/workflows/request"
)

const testToken = "test-token-7f3a9c"

// bundle is one replica on a fresh database, as the web tests drive it:
// the engine with the feature, linear and request workflows (feature on
// the stub executor, with a brake: exec), the live hub, the HTTP server on
// a real port (restartable on the same address) and, withRunner, the
// runner with its workers; without one, tests advance tasks with run.
type bundle struct {
	t       testing.TB
	replica *servetest.Replica
	pool    *pgxpool.Pool
	store   *postgres.Store
	engine  *graph.Engine
	hub     *live.Hub
	// runner runs the tasks (withRunner); nil: tests advance them with run.
	runner *runner.Runner
	exec   *holdExec
	stub   *featuretest.StubExecutor // exec's
	log    *slog.Logger
	auth   *auth.Service
	wakes  atomic.Int64
	// policy is the approval policy of the server (set it before a
	// restart to change it).
	policy auth.Policy
	// trustProxy is the server's TrustProxy (set it before a restart).
	trustProxy bool
	// sso is the server's single sign-on (set it before a restart).
	sso      *sso.Client
	claimTTL time.Duration

	sessMu   sync.Mutex
	sessions map[string]testSession

	mu   sync.Mutex
	srv  *Server
	addr string
	base string // http://127.0.0.1:port
}

// wake counts a wake-up of the runner and wakes it, if any.
func (b *bundle) wake() {
	b.wakes.Add(1)
	if b.runner != nil {
		b.runner.Wake()
	}
}

type setupOpts struct {
	// token is the bootstrap token ("": none).
	token string
	// policy is the approval policy; nil: none (the bootstrap token creates
	// and approves its own tasks, as the API tests do).
	policy *auth.Policy
	// workers: a runner runs the tasks, as in a replica (withRunner).
	workers bool
	// workflows are served besides feature, linear and request.
	workflows []graph.Workflow
	// outbox says which notifications the store's commits write (no
	// sender takes them: a test starts one that the hub wakes).
	outbox   postgres.Outbox
	noStart  bool            // do not start the server (the test calls srv.Start)
	tweak    func(s *Server) // adjusts the server before it serves
	claimTTL time.Duration   // Deps.ClaimTTL
}

// withRunner is a replica as the desk runs in: a runner with workers, the
// default approval policy, and the workflows given besides the others.
func withRunner(workflows ...graph.Workflow) setupOpts {
	p := auth.DefaultPolicy()
	return setupOpts{token: testToken, policy: &p, workers: true, workflows: workflows}
}

// logLevel is the level of the replica's log in the test output.
var logLevel = slog.LevelWarn

// testWriter sends log lines to the test's log while it runs.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func setup(t testing.TB, opts ...setupOpts) *bundle {
	t.Helper()
	o := setupOpts{token: testToken}
	if len(opts) > 0 {
		o = opts[0]
	}
	ex := newHoldExec()
	fw, err := feature.New(ex, feature.WithRetry(graph.RetryPolicy{Attempts: 1}))
	if err != nil {
		t.Fatalf("feature.New: %v", err)
	}
	rw, err := request.New()
	if err != nil {
		t.Fatalf("request.New: %v", err)
	}
	policy := auth.NewPolicy(nil, nil)
	if o.policy != nil {
		policy = *o.policy
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: logLevel}))
	workers := 0
	if o.workers {
		workers = 4
	}
	// The policy's deadlines and the tasks' own (options.deadlines) apply
	// to raises, as in serve.
	r := servetest.NewReplica(t, servetest.ReplicaOptions{
		Workflows: append([]graph.Workflow{fw, graphtest.Linear(2), rw}, o.workflows...),
		Engine:    []graph.EngineOption{graph.WithRaiseHook(policy.Raise)},
		Workers:   workers, Owner: "web-test", LeaseTTL: 5 * time.Second, Logger: log,
		Store: postgres.Options{Outbox: o.outbox}})
	b := &bundle{t: t, replica: r, pool: r.Pool, store: r.Store, engine: r.Engine, hub: r.Hub, runner: r.Runner,
		exec: ex, stub: ex.stub, log: log, policy: policy, claimTTL: o.claimTTL, sessions: map[string]testSession{},
		auth: auth.NewService(auth.Config{Store: r.Store, BootstrapToken: o.token})}
	if o.noStart {
		b.srv = New(b.deps())
		if o.tweak != nil {
			o.tweak(b.srv)
		}
		return b
	}
	t.Cleanup(b.stopServer)
	b.startServer(o.tweak)
	return b
}

// deps are the server's, from the bundle's settings.
func (b *bundle) deps() Deps {
	worker := auth.WithWorker(auth.WakeWorker(b.wake))
	if b.runner != nil {
		worker = auth.WithWorker(b.runner)
	}
	return Deps{Engine: b.engine, Store: b.store, Hub: b.hub, Wake: b.wake, Auth: b.auth, ClaimTTL: b.claimTTL,
		Decider:    auth.NewDecider(b.engine, b.store, b.policy, b.log, worker, auth.WithDecisionCheck(requests.CheckDecision)),
		TrustProxy: b.trustProxy, SSO: b.sso, Ready: func(ctx context.Context) error { return postgres.Ready(ctx, b.pool) },
		Logger: b.log, Version: "test"}
}

// startServer serves on a free port the first time, on the same address
// after that; tweak, when given, adjusts the new server before it listens,
// so that it races no request.
func (b *bundle) startServer(tweak ...func(*Server)) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	addr := b.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var err error
	for range 50 { // the old socket may linger a moment after a restart
		srv := New(b.deps())
		for _, f := range tweak {
			if f != nil {
				f(srv)
			}
		}
		var a net.Addr
		if a, err = srv.Start(addr); err == nil {
			b.srv, b.addr, b.base = srv, a.String(), "http://"+a.String()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.t.Fatalf("start server on %s: %v", addr, err)
}

// stopServer shuts the server down (websockets get a close frame).
func (b *bundle) stopServer() {
	b.mu.Lock()
	srv := b.srv
	b.srv = nil
	b.mu.Unlock()
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		b.t.Errorf("shutdown: %v", err)
	}
}

// createFeature starts a feature task whose every gate waits for a person.
func (b *bundle) createFeature(title string) string {
	b.t.Helper()
	id := featuretest.Create(b.t, b.engine, title)
	b.wake()
	return id
}

// waitPending waits until the task waits on an interrupt of kind.
func (b *bundle) waitPending(id, kind string) *graph.Interrupt {
	b.t.Helper()
	return b.replica.WaitPending(b.t, id, kind)
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
