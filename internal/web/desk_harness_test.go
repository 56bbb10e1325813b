package web

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/browsertest"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/requests"
	"github.com/gatehousehq/gatehouse/internal/runner"
	"github.com/gatehousehq/gatehouse/internal/sso"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
	"github.com/gatehousehq/gatehouse/internal/workflows/request"
)

// TestMain closes the browser the desk tests share.
func TestMain(m *testing.M) {
	if os.Getenv(fanoutEnvURL) != "" {
		os.Exit(fanoutClientMain())
	}
	code := m.Run()
	browsertest.Close()
	os.Exit(code)
}

// holdExec is the stub executor with a brake: a held (role, iteration)
// waits until released, so a test can see a node running.
type holdExec struct {
	stub *featuretest.StubExecutor

	mu    sync.Mutex
	holds map[string]chan struct{}
}

func newHoldExec() *holdExec {
	return &holdExec{stub: featuretest.NewStub(""), holds: map[string]chan struct{}{}}
}

func holdKey(role string, iteration int) string { return fmt.Sprintf("%s#%d", role, iteration) }

// hold makes the next call of role at iteration wait; release lets it go.
func (h *holdExec) hold(role string, iteration int) (release func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	h.holds[holdKey(role, iteration)] = ch
	h.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (h *holdExec) Execute(ctx context.Context, req feature.Request) (feature.Reply, error) {
	h.mu.Lock()
	ch := h.holds[holdKey(req.Role, req.Iteration)]
	h.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return feature.Reply{}, ctx.Err()
		}
	}
	return h.stub.Execute(ctx, req)
}

// deskEnv is a whole replica on a fresh database: engine with the feature
// workflow on the stub executor, the live hub, the runner with its
// workers, and the HTTP server on a real port (restartable on the same
// address).
type deskEnv struct {
	t      testing.TB
	pool   *pgxpool.Pool
	store  *postgres.Store
	engine *graph.Engine
	hub    *live.Hub
	run    *runner.Runner
	exec   *holdExec
	log    *slog.Logger
	auth   *auth.Service
	// policy is the approval policy of the server (set it before a
	// restart to change it); the default is production's.
	policy auth.Policy
	// trustProxy is the server's TrustProxy (set it before a restart).
	trustProxy bool
	// sso is the server's single sign-on (set it before a restart).
	sso *sso.Client

	sessMu   sync.Mutex
	sessions map[string]testSession

	mu   sync.Mutex
	srv  *Server
	addr string
	base string
}

func newDeskEnv(t testing.TB, extra ...graph.Workflow) *deskEnv {
	t.Helper()
	ctx := context.Background()
	cs := pgtest.NewDB(t)
	pool, err := pgxpool.New(ctx, cs)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	store := postgres.NewStore(pool)
	notifyCtx, stopNotify := context.WithCancel(ctx)
	store.StartNotifier(notifyCtx, slog.New(slog.DiscardHandler))
	t.Cleanup(stopNotify)
	ex := newHoldExec()
	fw, err := feature.New(ex, feature.WithRetry(graph.RetryPolicy{Attempts: 1}))
	if err != nil {
		t.Fatalf("feature.New: %v", err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: deskLogLevel}))
	rw, err := request.New()
	if err != nil {
		t.Fatalf("request.New: %v", err)
	}
	engine, err := graph.NewEngine(store, append([]graph.Workflow{fw, rw}, extra...), graph.WithLogger(log))
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	hub := live.NewHub(cs, store, log)
	hubCtx, stopHub := context.WithCancel(ctx)
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(hubCtx) }()
	select {
	case <-hub.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("hub never listened")
	}
	run := runner.New(store, engine, runner.Config{Owner: "desk-test", Workers: 4, LeaseTTL: 5 * time.Second, Logger: log})
	hub.OnRunnable(run.WakeFor)
	run.Start()
	e := &deskEnv{t: t, pool: pool, store: store, engine: engine, hub: hub, run: run, exec: ex, log: log,
		auth: auth.NewService(auth.Config{Store: store, BootstrapToken: testToken}), policy: auth.DefaultPolicy(),
		sessions: map[string]testSession{}}
	t.Cleanup(func() {
		e.stopServer()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		run.Stop(ctx)
		stopHub()
		<-hubDone
	})
	e.startServer()
	return e
}

// deskLogLevel is the level of the replica's log in the test output.
var deskLogLevel = slog.LevelWarn

