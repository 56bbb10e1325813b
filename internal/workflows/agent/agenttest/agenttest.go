// Package agenttest is the test bench of the LLM-backed workflows (sdd,
// pm, slogan, analyze): a fresh migrated PostgreSQL database per test, and
// every Create, Run and Decide on a FRESH engine over a fresh Store and a
// freshly compiled graph, as after a restart, so nothing but what
// PostgreSQL holds travels between steps of a task. It also reads back
// what a task recorded (state, events, llm.call events, artifacts) and
// builds scripted-provider scripts from per-role reply lists.
//
// Test support: it imports graph, the scripted provider and postgres (with
// pgtest) to read what a task recorded.
package agenttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm/scripted"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// Env is one test's bench.
type Env struct {
	T    testing.TB
	Pool *pgxpool.Pool
	// build compiles the workflow afresh.
	build func(testing.TB) graph.Workflow
}

// New gives the test a fresh database; build compiles the workflow under
// test (it is called for every engine).
func New(t testing.TB, build func(testing.TB) graph.Workflow) *Env {
	t.Helper()
	return &Env{T: t, Pool: pgtest.NewPool(t), build: build}
}

// Ctx is a context bounded for one test step.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Engine returns a fresh engine.
func (e *Env) Engine() *graph.Engine {
	e.T.Helper()
	eng, err := graph.NewEngine(postgres.NewStore(e.Pool, postgres.Options{}), []graph.Workflow{e.build(e.T)})
	if err != nil {
		e.T.Fatalf("NewEngine: %v", err)
	}
	return eng
}

// Store is a reader over the test database.
func (e *Env) Store() *postgres.Store { return postgres.NewStore(e.Pool, postgres.Options{}) }

// Workflow is the name of the workflow under test.
func (e *Env) Workflow() string { return e.build(e.T).Name() }

// TryCreate starts a task with input and options (JSON texts; "" for none).
func (e *Env) TryCreate(input, options string) (*graph.Task, error) {
	e.T.Helper()
	nt := graph.NewTask{Workflow: e.Workflow(), Title: e.T.Name(), Input: json.RawMessage(input), CreatedBy: "tester"}
	if options != "" {
		nt.Options = json.RawMessage(options)
	}
	return e.Engine().Create(Ctx(e.T), nt)
}

// Create starts a task and returns its id.
func (e *Env) Create(input, options string) string {
	e.T.Helper()
	task, err := e.TryCreate(input, options)
	if err != nil {
		e.T.Fatalf("Create: %v", err)
	}
	return task.ID
}

// Run runs the task on a fresh engine until it stops.
func (e *Env) Run(id string) graph.Outcome {
	e.T.Helper()
	out, err := e.Engine().Run(Ctx(e.T), id, 0)
	if err != nil {
		e.T.Fatalf("Run: %v", err)
	}
	return out
}

// Waits runs the task and checks it waits at node with an interrupt of
// kind at iteration; it returns the interrupt as stored.
func (e *Env) Waits(id, node, kind string, iteration int) graph.Interrupt {
	e.T.Helper()
	out := e.Run(id)
	if out.Status != graph.StatusWaiting || out.Interrupt == nil {
		e.T.Fatalf("outcome = %+v (task error %q), want waiting at %s", out, e.Task(id).Error, node)
	}
	itr, err := e.Store().Interrupt(Ctx(e.T), out.Interrupt.ID)
	if err != nil {
		e.T.Fatalf("Interrupt: %v", err)
	}
	if itr.Node != node || itr.Kind != kind || itr.Iteration != iteration || itr.Status != graph.InterruptPending {
		e.T.Fatalf("interrupt at %s/%s iteration %d (%s), want %s/%s iteration %d", itr.Node, itr.Kind, itr.Iteration,
			itr.Status, node, kind, iteration)
	}
	return *itr
}

// Decide records a decision on a fresh engine; value is the decision's
// value as a JSON string ("" for none).
func (e *Env) Decide(id, interruptID, action, feedback, value string) {
	e.T.Helper()
	if err := e.TryDecide(id, interruptID, action, feedback, value); err != nil {
		e.T.Fatalf("Decide %s: %v", action, err)
	}
}

