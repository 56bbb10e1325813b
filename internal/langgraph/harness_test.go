package langgraph_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/servetest"
	"github.com/gatehousehq/gatehouse/internal/web"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
)

const (
	testToken   = "langgraph-test-token-51c2"
	allowOrigin = "https://inbox.example"
)

// stack is one whole replica (server, hub, runner) on a fresh database,
// driven over real HTTP, as a LangGraph client drives it.
type stack struct {
	pool  *pgxpool.Pool
	store *postgres.Store
	stub  *featuretest.StubExecutor
	auth  *auth.Service
	base  string // http://host:port/langgraph
}

// setup starts the stack; policy, when given, is the approval policy
// (default: none).
func setup(t *testing.T, policy ...auth.Policy) *stack {
	t.Helper()
	pol := auth.NewPolicy(nil, nil)
	if len(policy) > 0 {
		pol = policy[0]
	}
	stub := featuretest.NewStub("")
	fw, err := feature.New(stub, feature.WithRetry(graph.RetryPolicy{Attempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	r := servetest.NewReplica(t, servetest.ReplicaOptions{Workflows: []graph.Workflow{fw}, HubSink: true,
		Workers: 4, Owner: "lg-test"})
	authSvc := auth.NewService(auth.Config{Store: r.Store, BootstrapToken: testToken})
	srv := web.New(web.Deps{Engine: r.Engine, Store: r.Store, Hub: r.Hub, Wake: r.Wake, Auth: authSvc,
		Decider: auth.NewDecider(r.Engine, r.Store, pol, nil, auth.WithWorker(r.Runner)), CORSOrigins: []string{allowOrigin},
		Ready: func(context.Context) error { return nil }})
	addr, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return &stack{pool: r.Pool, store: r.Store, stub: stub, auth: authSvc, base: "http://" + addr.String() + "/langgraph"}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
}

// detail is the {"detail"} of an error answer; it fails the test when the
// body is anything else.
func (r response) detail(t *testing.T) string {
	t.Helper()
	var e map[string]any
	r.decode(t, &e)
	d, ok := e["detail"].(string)
	if !ok || d == "" || len(e) != 1 {
		t.Fatalf("error body %s is not {\"detail\": …}", r.body)
	}
	return d
}

// do sends a request with the test key; body is a string or marshalled.
func (s *stack) do(t *testing.T, method, path string, body any, header ...string) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", testToken)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// sse is one server-sent event as it came over the wire.
type sse struct {
	event, id string
	data      []string // every data line
	raw       string
}

// parseSSE reads a whole event stream; comments are counted.
func parseSSE(t *testing.T, body []byte) (events []sse, comments int) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var cur sse
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.event != "" || len(cur.data) > 0 {
				events = append(events, cur)
			}
			cur = sse{}
		case strings.HasPrefix(line, ":"):
			comments++
		default:
			cur.raw += line + "\n"
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "event":
				cur.event = v
			case "id":
				cur.id = v
			case "data":
				cur.data = append(cur.data, v)
			default:
				t.Fatalf("unknown SSE field in %q", line)
			}
		}
	}
	if cur.event != "" || len(cur.data) > 0 {
		t.Fatalf("stream ended inside an event: %q", cur.raw)
	}
	return events, comments
}

// newThread creates a thread and returns its id.
func (s *stack) newThread(t *testing.T) string {
	t.Helper()
	r := s.do(t, http.MethodPost, "/threads", map[string]any{})
	if r.status != http.StatusOK {
		t.Fatalf("create thread: %d %s", r.status, r.body)
	}
	var th struct {
		ThreadID string `json:"thread_id"`
	}
	r.decode(t, &th)
	return th.ThreadID
}

// interruptedThread is a new thread whose feature task (described as
// description) waits at its first gate.
func (s *stack) interruptedThread(t *testing.T, description string) string {
	t.Helper()
	thread := s.newThread(t)
	if r := s.do(t, http.MethodPost, "/threads/"+thread+"/runs", gated(description)); r.status != http.StatusOK {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	s.waitStatus(t, thread, "interrupted")
	return thread
}

// gated is the run body that starts a feature task stopping at every gate.
func gated(description string) map[string]any {
	return map[string]any{"assistant_id": "feature", "input": map[string]any{"description": description},
		"config": map[string]any{"configurable": map[string]any{"gates": map[string]any{}}}, "stream_mode": []string{"values", "updates", "events"}}
}

// counts are the rows of every table a refused request must leave alone.
func (s *stack) counts(t *testing.T) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, q := range []string{"lg_threads", "lg_runs", "tasks", "decisions", "task_events",
		"interrupts WHERE status = 'pending'", "checkpoint_history"} {
		var n int64
		if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[q] = n
	}
	return out
}

// scene is what the refusal tests send bad requests to: an idle thread, a
// thread waiting at its first gate and its run, and the rows a refused
// request must leave as they are.
type scene struct {
	idle, waiting, run string
	before             map[string]int64
}

func (s *stack) scene(t *testing.T, description string) scene {
	t.Helper()
	sc := scene{idle: s.newThread(t), waiting: s.interruptedThread(t, description)}
	var runs []map[string]any
	s.do(t, http.MethodGet, "/threads/"+sc.waiting+"/runs", nil).decode(t, &runs)
	sc.run = runs[0]["run_id"].(string)
	sc.before = s.counts(t)
	return sc
}

// refused checks that r is status with a {"detail"} saying each of want,
// and that no row changed since the scene was set.
func (s *stack) refused(t *testing.T, sc scene, r response, status int, want ...string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%d %s, want %d", r.status, r.body, status)
	}
	d := r.detail(t)
	for _, w := range want {
		if !strings.Contains(d, w) {
			t.Fatalf("detail %q does not say %q", d, w)
		}
	}
	if after := s.counts(t); !maps.Equal(after, sc.before) {
		t.Fatalf("rows changed: %v → %v", sc.before, after)
	}
}
