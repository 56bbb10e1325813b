package gatehouse_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse"
	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/apitest"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// Note is the state of the test workflow.
type Note struct {
	Text     string `json:"text"`
	Feedback string `json:"feedback,omitempty"`
	Approved bool   `json:"approved"`
}

// noteGraph is a one-node workflow whose node is gated with kind kind.
func noteGraph(name, kind string) *graph.Builder[Note] {
	return graph.New[Note](name).
		Init(func(input json.RawMessage, _ graph.Options) (Note, error) {
			var n Note
			err := json.Unmarshal(input, &n)
			return n, err
		}).
		Node("write", func(_ context.Context, run *graph.NodeRun, n Note) (Note, error) {
			run.Artifact("note.md", "text/markdown", n.Text+n.Feedback)
			return n, nil
		}).
		Gate("write", graph.Gate[Note]{Kind: kind, Option: "allowNote", AlwaysAsks: true, Artifact: "note.md",
			OnApprove: func(n Note) (Note, error) { n.Approved = true; return n, nil },
			OnReject:  func(n Note, fb string, _ int) (Note, error) { n.Feedback = " (" + fb + ")"; return n, nil }}).
		Edge("write", graph.END).
		Result(func(n Note) any { return n })
}

func compile(t *testing.T, b *graph.Builder[Note]) graph.Workflow {
	t.Helper()
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

const dbURL = "postgres://127.0.0.1:1/none"

// TestNewRefuses: New names the problem of a bad configuration or a bad
// set of workflows, without touching the database.
func TestNewRefuses(t *testing.T) {
	t.Parallel()
	note := compile(t, noteGraph("note", "note"))
	broken := graph.New[Note]("broken").Node("a", func(_ context.Context, _ *graph.NodeRun, n Note) (Note, error) {
		return n, nil
	}).Edge("a", "nowhere")
	var nilGraph *graph.Graph[Note]
	for _, tc := range []struct {
		name string
		cfg  gatehouse.Config
		opts []gatehouse.Option
		want string
	}{
		{"NoDatabase", gatehouse.Config{}, nil, "DATABASE_URL: is not set"},
		{"BadDatabaseURL", gatehouse.Config{DatabaseURL: "postgres://%zz"}, nil, "DATABASE_URL: "},
		{"BadAddr", gatehouse.Config{DatabaseURL: dbURL, Addr: "8080"}, nil, `GATEHOUSE_ADDR: "8080": want host:port`},
		{"WeakAdminPassword", gatehouse.Config{DatabaseURL: dbURL, AdminPassword: "x"}, nil, "GATEHOUSE_ADMIN_PASSWORD"},
		{"DuplicateName", gatehouse.Config{DatabaseURL: dbURL},
			[]gatehouse.Option{gatehouse.WithWorkflows(note), gatehouse.WithGraph(noteGraph("note", "other"))},
			`workflow "note" (WithGraph #1): WithWorkflows #1 has this name`},
		{"BuiltinName", gatehouse.Config{DatabaseURL: dbURL},
			[]gatehouse.Option{gatehouse.WithGraph(noteGraph("feature", "note"))},
			`workflow "feature" (WithGraph #1): a built-in workflow has this name (WithoutBuiltins leaves the built-in ones out)`},
		{"DoesNotCompile", gatehouse.Config{DatabaseURL: dbURL}, []gatehouse.Option{gatehouse.WithGraph(broken)},
			`WithGraph #1 does not compile: `},
		{"NilWorkflow", gatehouse.Config{DatabaseURL: dbURL}, []gatehouse.Option{gatehouse.WithWorkflows(nilGraph)},
			"WithWorkflows #1 is nil"},
		{"NothingToServe", gatehouse.Config{DatabaseURL: dbURL}, []gatehouse.Option{gatehouse.WithoutBuiltins()},
			"no workflow to serve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, err := gatehouse.New(tc.cfg, tc.opts...)
			if err == nil || srv != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, %v; want an error containing %q", srv, err, tc.want)
			}
		})
	}
	// A compile error names the problem of the graph.
	_, err := gatehouse.New(gatehouse.Config{DatabaseURL: dbURL}, gatehouse.WithGraph(broken))
	if !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("compile error %q does not name the unknown node", err)
	}
	// Settings errors are *ConfigError, for programs that tell them apart.
	_, err = gatehouse.New(gatehouse.Config{})
	var ce *gatehouse.ConfigError
	if !errors.As(err, &ce) || ce.Setting != "DATABASE_URL" {
		t.Errorf("New without a database: %v, want a *ConfigError for DATABASE_URL", err)
	}
}

