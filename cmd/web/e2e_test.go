package main

// End-to-end tests: real `gatehouse serve` processes on one real PostgreSQL
// database, driven over HTTP and websockets, killed and restarted.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/internal/browsertest"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/servetest"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
)

const e2eToken = "e2e-bootstrap-token-0123456789"

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gatehouse-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "gatehouse")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building gatehouse:", err)
		os.Exit(1)
	}
	code := m.Run()
	browsertest.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one running `gatehouse serve`.
type proc struct {
	*servetest.Process
	t *testing.T
}

// serve starts a process with the given extra environment and waits until
// it listens.
func serve(t *testing.T, dbURL string, env ...string) *proc {
	t.Helper()
	env = append([]string{"DATABASE_URL=" + dbURL, "GATEHOUSE_ADDR=127.0.0.1:0",
		"GATEHOUSE_BOOTSTRAP_TOKEN=" + e2eToken, "GATEHOUSE_LOG_LEVEL=debug"}, env...)
	return &proc{Process: servetest.Start(t, binary, "", []string{"serve"}, env...), t: t}
}

func (p *proc) url(path string) string { return "http://" + p.Addr + path }

// do sends a JSON request with the bootstrap token and decodes the answer.
func (p *proc) do(method, path string, body, out any) int {
	p.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			p.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, p.url(path), r)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			p.t.Fatalf("%s %s: decoding %q: %v", method, path, data, err)
		}
	}
	return resp.StatusCode
}

type taskJSON struct {
	ID               string          `json:"id"`
	Status           string          `json:"status"`
	Error            string          `json:"error"`
	PendingInterrupt *interruptJSON  `json:"pending_interrupt"`
	Result           json.RawMessage `json:"result"`
}

type interruptJSON struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Node string `json:"node"`
}

type eventJSON struct {
	Seq  int64  `json:"seq"`
	Type string `json:"type"`
	Node string `json:"node"`
}

func (p *proc) createFeature(options any, description string) string {
	p.t.Helper()
	body := map[string]any{"workflow": "feature", "input": map[string]any{"description": description}}
	if options != nil {
		body["options"] = options
	}
	var task taskJSON
	if code := p.do("POST", "/api/v1/tasks", body, &task); code != http.StatusCreated {
		p.t.Fatalf("create task: status %d", code)
	}
	return task.ID
}

type db struct {
	t    *testing.T
	url  string
	pool *pgxpool.Pool
}

