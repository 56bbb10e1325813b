package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/workflows/builtin"
)

// runBundle runs `gatehouse run` in-process against a fresh database.
type runBundle struct {
	t    *testing.T
	url  string
	pool *pgxpool.Pool
	dir  string
}

func setupRun(t *testing.T) *runBundle {
	t.Helper()
	url := pgtest.NewDB(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &runBundle{t: t, url: url, pool: pool, dir: t.TempDir()}
}

func (b *runBundle) file(name, content string) string {
	b.t.Helper()
	p := filepath.Join(b.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		b.t.Fatal(err)
	}
	return p
}

// run runs the command with stdin and returns its exit status and output.
func (b *runBundle) run(stdin string, args ...string) (int, string, string) {
	b.t.Helper()
	return b.runEnv(nil, stdin, args...)
}

// env is the command's environment: the test database, USER=ann, and
// extra on top.
func (b *runBundle) env(extra map[string]string) func(string) string {
	env := map[string]string{"DATABASE_URL": b.url, "USER": "ann", "GATEHOUSE_LEASE_TTL": "2s"}
	for k, v := range extra {
		env[k] = v
	}
	return func(k string) string { return env[k] }
}

// runEnv is run with extra environment variables.
func (b *runBundle) runEnv(extra map[string]string, stdin string, args ...string) (int, string, string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, append([]string{"run"}, args...), b.env(extra), strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func (b *runBundle) query(sql string, args ...any) string {
	b.t.Helper()
	var s string
	if err := b.pool.QueryRow(context.Background(), sql, args...).Scan(&s); err != nil {
		b.t.Fatalf("%s: %v", sql, err)
	}
	return s
}

var taskIDRe = regexp.MustCompile(`task ([0-9a-f-]{36})`)

const featureInput = `{"description": "Let users export their monthly reports as CSV files."}`

// TestRunFeatureInTheTerminal: a feature task with every gate closed,
// driven from scripted standard input: one rejection with feedback, then
// approvals, to success. Its creator approves the merge too, which
// separation of duties forbids by default (TestRunSeparationOfDuties):
// GATEHOUSE_SOD_KINDS=none allows it, so one person drives it all.
func TestRunFeatureInTheTerminal(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	in := b.file("in.json", featureInput)
	stdin := "r Name the CSV columns and the encoding.\n" + "a\n" + "a\n" + "approve\n"
	code, out, errs := b.runEnv(map[string]string{"GATEHOUSE_SOD_KINDS": "none"}, stdin, "feature", "--input", in)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	m := taskIDRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no task id in\n%s", out)
	}
	id := m[1]
	for _, want := range []string{
		"── prd · Approve the PRD (spec.yaml) · requirements, iteration 1",
		"prd> r Name the CSV columns and the encoding.",
		"● reject: Name the CSV columns and the encoding. by cli:ann",
		"✓ requirements:2",
		"── prd · Approve the PRD (spec.yaml) · requirements, iteration 2",
		"── plan · Approve the implementation plan (plan.yaml) · plan, iteration 1",
		"── merge · Approve the merge (merge.md) · merge, iteration 1",
		"───── merge.md (text/markdown) ─────",
		"\nsucceeded in ",
		"completed_phases:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if i, j := strings.Index(out, "✓ validate_plan_tasks"), strings.Index(out, "── merge"); i < 0 || j < i {
		t.Errorf("progress lines out of order")
	}
	if st := b.query(`SELECT status FROM tasks WHERE id = $1`, id); st != "succeeded" {
		t.Errorf("task status %s", st)
	}
	if d := b.query(`SELECT string_agg(action || ':' || decided_by, ',' ORDER BY decided_at) FROM decisions WHERE task_id = $1`, id); d != "reject:cli:ann,approve:cli:ann,approve:cli:ann,approve:cli:ann" {
		t.Errorf("decisions %s", d)
	}
	// The feedback reached the requirements prompt of its second run.
	if p := b.query(`SELECT data->>'prompt' FROM task_events WHERE task_id = $1 AND type = 'llm.call' AND phase = 'requirements:2'`, id); !strings.Contains(p, "Name the CSV columns and the encoding.") {
		t.Errorf("requirements:2 prompt lacks the feedback:\n%s", p)
	}
	if testing.Verbose() {
		t.Logf("transcript:\n%s", out)
	}
}

// TestRunSeparationOfDuties: with the default policy (GATEHOUSE_SOD_KINDS
// merge) the creator of a feature task approves its PRD and plan at the
// prompt, but not its merge: the refusal says why and how to go on, writes
// no decision, is recorded in the audit trail, and the prompt stays at the
// merge, where a rejection with feedback goes through. Another principal
// (run --attach --as) approves the redone merge.
func TestRunSeparationOfDuties(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	in := b.file("in.json", featureInput)
	code, out, errs := b.run("a\na\na\nr Squash the commits first.\nq\n", "feature", "--input", in)
	if code != exitDetached {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitDetached, out, errs)
	}
	id := taskIDRe.FindStringSubmatch(out)[1]
	for _, want := range []string{
		"plan> a\n",
		"── merge · Approve the merge (merge.md) · merge, iteration 1",
		"merge> a\n" +
			"refused: Separation of duties: cli:ann started this task and may not approve its own merge; another approver must approve it.\n" +
			"  to go on, another approver approves it: in the browser (/tasks/" + id + "),\n" +
			"  or with gatehouse run --attach " + id + " --as NAME;\n" +
			"  or allow it with GATEHOUSE_SOD_KINDS=none. Here: r(eject) FEEDBACK, or q(uit) to leave it waiting.\n" +
			"merge> r Squash the commits first.\n",
		"● reject: Squash the commits first. by cli:ann",
		"── merge · Approve the merge (merge.md) · merge, iteration 2",
		"detached: task " + id + " waits for a decision",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if t.Failed() {
		t.Fatalf("transcript:\n%s", out)
	}
	// No decision for the refused approval; the refusal is in the audit trail.
	decisions := `SELECT string_agg(i.kind || ':' || d.action || ':' || d.decided_by, ',' ORDER BY d.decided_at)
		FROM decisions d JOIN interrupts i ON i.id = d.interrupt_id WHERE d.task_id = $1`
	if d := b.query(decisions, id); d != "prd:approve:cli:ann,plan:approve:cli:ann,merge:reject:cli:ann" {
		t.Errorf("decisions %s", d)
	}
	if a := b.query(`SELECT count(*) || ' ' || string_agg(actor || ' ' || (data->>'kind') || ' ' || (data->>'action'), ',')
		FROM audit_events WHERE kind = $1 AND subject = $2`, auth.AuditDecisionRefused, id); a != "1 cli:ann merge approve" {
		t.Errorf("decision.refused audit events: %s", a)
	}
	if st := b.query(`SELECT status FROM tasks WHERE id = $1`, id); st != "waiting" {
		t.Errorf("task status %s", st)
	}

	// Another approver, as the hint says.
	code, out, _ = b.run("a\n", "--attach", id, "--as", "bob")
	if code != 0 || !strings.Contains(out, "● approve by bob") || !strings.Contains(out, "succeeded") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if d := b.query(decisions, id); d != "prd:approve:cli:ann,plan:approve:cli:ann,merge:reject:cli:ann,merge:approve:bob" {
		t.Errorf("decisions %s", d)
	}
}

// syncBuffer is a bytes.Buffer safe to read while the command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunSeveralApprovals: with GATEHOUSE_APPROVALS=prd=2 an approval at
// the prompt is one of two: the terminal says so and keeps following the
// task, which waits; another approver's approval, given elsewhere through
// a Decider of the same configuration (as the desk would), decides the PRD,
// and the terminal follows the task on to its end.
func TestRunSeveralApprovals(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	in := b.file("in.json", featureInput)
	extra := map[string]string{"GATEHOUSE_APPROVALS": "prd=2"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"run", "feature", "--input", in, "--auto-approve", "allowPlan,allowMerge"}, b.env(extra),
			strings.NewReader("a\n"), &stdout, &stderr)
	}()
	const waiting = "prd> a\n1 of 2 approvals recorded; waiting for another approver\n"
	for deadline := time.Now().Add(time.Minute); !strings.Contains(stdout.String(), waiting); {
		select {
		case code := <-done:
			t.Fatalf("exit %d before the second approval:\n%s\n%s", code, stdout.String(), stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in\n%s", waiting, stdout.String())
		}
	}
	id := taskIDRe.FindStringSubmatch(stdout.String())[1]
	if st := b.query(`SELECT t.status || ' ' || (SELECT count(*) FROM decisions WHERE task_id = t.id) || ' ' ||
		(SELECT string_agg(approver, ',') FROM approvals WHERE task_id = t.id) FROM tasks t WHERE t.id = $1`, id); st != "waiting 0 cli:ann" {
		t.Errorf("task status, decisions, approvers: %s", st)
	}
	iid := b.query(`SELECT id::text FROM interrupts WHERE task_id = $1 AND kind = 'prd' AND status = 'pending'`, id)

	// The same approver again, from another terminal: refused, and the
	// prompt stays (q leaves).
	code, out, _ := b.runEnv(extra, "a\nq\n", "--attach", id)
	if code != exitDetached || !strings.Contains(out, "prd> a\n"+
		"refused: cli:ann has already approved this prd (1 of 2 approvals); a different approver must give the next approval.\n") ||
		!strings.Contains(out, "prd> q\n") {
		t.Fatalf("exit %d:\n%s", code, out)
	}

	cfg, err := loadConfig(b.env(extra))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	provider, err := builtin.Provider(cfg.LLM, quiet)
	if err != nil {
		t.Fatal(err)
	}
	workflows, err := builtin.Workflows(provider, cfg.LLM)
	if err != nil {
		t.Fatal(err)
	}
	store := postgres.NewStore(b.pool, postgres.Options{})
	engine, err := graph.NewEngine(store, workflows)
	if err != nil {
		t.Fatal(err)
	}
	bob := auth.Principal{Name: "bob", Role: auth.RoleApprover, Kind: auth.KindUser}
	res, err := auth.NewDecider(engine, store, cfg.Auth.Policy, quiet).Decide(ctx, bob, id,
		graph.DecisionInput{InterruptID: iid, Action: graph.ActionApprove})
	if err != nil || res.Pending() || strings.Join(res.Approvers, ",") != "cli:ann,bob" {
		t.Fatalf("second approval: %+v, %v", res, err)
	}

	select {
	case code = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("the terminal did not follow the task on:\n%s", stdout.String())
	}
	out = stdout.String()
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr.String())
	}
	for _, want := range []string{
		"● approve (1 of 2 approvals) by cli:ann",
		"● approve (2 of 2 approvals) by bob",
		"● approve by cli:ann, bob",
		"✓ merge",
		"\nsucceeded in ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("transcript:\n%s", out)
	}
}

