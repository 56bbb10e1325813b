package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/config"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/preflight"
	"github.com/gatehousehq/gatehouse/internal/workflows/builtin"
)

// TestCheckDefinitions: a waiting task of one definition of "review" is
// listed, as unable to resume, by the check under a definition that
// dropped its node, and not under its own.
func TestCheckDefinitions(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	ctx := context.Background()
	store := postgres.NewStore(d.pool, postgres.Options{})
	v1, err := graph.NewEngine(store, []graph.Workflow{graphtest.Review(1)})
	if err != nil {
		t.Fatal(err)
	}
	task, err := v1.Create(ctx, graph.NewTask{Workflow: graphtest.ReviewName, Title: "Review me",
		Options: json.RawMessage(`{"gates":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := v1.Run(ctx, task.ID, 0); err != nil || out.Status != graph.StatusWaiting {
		t.Fatalf("run: %+v %v", out, err)
	}
	if found, err := preflight.Definitions(ctx, store, []graph.Workflow{graphtest.Review(1)}); err != nil || len(found) != 0 {
		t.Fatalf("under its own definition: %+v %v", found, err)
	}
	found, err := preflight.Definitions(ctx, store, []graph.Workflow{graphtest.Review(2)})
	var ng *graph.NodeGoneError
	if err != nil || len(found) != 1 || found[0].Task.ID != task.ID || !errors.As(found[0].Problem, &ng) || ng.Node != "review" {
		t.Fatalf("under the changed definition: %+v %v", found, err)
	}
	var out bytes.Buffer
	if n := printDefinitionCheck(&out, found); n != 1 || !strings.Contains(out.String(), task.ID) ||
		!strings.Contains(out.String(), `NO: node "review" is gone`) || !strings.Contains(out.String(), graphtest.Review(1).Version()) {
		t.Errorf("printed (%d cannot resume):\n%s", n, out.String())
	}
}

// TestTasksCheckCommand runs gatehouse tasks check on a database where one
// waiting feature task was stored under an older definition that still
// fits, and another stands at a node this build has no more: it lists
// both and exits 1; serve logs both at start.
func TestTasksCheckCommand(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	ctx := context.Background()
	store := postgres.NewStore(d.pool, postgres.Options{})
	provider, err := builtin.Provider(config.LLM{Provider: "scripted"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	workflows, err := builtin.Workflows(provider, config.LLM{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := graph.NewEngine(store, workflows)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": d.url}
	getenv := func(k string) string { return env[k] }
	check := func() (int, string) {
		var stdout bytes.Buffer
		code := run(ctx, []string{"tasks", "check"}, getenv, strings.NewReader(""), &stdout, io.Discard)
		return code, stdout.String()
	}
	if code, out := check(); code != 0 || !strings.Contains(out, "every waiting and failed task runs under") {
		t.Fatalf("empty database: exit %d\n%s", code, out)
	}
	waiting := func(title string) string {
		task, err := e.Create(ctx, graph.NewTask{Workflow: "feature", Title: title,
			Input: json.RawMessage(`{"description":"Export reports as CSV"}`), Options: json.RawMessage(`{"gates":{}}`)})
		if err != nil {
			t.Fatal(err)
		}
		if out, err := e.Run(ctx, task.ID, 0); err != nil || out.Status != graph.StatusWaiting {
			t.Fatalf("run: %+v %v", out, err)
		}
		return task.ID
	}
	fits, gone := waiting("Still fits"), waiting("Stands at a removed node")
	if code, out := check(); code != 0 || !strings.Contains(out, "every waiting") {
		t.Fatalf("tasks of this build: exit %d\n%s", code, out)
	}
	// What an older build left: a version of its own, and for one task a
	// gate node this build renamed.
	for q, arg := range map[string]any{
		`UPDATE tasks SET definition_version = 's1-0123456789ab' WHERE id = ANY($1::uuid[])`:  []string{fits, gone},
		`UPDATE interrupts SET node = 'prd_review' WHERE task_id = $1 AND status = 'pending'`: gone,
		`UPDATE workflow_checkpoints SET next_node_id = 'prd_review' WHERE task_id = $1`:      gone,
	} {
		if _, err := d.pool.Exec(ctx, q, arg); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	code, out := check()
	if code != 1 {
		t.Errorf("exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{fits, gone, "s1-0123456789ab", `NO: node "prd_review" is gone`, "1 cannot resume"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, fits) && !strings.Contains(line, " yes ") {
			t.Errorf("the task that fits is not said to resume: %q", line)
		}
	}

	p := serve(t, d.url)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.Logs(), "cannot_resume=1") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	logs := p.Logs()
	for _, want := range []string{"task=" + gone, "task=" + fits, `resumes="no: node \"prd_review\" is gone"`, "tasks=2 cannot_resume=1"} {
		if !strings.Contains(logs, want) {
			t.Errorf("serve's start logs lack %q:\n%s", want, logs)
		}
	}
}

func TestTasksUsage(t *testing.T) {
	t.Parallel()
	withDB := map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/nowhere"}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"tasks"}, withDB, "tasks needs a subcommand: check"},
		{[]string{"tasks", "list"}, withDB, `tasks "list": want check`},
		{[]string{"tasks", "check", "now"}, withDB, `tasks check takes no arguments, got "now"`},
		{[]string{"tasks", "check"}, nil, "DATABASE_URL is not set"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, func(k string) string { return c.env[k] }, strings.NewReader(""), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
	var stdout bytes.Buffer
	if code := run(context.Background(), []string{"tasks", "--help"}, func(string) string { return "" }, nil, &stdout, io.Discard); code != 0 ||
		!strings.Contains(stdout.String(), "Exit status: 0 when every listed task can resume") {
		t.Errorf("tasks --help: exit %d\n%s", code, stdout.String())
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"--help"}, func(string) string { return "" }, nil, &stdout, io.Discard); code != 0 ||
		!strings.Contains(stdout.String(), "tasks check") {
		t.Errorf("--help lacks tasks check:\n%s", stdout.String())
	}
}