func newDB(t *testing.T) *db {
	t.Helper()
	url := pgtest.NewDB(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &db{t: t, url: url, pool: pool}
}

func (d *db) int(query string, args ...any) int {
	d.t.Helper()
	var n int
	if err := d.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		d.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// waitAll waits until no task is queued or running.
func (d *db) waitAll(within time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if d.int("SELECT count(*) FROM tasks WHERE status IN ('queued', 'running')") == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.t.Fatalf("tasks still queued or running after %s: %d", within,
		d.int("SELECT count(*) FROM tasks WHERE status IN ('queued', 'running')"))
}

// assertEveryNodeOnce checks the history: every node of every task
// completed exactly once.
func (d *db) assertEveryNodeOnce(tasks int) {
	d.t.Helper()
	if n := d.int("SELECT count(*) FROM tasks WHERE status = 'succeeded'"); n != tasks {
		d.t.Fatalf("%d of %d tasks succeeded", n, tasks)
	}
	nodes := len(feature.Nodes())
	if n := d.int("SELECT count(*) FROM checkpoint_history WHERE reason = 'node'"); n != tasks*nodes {
		d.t.Errorf("%d node completions in the history, want %d", n, tasks*nodes)
	}
	if n := d.int(`SELECT count(*) FROM (SELECT task_id, last_node_id FROM checkpoint_history WHERE reason = 'node'
		GROUP BY 1, 2 HAVING count(*) <> 1) x`); n != 0 {
		d.t.Errorf("%d (task, node) pairs completed more than once", n)
	}
	if n := d.int(`SELECT count(*) FROM (SELECT task_id FROM checkpoint_history WHERE reason = 'node'
		GROUP BY 1 HAVING count(DISTINCT last_node_id) <> $1) x`, nodes); n != 0 {
		d.t.Errorf("%d tasks miss node completions", n)
	}
}

func writeScript(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestE2ETwoProcessesFiftyTasks(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	script := writeScript(t, `{"delay": "20ms"}`)
	a := serve(t, d.url, "LLM_SCRIPT_FILE="+script, "GATEHOUSE_WORKERS=4")
	b := serve(t, d.url, "LLM_SCRIPT_FILE="+script, "GATEHOUSE_WORKERS=4")
	for i := range 50 {
		p := a
		if i%2 == 1 {
			p = b
		}
		p.createFeature(nil, fmt.Sprintf("Feature number %d: export reports as CSV", i))
	}
	d.waitAll(60 * time.Second)
	d.assertEveryNodeOnce(50)
	if n := d.int("SELECT count(DISTINCT last_owner) FROM tasks"); n != 2 {
		t.Errorf("tasks were last run by %d replicas, want both", n)
	}
	for _, p := range []*proc{a, b} {
		if !strings.Contains(d.ownerList(), p.Replica) {
			t.Errorf("replica %s ran no task", p.Replica)
		}
	}
}

func (d *db) ownerList() string {
	rows, err := d.pool.Query(context.Background(), "SELECT DISTINCT last_owner FROM tasks")
	if err != nil {
		d.t.Fatal(err)
	}
	defer rows.Close()
	var owners []string
	for rows.Next() {
		var o string
		_ = rows.Scan(&o)
		owners = append(owners, o)
	}
	return strings.Join(owners, " ")
}

func TestE2EKillNineMidNodeOtherProcessTakesOver(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	script := writeScript(t, `{"delay": "400ms"}`)
	env := []string{"LLM_SCRIPT_FILE=" + script, "GATEHOUSE_WORKERS=8", "GATEHOUSE_LEASE_TTL=1s"}
	victim := serve(t, d.url, env...)
	for i := range 12 {
		victim.createFeature(nil, fmt.Sprintf("Takeover feature %d", i))
	}
	// Wait until the victim holds tasks mid-node, then kill it outright.
	deadline := time.Now().Add(10 * time.Second)
	for d.int("SELECT count(*) FROM tasks WHERE lease_owner = $1", victim.Replica) < 4 {
		if time.Now().After(deadline) {
			t.Fatal("the victim never held tasks")
		}
		time.Sleep(10 * time.Millisecond)
	}
	held := d.int("SELECT count(*) FROM tasks WHERE lease_owner = $1", victim.Replica)
	if err := victim.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.Exited
	survivor := serve(t, d.url, env...)
	d.waitAll(60 * time.Second)
	d.assertEveryNodeOnce(12)
	if n := d.int("SELECT count(*) FROM tasks WHERE last_owner = $1", survivor.Replica); n < held {
		t.Errorf("survivor ran %d tasks, want at least the %d the victim held", n, held)
	}
}

func TestE2EWebsocketFollowsTaskRunByAnotherProcess(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	script := writeScript(t, `{"delay": "30ms"}`)
	// A serves the API and websockets only; B runs every task.
	a := serve(t, d.url, "LLM_SCRIPT_FILE="+script, "GATEHOUSE_WORKERS=0")
	b := serve(t, d.url, "LLM_SCRIPT_FILE="+script, "GATEHOUSE_WORKERS=4")

	id := a.createFeature(nil, "Followed live from another replica")
	evs := a.follow(t, id, 0, "task.completed", 0)
	assertSeqs(t, evs, 1)
	if d.int("SELECT count(*) FROM tasks WHERE last_owner = $1", b.Replica) != 1 {
		t.Fatal("task not run by B")
	}
	if n := d.int("SELECT count(*) FROM task_events WHERE task_id = $1", id); n != len(evs) {
		t.Fatalf("websocket gave %d events, the table has %d", len(evs), n)
	}

	// Disconnect part way, reconnect with after=N: the missed events
	// first, then the live ones, none twice.
	id2 := a.createFeature(nil, "Followed with a reconnect")
	first := a.follow(t, id2, 0, "", 5)
	last := first[len(first)-1].Seq
	time.Sleep(300 * time.Millisecond)
	rest := a.follow(t, id2, last, "task.completed", 0)
	all := append(first, rest...)
	assertSeqs(t, all, 1)
	if n := d.int("SELECT count(*) FROM task_events WHERE task_id = $1", id2); n != len(all) {
		t.Fatalf("got %d events over two connections, the table has %d", len(all), n)
	}
}

// follow opens the task's stream after seq and reads until an event of
// type until arrives, or max events (0: no limit).
func (p *proc) follow(t *testing.T, taskID string, after int64, until string, max int) []eventJSON {
	t.Helper()
	u := fmt.Sprintf("ws://%s/api/v1/tasks/%s/stream?after=%d", p.Addr, taskID, after)
	h := http.Header{"Authorization": {"Bearer " + e2eToken}}
	conn, resp, err := websocket.DefaultDialer.Dial(u, h)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (status %d)", u, err, status)
	}
	defer conn.Close()
	var out []eventJSON
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		var ev eventJSON
		if err := conn.ReadJSON(&ev); err != nil {
			t.Fatalf("reading the stream after %d events: %v", len(out), err)
		}
		out = append(out, ev)
		if ev.Type == until || (max > 0 && len(out) == max) {
			return out
		}
	}
}

func assertSeqs(t *testing.T, evs []eventJSON, from int64) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != from+int64(i) {
			t.Fatalf("event %d has seq %d, want %d (gap or repeat)", i, ev.Seq, from+int64(i))
		}
	}
}