// TestConfigFromEnv reads the settings of gatehouse serve and names every
// bad one.
func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": dbURL, "GATEHOUSE_ADDR": "127.0.0.1:9999", "GATEHOUSE_WORKERS": "3",
		"GATEHOUSE_LEASE_TTL": "20s"}
	cfg, err := gatehouse.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || cfg.DatabaseURL != dbURL || cfg.Addr != "127.0.0.1:9999" || cfg.Workers != 3 || cfg.LeaseTTL != 20*time.Second {
		t.Fatalf("ConfigFromEnv: %+v, %v", cfg, err)
	}
	env = map[string]string{"GATEHOUSE_WORKERS": "many", "GATEHOUSE_LOG_LEVEL": "loud"}
	_, err = gatehouse.ConfigFromEnv(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "GATEHOUSE_WORKERS") || !strings.Contains(err.Error(), "GATEHOUSE_LOG_LEVEL") {
		t.Errorf("bad settings: %v, want both named", err)
	}
	env = map[string]string{"GATEHOUSE_WORKERS": "0"}
	if cfg, err := gatehouse.ConfigFromEnv(func(k string) string { return env[k] }); err != nil || cfg.Workers >= 0 {
		t.Errorf("GATEHOUSE_WORKERS=0: Workers %d, %v; want negative (no workers)", cfg.Workers, err)
	}
}

// TestRunServesACustomWorkflow runs a Server in this process on a fresh
// database with only a custom workflow, decides its gate (a kind of its
// own) over HTTP, and stops it by cancelling the context.
func TestRunServesACustomWorkflow(t *testing.T) {
	t.Parallel()
	const token = "root-package-token-0123456789"
	srv, err := gatehouse.New(gatehouse.Config{DatabaseURL: pgtest.NewDB(t), Addr: "127.0.0.1:0", Workers: 2,
		BootstrapToken: token, AdminPassword: "a-long-admin-password", Logger: slog.New(slog.DiscardHandler)},
		gatehouse.WithoutBuiltins(), gatehouse.WithGraph(noteGraph("note", "memo")), gatehouse.WithVersion("v0-test"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(srv.Workflows(), ","); got != "request,note" {
		t.Errorf("Workflows() = %s, want request (always served) and note", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-done:
		t.Fatalf("Run returned before serving: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("not ready within 60s")
	}
	c := apitest.Client{Base: "http://" + srv.Addr().String(), Token: token}

	if code, raw := c.Do(t, "POST", "/api/v1/tasks", map[string]any{"workflow": "feature", "input": map[string]any{}}, nil); code != 400 || !strings.Contains(string(raw), "unknown_workflow") {
		t.Errorf("a built-in workflow WithoutBuiltins: %d %s", code, raw)
	}
	task := c.Create(t, "note", map[string]any{"text": "hello"}, nil)
	w := c.Await(t, task.ID, "waiting", "")
	if w.PendingInterrupt.Kind != "memo" || w.PendingInterrupt.Payload.Artifact.Content != "hello" {
		t.Fatalf("the gate: %+v", w.PendingInterrupt)
	}
	// The custom kind is an ordinary kind: the inbox lists it.
	var inbox struct {
		Interrupts []struct {
			Kind string `json:"kind"`
		} `json:"interrupts"`
	}
	if code, raw := c.Do(t, "GET", "/api/v1/interrupts?status=pending&kind=memo", nil, &inbox); code != 200 ||
		len(inbox.Interrupts) != 1 || inbox.Interrupts[0].Kind != "memo" {
		t.Errorf("pending memo interrupts: %d %s", code, raw)
	}
	c.Decide(t, w, "reject", "louder")
	w = c.Await(t, task.ID, "waiting", w.PendingInterrupt.ID)
	if w.PendingInterrupt.Payload.Artifact.Content != "hello (louder)" {
		t.Fatalf("after the rejection: %+v", w.PendingInterrupt.Payload.Artifact)
	}
	c.Decide(t, w, "approve", "")
	var got Note
	if c.Await(t, task.ID, "succeeded", "").Decode(t, &got); !got.Approved || got.Feedback != " (louder)" {
		t.Errorf("result %+v", got)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel: %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of the cancel")
	}
	if err := srv.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a second Run: %v", err)
	}
}

// TestRunReturnsTheErrorThatStoppedIt: a database that cannot be reached,
// an address that is taken.
func TestRunReturnsTheErrorThatStoppedIt(t *testing.T) {
	t.Parallel()
	quiet := slog.New(slog.DiscardHandler)
	t.Run("NoDatabase", func(t *testing.T) {
		t.Parallel()
		srv, err := gatehouse.New(gatehouse.Config{DatabaseURL: dbURL + "?connect_timeout=2", Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "connect to the database") {
			t.Errorf("Run: %v", err)
		}
	})
	t.Run("AddressTaken", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		srv, err := gatehouse.New(gatehouse.Config{DatabaseURL: pgtest.NewDB(t), Addr: l.Addr().String(),
			AdminPassword: "a-long-admin-password", Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Run(ctx); err == nil || !strings.Contains(err.Error(), "listen on "+l.Addr().String()) {
			t.Errorf("Run: %v", err)
		}
	})
}

// ExampleNew shows New refusing a second workflow of the same name: the
// error names the workflow and where each came from.
func ExampleNew() {
	a, err := noteGraph("memo", "memo").Compile()
	if err != nil {
		panic(err)
	}
	_, err = gatehouse.New(gatehouse.Config{DatabaseURL: "postgres://localhost/gatehouse"},
		gatehouse.WithWorkflows(a, a))
	fmt.Println(err)
	// Output: gatehouse: workflow "memo" (WithWorkflows #2): WithWorkflows #1 has this name
}