// TryDecide is Decide returning the engine's error.
func (e *Env) TryDecide(id, interruptID, action, feedback, value string) error {
	e.T.Helper()
	in := graph.DecisionInput{InterruptID: interruptID, Action: action, Feedback: feedback, DecidedBy: "tester"}
	if value != "" {
		b, _ := json.Marshal(value)
		in.Value = b
	}
	_, err := e.Engine().Decide(Ctx(e.T), id, in)
	return err
}

// Succeeds runs the task to its end and checks it succeeded.
func (e *Env) Succeeds(id string) *graph.Task {
	e.T.Helper()
	out := e.Run(id)
	task := e.Task(id)
	if out.Status != graph.StatusSucceeded || task.Status != graph.StatusSucceeded {
		e.T.Fatalf("outcome = %+v, task %s (error %q), want succeeded", out, task.Status, task.Error)
	}
	return task
}

// Fails runs the task and checks it failed.
func (e *Env) Fails(id string) *graph.Task {
	e.T.Helper()
	out := e.Run(id)
	task := e.Task(id)
	if out.Status != graph.StatusFailed || task.Status != graph.StatusFailed || task.Error == "" {
		e.T.Fatalf("outcome = %+v, task %s, want failed", out, task.Status)
	}
	return task
}

// Task reads the task back.
func (e *Env) Task(id string) *graph.Task {
	e.T.Helper()
	task, err := e.Store().Task(Ctx(e.T), id)
	if err != nil {
		e.T.Fatalf("Task: %v", err)
	}
	return task
}

// RawState is the task's current checkpoint state as stored.
func (e *Env) RawState(id string) []byte {
	e.T.Helper()
	snap, err := e.Store().Load(Ctx(e.T), id)
	if err != nil {
		e.T.Fatalf("Load: %v", err)
	}
	return snap.Checkpoint.State
}

// State decodes the task's current state.
func State[S any](e *Env, id string) S {
	e.T.Helper()
	var s S
	if err := json.Unmarshal(e.RawState(id), &s); err != nil {
		e.T.Fatalf("state: %v", err)
	}
	return s
}

// Result decodes a succeeded task's result.
func Result[R any](e *Env, id string) R {
	e.T.Helper()
	var r R
	if err := json.Unmarshal(e.Task(id).Result, &r); err != nil {
		e.T.Fatalf("result: %v", err)
	}
	return r
}

// Events lists the task's events of type typ ("" for all) in order, and
// checks their seqs run from 1 without a gap.
func (e *Env) Events(id, typ string) []graph.Event {
	e.T.Helper()
	evs, err := e.Store().Events(Ctx(e.T), id, 0, 100000)
	if err != nil {
		e.T.Fatalf("Events: %v", err)
	}
	var out []graph.Event
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			e.T.Fatalf("event %d (%s) has seq %d", i, ev.Type, ev.Seq)
		}
		if typ == "" || ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// Phases lists the phases of the task's events of type typ at node (""
// for every node).
func (e *Env) Phases(id, typ, node string) []string {
	e.T.Helper()
	var out []string
	for _, ev := range e.Events(id, typ) {
		if node == "" || ev.Node == node {
			out = append(out, ev.Phase)
		}
	}
	return out
}

// LLMCall is an llm.call event's data.
type LLMCall struct {
	Node         string `json:"-"`
	Iteration    int    `json:"-"`
	Role         string `json:"role"`
	Provider     string `json:"provider"`
	Model        string `json:"model"`
	Prompt       string `json:"prompt"`
	Reply        string `json:"reply"`
	DurationMS   int64  `json:"duration_ms"`
	PromptTokens int    `json:"prompt_tokens"`
	ReplyTokens  int    `json:"reply_tokens"`
	Attempt      int    `json:"attempt"`
	Error        string `json:"error"`
}

// LLMCalls lists the task's llm.call events of role ("" for all).
func (e *Env) LLMCalls(id, role string) []LLMCall {
	e.T.Helper()
	var out []LLMCall
	for _, ev := range e.Events(id, graph.EventLLMCall) {
		var c LLMCall
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			e.T.Fatalf("llm.call data %s: %v", ev.Data, err)
		}
		c.Node, c.Iteration = ev.Node, ev.Iteration
		if role == "" || c.Role == role {
			out = append(out, c)
		}
	}
	return out
}

