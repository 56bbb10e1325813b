package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/requests"
	"github.com/gatehousehq/gatehouse/internal/servetest"
	"github.com/gatehousehq/gatehouse/internal/web"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
	"github.com/gatehousehq/gatehouse/internal/workflows/request"
)

const testToken = "mcp-test-bootstrap-token-7f1e"

// stack is one whole replica (server, hub, runner) on a fresh database,
// driven over real HTTP as an MCP client drives it.
type stack struct {
	pool  *pgxpool.Pool
	store *postgres.Store
	auth  *auth.Service
	srv   *web.Server
	base  string // http://host:port
	// serve starts a server on the stack's database, hub and runner, as a
	// restarted replica does; it sets srv and base.
	serve func(t *testing.T)
}

func setup(t *testing.T) *stack {
	t.Helper()
	fw, err := feature.New(featuretest.NewStub(""), feature.WithRetry(graph.RetryPolicy{Attempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	rw, err := request.New()
	if err != nil {
		t.Fatal(err)
	}
	policy := auth.NewPolicy(nil, nil)
	r := servetest.NewReplica(t, servetest.ReplicaOptions{Workflows: []graph.Workflow{fw, rw}, HubSink: true,
		Engine: []graph.EngineOption{graph.WithRaiseHook(policy.Raise)}, Workers: 2, Owner: "mcp-test"})
	authSvc := auth.NewService(auth.Config{Store: r.Store, BootstrapToken: testToken})
	s := &stack{pool: r.Pool, store: r.Store, auth: authSvc}
	s.serve = func(t *testing.T) {
		srv := web.New(web.Deps{Engine: r.Engine, Store: r.Store, Hub: r.Hub, Wake: r.Wake, Auth: authSvc,
			Decider: auth.NewDecider(r.Engine, r.Store, policy, nil, auth.WithWorker(r.Runner), auth.WithDecisionCheck(requests.CheckDecision)),
			Ready:   func(context.Context) error { return nil }})
		addr, err := srv.Start("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s.srv, s.base = srv, "http://"+addr.String()
		t.Cleanup(func() {
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			if err := srv.Shutdown(sctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
	}
	s.serve(t)
	return s
}

// restart starts another server on the same database (the stack's first
// one was shut down).
func (s *stack) restart(t *testing.T) { s.serve(t) }

// token makes an API token of role and returns its secret.
func (s *stack) token(t *testing.T, name string, role auth.Role) string {
	t.Helper()
	secret, _, err := s.auth.CreateToken(context.Background(), "test", name, role)
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// client connects the official Go SDK's client with token; opts may set
// handlers (progress).
func (s *stack) client(t *testing.T, token string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "gatehouse-test", Version: "1"}, opts)
	tr := &sdk.StreamableClientTransport{Endpoint: s.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call calls a tool; the result must not be a protocol error.
func call(t *testing.T, cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// ok decodes a successful result's structuredContent into v, and checks
// that the text block holds the same JSON.
func ok(t *testing.T, res *sdk.CallToolResult, v any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("isError: %s", text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	var fromText any
	if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil {
		t.Fatalf("text block is not JSON: %q", text(res))
	}
	var fromStructured any
	_ = json.Unmarshal(b, &fromStructured)
	tb, _ := json.Marshal(fromText)
	sb, _ := json.Marshal(fromStructured)
	if string(tb) != string(sb) {
		t.Fatalf("text block %s differs from structuredContent %s", tb, sb)
	}
}

// failed checks a tool error naming want.
func failed(t *testing.T, res *sdk.CallToolResult, want ...string) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want isError, got %s", text(res))
	}
	for _, w := range want {
		if !strings.Contains(text(res), w) {
			t.Fatalf("error %q does not name %q", text(res), w)
		}
	}
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// api calls the JSON API and returns its body; the status must be 2xx.
func (s *stack) api(t *testing.T, token, method, path, body string) string {
	t.Helper()
	status, b := s.raw(t, token, method, path, body)
	if status/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, status, b)
	}
	return string(b)
}

// raw sends a request with token and a JSON body (none when ""), with the
// headers given (name, value, …); the status and the body of the answer.
func (s *stack) raw(t *testing.T, token, method, path, body string, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal([]byte(a), &va); err != nil {
		t.Fatalf("%q: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &vb); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return string(ja) == string(jb)
}

// page fetches a desk page with a session and returns its HTML.
func (s *stack) page(t *testing.T, path, session string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.base+path, nil)
	req.AddCookie(&http.Cookie{Name: "gatehouse_session", Value: session})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}