// TestRunDetachAndAttach: end of input at a gate detaches (exit 3) and the
// task keeps waiting; run --attach answers it later; an answer typed while
// nothing asks waits for the next prompt.
func TestRunDetachAndAttach(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	in := b.file("in.json", featureInput)
	code, out, errs := b.run("", "feature", "--auto-approve", "allowPrd", "--input", in, "--title", "CSV export")
	if code != exitDetached {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, exitDetached, out, errs)
	}
	id := taskIDRe.FindStringSubmatch(out)[1]
	if !strings.Contains(out, "detached (end of input)") || !strings.Contains(out, "gatehouse run --attach "+id) || strings.Contains(out, "── prd") {
		t.Errorf("stdout:\n%s", out)
	}
	if st := b.query(`SELECT status || ' ' || title FROM tasks WHERE id = $1`, id); st != "waiting CSV export" {
		t.Errorf("task %s", st)
	}

	// Edit the plan from a file, then quit at the merge gate.
	plan := b.file("plan.yaml", "")
	code, out, _ = b.run("w "+plan+"\nq\n", "--attach", id)
	if code != exitDetached || !strings.Contains(out, "attached to task "+id) || !strings.Contains(out, "wrote "+plan) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	body, _ := os.ReadFile(plan)
	edited := strings.Replace(string(body), "Foundation", "Groundwork", 1)
	if edited == string(body) {
		t.Fatalf("plan.yaml has no phase named Foundation:\n%s", body)
	}
	b.file("plan.yaml", edited)
	// The merge gate follows the plan: cli:ann started the task, and
	// separation of duties (merge, by default) wants another approver for
	// it, so this attach decides as bob.
	code, out, _ = b.run("e "+plan+"\na\n", "--attach", id, "--as", "bob")
	if code != 0 || !strings.Contains(out, "✎ plan.yaml edited by bob") || !strings.Contains(out, "● approve by bob") ||
		!strings.Contains(out, "succeeded") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if v := b.query(`SELECT content FROM artifacts WHERE task_id = $1 AND name = 'plan.yaml' ORDER BY version DESC LIMIT 1`, id); !strings.Contains(v, "Groundwork") {
		t.Errorf("latest plan.yaml:\n%s", v)
	}
}