// testWriter sends log lines to the test's log while it runs.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startServer serves on a free port the first time, on the same address
// after that.
func (e *deskEnv) startServer() {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	deps := Deps{Engine: e.engine, Store: e.store, Hub: e.hub, Wake: e.run.Wake, Auth: e.auth,
		Decider:    auth.NewDecider(e.engine, e.store, e.policy, e.log, auth.WithWorker(e.run), auth.WithDecisionCheck(requests.CheckDecision)),
		TrustProxy: e.trustProxy, SSO: e.sso, Logger: e.log, Version: "test"}
	srv := New(deps)
	addr := e.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var bound string
	var err error
	for range 50 { // the old socket may linger a moment after a restart
		var a interface{ String() string }
		a, err = srv.Start(addr)
		if err == nil {
			bound = a.String()
			break
		}
		srv = New(deps)
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		e.t.Fatalf("start server on %s: %v", addr, err)
	}
	e.srv, e.addr, e.base = srv, bound, "http://"+bound
}

// stopServer shuts the server down (websockets get a close frame).
func (e *deskEnv) stopServer() {
	e.mu.Lock()
	srv := e.srv
	e.srv = nil
	e.mu.Unlock()
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		e.t.Errorf("shutdown: %v", err)
	}
}

// createFeature starts a feature task whose every gate waits for a person.
func (e *deskEnv) createFeature(title string) string {
	e.t.Helper()
	t, err := e.engine.Create(context.Background(), graph.NewTask{Workflow: feature.Name, Title: title,
		Input:   json.RawMessage(`{"description":"` + featuretest.DefaultDescription + `"}`),
		Options: json.RawMessage(`{"gates":{}}`), CreatedBy: "test"})
	if err != nil {
		e.t.Fatalf("create: %v", err)
	}
	e.run.Wake()
	return t.ID
}

// waitPending waits until the task waits on an interrupt of kind.
func (e *deskEnv) waitPending(id, kind string) *graph.Interrupt {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		itr, err := e.store.PendingInterrupt(context.Background(), id)
		if err != nil {
			e.t.Fatalf("pending: %v", err)
		}
		if itr != nil && itr.Kind == kind {
			return itr
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("task %s never waited on %s", id, kind)
	return nil
}

// --- the browser ---

// tab is a browser tab of internal/browsertest (one browser for the whole
// test binary, a browser context per tab) with the desk tests' helpers.
type tab struct{ *browsertest.Tab }

// deskDiagnosis is what a failed waitJS reports of a desk page: its main
// and live data, the live state, the interrupt and the timeline's tail.
const deskDiagnosis = `(function(){var m=document.querySelector("main"),l=document.getElementById("live"),i=document.getElementById("interrupt"),t=document.querySelectorAll("#timeline li");` +
	`return JSON.stringify({main: m&&Object.assign({},m.dataset), live: l&&Object.assign({},l.dataset), state: (document.getElementById("live-state")||{}).textContent,` +
	`interrupt: i&&i.textContent.replace(/\\s+/g," ").slice(0,600), timeline: [].slice.call(t,-6).map(function(x){return x.dataset.seq+" "+x.textContent.replace(/\\s+/g," ").slice(0,80)})})})()`

func openTab(t *testing.T, name string) *tab {
	b := browsertest.Open(t, name)
	b.Diagnose = deskDiagnosis
	return &tab{b}
}

func (b *tab) do(steps ...chromedp.Action[chromedp.Void]) { b.T.Helper(); b.Do(steps...) }

func eval[T any](b *tab, expr string) T { b.T.Helper(); return browsertest.Eval[T](b.Tab, expr) }

// waitJS waits until a JavaScript expression is truthy, across page loads.
func (b *tab) waitJS(expr string, timeout time.Duration) { b.T.Helper(); b.WaitJS(expr, timeout) }

// text is the textContent of the first element matching a CSS selector,
// "" if none (browsertest's Text is the rendered innerText).
func (b *tab) text(css string) string {
	b.T.Helper()
	return eval[string](b, `(function(){var e=document.querySelector(`+jsq(css)+`);return e?e.textContent:""})()`)
}

// watchConsole collects the tab's console errors and exceptions (CSP
// refusals among them) from now on; the returned func lists them.
func (b *tab) watchConsole() func() []string { return b.Console() }

// texts is the text of every element matching a CSS selector.
func (b *tab) texts(css string) string {
	b.T.Helper()
	return eval[string](b, `[].map.call(document.querySelectorAll(`+jsq(css)+`),function(e){return e.textContent}).join("\n")`)
}

func (b *tab) screenshot(stage string) { b.T.Helper(); b.Screenshot(stage) }

// liveOpen waits until the page's websocket is open.
func (b *tab) liveOpen() {
	b.T.Helper()
	b.waitJS(`document.getElementById("live-state") && document.getElementById("live-state").dataset.state === "open"`, 10*time.Second)
}

// click clicks the element as a person would, once htmx has wired it up.
func (b *tab) click(css string) { b.T.Helper(); b.Click(css) }

// jsq quotes a string for JavaScript.
func jsq(s string) string { return browsertest.Q(s) }

func decisionInput(interruptID, action, by string) graph.DecisionInput {
	return graph.DecisionInput{InterruptID: interruptID, Action: action, DecidedBy: by}
}
