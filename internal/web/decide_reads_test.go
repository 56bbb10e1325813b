package web

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// statementLog records, while on, the sqlc name of every statement a pool
// runs, batched or not.
type statementLog struct {
	mu    sync.Mutex
	on    bool
	names []string
}

func (l *statementLog) add(sql string) {
	name := sql
	if f := strings.Fields(sql); len(f) > 2 && f[0] == "--" && f[1] == "name:" {
		name = f[2]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.on {
		l.names = append(l.names, name)
	}
}

// record runs f and returns the statements it ran, without the
// announcements of commits (NOTIFY, sent after them).
func (l *statementLog) record(f func()) []string {
	l.mu.Lock()
	l.on, l.names = true, nil
	l.mu.Unlock()
	f()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on = false
	return slices.DeleteFunc(l.names, func(n string) bool { return n == "TxAsyncCommit" || n == "NotifyMany" })
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.add(d.SQL)
	return ctx
}
func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (l *statementLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (l *statementLog) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.add(d.SQL)
}
func (l *statementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// traced is b's database behind a second server whose pool logs every
// statement.
func traced(t *testing.T, b *bundle, policy auth.Policy) (*bundle, *statementLog) {
	t.Helper()
	log := &statementLog{}
	cfg := b.pool.Config().Copy()
	cfg.ConnConfig.Tracer = log
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := postgres.NewStore(pool, postgres.Options{})
	engine, err := graph.NewEngine(store, b.engine.Workflows())
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Deps{Engine: engine, Store: store, Hub: b.hub, BootstrapToken: testToken,
		Decider: auth.NewDecider(engine, store, policy, nil)})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &bundle{pool: pool, store: store, engine: engine, hub: b.hub, srv: srv, base: ts.URL}, log
}

// TestDecisionReads: a decision over the API reads the task and its
// interrupt once, together, and writes the decision in one statement; the
// answer needs no read of its own. A regression to separate or repeated
// reads fails here. An approval of several reads its answer back.
func TestDecisionReads(t *testing.T) {
	t.Parallel()
	policy := auth.NewPolicy(map[string]int{"merge": 2}, nil)
	b := setup(t, setupOpts{token: testToken, policy: &policy})
	tb, log := traced(t, b, policy)

	w := b.waitingTask(t)
	var r reply
	got := log.record(func() {
		r = tb.do(t, http.MethodPost, "/api/v1/tasks/"+w.ID+"/decisions",
			map[string]any{"interrupt_id": w.PendingInterrupt.ID, "action": "approve"})
	})
	if r.status != http.StatusAccepted {
		t.Fatalf("decision: %d %s", r.status, r.body)
	}
	// TxGenericPlans and the outbox ride in DecisionRecord's batch: the
	// same round trip and transaction (its plans, its notifications; a
	// decision goes to webhooks only).
	if want := []string{"DecisionSubject", "TxGenericPlans", "DecisionRecord", "OutboxEnqueueWebhooks"}; !slices.Equal(got, want) {
		t.Errorf("a decision ran %v, want %v", got, want)
	}
	if got := log.record(func() { tb.getTask(t, w.ID) }); !slices.Equal(got, []string{"TaskWithPending"}) {
		t.Errorf("GET task ran %v, want [TaskWithPending]", got)
	}

	// merge=2: the first approval is recorded and the answer read back
	// with the approvals so far.
	task := b.create(t, featureTask(map[string]bool{"allowPrd": true, "allowPlan": true}))
	if out := b.run(t, task.ID); out.Status != graph.StatusWaiting || out.Interrupt.Kind != "merge" {
		t.Fatalf("run to merge: %+v", out)
	}
	merge := b.getTask(t, task.ID).PendingInterrupt
	got = log.record(func() {
		r = tb.do(t, http.MethodPost, "/api/v1/tasks/"+task.ID+"/decisions", map[string]any{"interrupt_id": merge.ID, "action": "approve"})
	})
	if r.status != http.StatusAccepted {
		t.Fatalf("first approval: %d %s", r.status, r.body)
	}
	if i := slices.Index(got, "TaskWithPending"); !slices.Equal(got[:1], []string{"DecisionSubject"}) || i < 0 ||
		slices.Contains(got, "TaskGet") || slices.Contains(got, "InterruptGet") {
		t.Errorf("an approval of two ran %v", got)
	}
}

// TestDecisionAnswerIsTheTaskAfterIt: the 202 answer to a decision is,
// byte for byte, what reading the task right after the decision gives
// (no worker runs here to move it on).
func TestDecisionAnswerIsTheTaskAfterIt(t *testing.T) {
	t.Parallel()
	policy := auth.NewPolicy(map[string]int{"merge": 2}, nil)
	b := setup(t, setupOpts{token: testToken, policy: &policy})
	tokens := b.approverTokens(t, "ann", "bob")
	check := func(what, taskID string, body map[string]any, as string) {
		t.Helper()
		r := b.doAuth(t, http.MethodPost, "/api/v1/tasks/"+taskID+"/decisions", body, as)
		if r.status != http.StatusAccepted {
			t.Fatalf("%s: %d %s", what, r.status, r.body)
		}
		g := b.do(t, http.MethodGet, "/api/v1/tasks/"+taskID, nil)
		if g.status != http.StatusOK || !bytes.Equal(bytes.TrimSpace(r.body), bytes.TrimSpace(g.body)) {
			t.Fatalf("%s: the answer\n%s\nis not the task after it\n%s", what, r.body, g.body)
		}
	}
	w := b.waitingTask(t)
	check("approve", w.ID, map[string]any{"interrupt_id": w.PendingInterrupt.ID, "action": "approve"}, "Bearer "+testToken)
	if out := b.run(t, w.ID); out.Status != graph.StatusWaiting {
		t.Fatalf("run to the plan: %+v", out)
	}
	plan := b.getTask(t, w.ID).PendingInterrupt
	check("reject", w.ID, map[string]any{"interrupt_id": plan.ID, "action": "reject", "feedback": "Smaller steps."},
		"Bearer "+testToken)

	task := b.create(t, featureTask(map[string]bool{"allowPrd": true, "allowPlan": true}))
	if out := b.run(t, task.ID); out.Status != graph.StatusWaiting || out.Interrupt.Kind != "merge" {
		t.Fatalf("run to merge: %+v", out)
	}
	merge := b.getTask(t, task.ID).PendingInterrupt
	approve := map[string]any{"interrupt_id": merge.ID, "action": "approve"}
	check("one approval of two", task.ID, approve, tokens["ann"])
	check("the second approval", task.ID, approve, tokens["bob"])
}