// Prompts lists the prompts of role's calls in order.
func (e *Env) Prompts(id, role string) []string {
	e.T.Helper()
	var out []string
	for _, c := range e.LLMCalls(id, role) {
		out = append(out, c.Prompt)
	}
	return out
}

// Artifacts lists the task's artifacts named name ("" for all) in order.
func (e *Env) Artifacts(id, name string) []graph.Artifact {
	e.T.Helper()
	arts, err := e.Store().Artifacts(Ctx(e.T), id)
	if err != nil {
		e.T.Fatalf("Artifacts: %v", err)
	}
	var out []graph.Artifact
	for _, a := range arts {
		if name == "" || a.Name == name {
			out = append(out, a)
		}
	}
	return out
}

// Exec runs a statement on the test database (to plant a checkpoint).
func (e *Env) Exec(sql string, args ...any) {
	e.T.Helper()
	if _, err := e.Pool.Exec(Ctx(e.T), sql, args...); err != nil {
		e.T.Fatalf("exec: %v", err)
	}
}

// Plant replaces the checkpoint of a queued task with state, as if
// lastNode had just completed with iterations completed runs per node, and
// next to run.
func (e *Env) Plant(id string, state []byte, lastNode, next string, iterations map[string]int) {
	e.T.Helper()
	iters, _ := json.Marshal(iterations)
	// A row as written before 00050_state_blobs: the whole state in state.
	e.Exec(`UPDATE workflow_checkpoints SET state = $2::jsonb, state_refs = '{}', last_node_id = $3, next_node_id = $4,
		iterations = $5::jsonb WHERE task_id = $1`, id, string(state), lastNode, next, string(iters))
	e.Exec(`UPDATE tasks SET current_node = $2 WHERE id = $1`, id, next)
}

// Script builds a scripted-provider script from per-role reply lists, the
// way LLM_SCRIPT_FILE gives them.
func Script(t testing.TB, roles map[string][]string) *scripted.Script {
	t.Helper()
	b, err := json.Marshal(map[string]any{"roles": roles})
	if err != nil {
		t.Fatal(err)
	}
	s, err := scripted.ParseScript(bytes.NewReader(b), "script.json")
	if err != nil {
		t.Fatalf("ParseScript: %v", err)
	}
	return s
}

// JSON marshals v for an input or options text.
func JSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// WantValidation checks err is a *graph.ValidationError naming field.
func WantValidation(t testing.TB, err error, field string) {
	t.Helper()
	var ve *graph.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error = %v (%T), want *graph.ValidationError for %s", err, err, field)
	}
	if ve.Field != field {
		t.Fatalf("validation error names %q (%s), want %q", ve.Field, ve.Message, field)
	}
}

// Golden is a golden checkpoint: the state JSON of a task, as version N of
// a workflow's state encoding stored it (LESSONS.md: "Encoding changes
// break old checkpoints"). It lives in testdata; a new encoding gets a new
// file and old files stay.
type Golden struct {
	Path string
}

// Write stores state (indented) at the golden path.
func (g Golden) Write(t testing.TB, state []byte) {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, state, "", "  "); err != nil {
		t.Fatal(err)
	}
	out.WriteByte('\n')
	if err := os.MkdirAll(filepath.Dir(g.Path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g.Path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", g.Path)
}

// Load reads the golden state strictly into *s: a field the file has that
// the state type no longer knows fails, and every field of the file must
// encode again under the same name with the same value (fields may be
// added, none renamed or re-typed). It returns the file's bytes.
func (g Golden) Load(t testing.TB, s any) []byte {
	t.Helper()
	raw, err := os.ReadFile(g.Path)
	if err != nil {
		t.Fatalf("%v (generate it once with -update)", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(s); err != nil {
		t.Fatalf("the golden checkpoint %s no longer loads into %T: %v", g.Path, s, err)
	}
	again, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var stored, encoded map[string]any
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(again, &encoded); err != nil {
		t.Fatal(err)
	}
	for k, v := range stored {
		if !reflect.DeepEqual(encoded[k], v) {
			t.Errorf("field %q of the golden state encodes as %v, stored as %v", k, encoded[k], v)
		}
	}
	return raw
}

// Contains reports whether every one of subs is in s (for prompt checks).
func Contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