func TestE2EGracefulShutdownMidNode(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	script := writeScript(t, `{"delays": {"feature.research": "1500ms"}}`)
	env := []string{"LLM_SCRIPT_FILE=" + script, "GATEHOUSE_WORKERS=2", "GATEHOUSE_SHUTDOWN_GRACE=8s", "GATEHOUSE_LEASE_TTL=30s"}
	p := serve(t, d.url, env...)
	id := p.createFeature(nil, "Interrupted by a deploy")
	deadline := time.Now().Add(10 * time.Second)
	for d.int("SELECT count(*) FROM task_events WHERE task_id = $1 AND type = 'node.started' AND node = 'research'", id) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("research never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited:
	case <-time.After(8 * time.Second):
		t.Fatal("did not exit within the grace period")
	}
	if p.Err() != nil {
		t.Fatalf("exit: %v", p.Err())
	}
	t.Logf("exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	// research finished before the exit; nothing after it started; the
	// lease went back.
	if n := d.int("SELECT count(*) FROM checkpoint_history WHERE task_id = $1 AND reason = 'node' AND last_node_id = 'research'", id); n != 1 {
		t.Fatalf("research completed %d times before exit, want 1", n)
	}
	if n := d.int("SELECT count(*) FROM tasks WHERE id = $1 AND lease_owner IS NULL AND status = 'running'", id); n != 1 {
		t.Fatal("task not handed back as running without a lease")
	}
	serve(t, d.url, env...)
	d.waitAll(30 * time.Second)
	d.assertEveryNodeOnce(1)
}

func TestE2ERefusesNewerSchema(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	if _, err := d.pool.Exec(context.Background(),
		"INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, true)"); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+d.url, "GATEHOUSE_ADDR=127.0.0.1:0")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "newer than this binary") {
		t.Fatalf("want a refusal naming the schema, got %v:\n%s", err, out)
	}
}

func TestE2EUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"serve", "--nope"}, nil, "flag provided but not defined"},
		{[]string{"frobnicate"}, nil, "unknown command"},
		{[]string{"serve"}, []string{"DATABASE_URL="}, "DATABASE_URL is not set"},
		{[]string{"serve"}, []string{"DATABASE_URL=postgres://x", "GATEHOUSE_WORKERS=many"}, "GATEHOUSE_WORKERS"},
		{[]string{"migrate", "sideways"}, []string{"DATABASE_URL=postgres://x"}, "want up, down or status"},
	}
	for _, tc := range cases {
		cmd := exec.Command(binary, tc.args...)
		cmd.Env = append(os.Environ(), tc.env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 {
			t.Errorf("%v: exit %v, want 2", tc.args, err)
		}
		if lines := strings.Count(strings.TrimSpace(stderr.String()), "\n"); lines != 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stderr %q, want one line with %q", tc.args, stderr.String(), tc.want)
		}
	}
	out, err := exec.Command(binary, "--help").Output()
	if err != nil || !strings.Contains(string(out), "GATEHOUSE_LEASE_TTL") {
		t.Errorf("--help: %v\n%s", err, out)
	}
}