// TestRunHostileText: a line typed at the prompt with a NUL or invalid
// UTF-8 (feedback, a command) is refused with the reason and the prompt
// stays: nothing is decided, and the next line decides. Before, it ended
// the command with PostgreSQL's error.
func TestRunHostileText(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	in := b.file("in.json", featureInput)
	code, out, errs := b.run("r Name the\x00 columns\nr Name \xff the columns\nr Name the columns.\n", "feature",
		"--input", in, "--auto-approve", "allowPlan", "--auto-approve", "allowMerge")
	if code != exitDetached {
		t.Fatalf("exit %d, want %d (detached at the end of input)\n%s\n%s", code, exitDetached, out, errs)
	}
	for _, want := range []string{"not recorded: the line contains a NUL character", "not recorded: the line is not valid UTF-8",
		"● reject: Name the columns. by cli:ann"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	id := taskIDRe.FindStringSubmatch(out)[1]
	if d := b.query(`SELECT string_agg(action || ':' || feedback, ',') FROM decisions WHERE task_id = $1`, id); d != "reject:Name the columns." {
		t.Errorf("decisions %s", d)
	}
}

// TestRunCancel: c at a prompt cancels the task: exit 1.
func TestRunCancel(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	in := b.file("in.json", featureInput)
	code, out, _ := b.run("c\n", "feature", "--input", in)
	if code != 1 || !strings.Contains(out, "cancelled by cli:ann") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestRunAutoApproveAll: with every gate auto-approved the task runs to
// the end with no input at all.
func TestRunAutoApproveAll(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	in := b.file("in.json", featureInput)
	code, out, _ := b.run("", "feature", "--input", in, "--auto-approve=all")
	if code != 0 || strings.Contains(out, "──") || !strings.Contains(out, "✓ merge") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestRunUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "in.json")
	if err := os.WriteFile(good, []byte(featureInput), 0o600); err != nil {
		t.Fatal(err)
	}
	notObject := filepath.Join(dir, "list.json")
	if err := os.WriteFile(notObject, []byte(`["x"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	hostile := filepath.Join(dir, "hostile.json")
	if err := os.WriteFile(hostile, []byte(`{"description": "Let users\u0000 export"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/none"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"NoWorkflow", nil, "run needs a WORKFLOW"},
		{"NoInput", []string{"feature"}, "--input FILE"},
		{"TwoWorkflows", []string{"feature", "sdd", "--input", good}, "one WORKFLOW"},
		{"UnknownWorkflow", []string{"nope", "--input", good}, `unknown workflow "nope"`},
		{"MissingFile", []string{"feature", "--input", filepath.Join(dir, "none.json")}, "--input"},
		{"NotAnObject", []string{"feature", "--input", notObject}, "want a JSON object"},
		{"UnknownGate", []string{"feature", "--input", good, "--auto-approve", "allowEverything"}, "allowPrd"},
		{"BadOptions", []string{"feature", "--input", good, "--options", "[1]"}, "--options"},
		{"AttachBadID", []string{"--attach", "12"}, "task id"},
		{"AttachWithInput", []string{"--attach", "8c7f0f6e-2f0b-4c35-9c55-1f1a0e6c2d11", "--input", good}, "--attach"},
		{"UnknownFlag", []string{"feature", "--inptu", good}, "inptu"},
		{"InputNUL", []string{"feature", "--input", hostile}, "input.description contains a NUL character"},
		{"TitleUTF8", []string{"feature", "--input", good, "--title", "CSV \xff"}, "--title is not valid UTF-8"},
		{"OptionsNUL", []string{"feature", "--input", good, "--options", `{"note": "\u0000"}`}, "options.note contains a NUL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"run"}, tc.args...), func(k string) string { return env[k] },
				strings.NewReader(""), &stdout, &stderr)
			if code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and one line with %q", code, stderr.String(), tc.want)
			}
		})
	}
	t.Run("Help", func(t *testing.T) {
		t.Parallel()
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"run", "--help"}, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
		out := stdout.String()
		if code != 0 || !strings.Contains(out, "gatehouse run WORKFLOW --input FILE") || !strings.Contains(out, "-auto-approve") ||
			!strings.Contains(out, "3 detached") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
	t.Run("Listed", func(t *testing.T) {
		t.Parallel()
		var stdout bytes.Buffer
		run(context.Background(), []string{"--help"}, func(string) string { return "" }, strings.NewReader(""), &stdout, &stdout)
		if !strings.Contains(stdout.String(), "run WORKFLOW --input FILE") {
			t.Errorf("gatehouse --help does not list run:\n%s", stdout.String())
		}
	})
}

// TestRunOllamaModelMissing: LLM_PROVIDER=ollama reaches the server; a
// model it does not have fails the task at once (no retries) with a
// message naming the model and the setting.
func TestRunOllamaModelMissing(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/api/chat" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"model \"llama9:70b\" not found, try pulling it first"}`))
	}))
	defer srv.Close()
	in := b.file("in.json", featureInput)
	env := map[string]string{"DATABASE_URL": b.url, "LLM_PROVIDER": "ollama", "OLLAMA_BASE_URL": srv.URL,
		"OLLAMA_MODEL_NAME": "llama9:70b"}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "feature", "--input", in}, func(k string) string { return env[k] },
		strings.NewReader(""), &stdout, &stderr)
	out := stdout.String()
	if code != 1 || !strings.Contains(out, "failed after") || !strings.Contains(out, `"llama9:70b"`) || !strings.Contains(out, "OLLAMA_MODEL_NAME") {
		t.Fatalf("exit %d:\n%s\n%s", code, out, stderr.String())
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d requests, want 1: a missing model is not retried", n)
	}
}
