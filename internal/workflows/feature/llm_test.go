package feature_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/llm/scripted"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
)

// llmBundle is a feature workflow over a provider on the in-memory
// checkpointer.
type llmBundle struct {
	t   *testing.T
	cp  *graph.MemoryCheckpointer
	eng *graph.Engine
}

func setupLLM(t *testing.T, p llm.Provider) *llmBundle {
	t.Helper()
	g, err := feature.New(feature.LLMExecutor(p),
		feature.WithRetry(graph.RetryPolicy{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}))
	if err != nil {
		t.Fatalf("feature.New: %v", err)
	}
	cp := graph.NewMemoryCheckpointer()
	eng, err := graph.NewEngine(cp, []graph.Workflow{g})
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	return &llmBundle{t: t, cp: cp, eng: eng}
}

// runTask creates a task without gates and runs it until it stops.
func (b *llmBundle) runTask() (string, graph.Outcome) {
	b.t.Helper()
	in, _ := json.Marshal(feature.Input{Description: featuretest.DefaultDescription})
	task, err := b.eng.Create(context.Background(), graph.NewTask{Workflow: feature.Name, Title: "t", Input: in})
	if err != nil {
		b.t.Fatalf("Create: %v", err)
	}
	out, err := b.eng.Run(context.Background(), task.ID, 0)
	if err != nil {
		b.t.Fatalf("Run: %v", err)
	}
	return task.ID, out
}

func (b *llmBundle) count(id, typ, node string) int {
	n := 0
	for _, e := range b.cp.Events(id) {
		if e.Type == typ && (node == "" || e.Node == node) {
			n++
		}
	}
	return n
}

func parseScript(t *testing.T, src string) *scripted.Script {
	t.Helper()
	s, err := scripted.ParseScript(strings.NewReader(src), "script.json")
	if err != nil {
		t.Fatalf("ParseScript: %v", err)
	}
	return s
}

func TestLLMExecutorScriptedRunsToTheEnd(t *testing.T) {
	t.Parallel()
	b := setupLLM(t, scripted.New(feature.Builtin, nil))
	id, out := b.runTask()
	if out.Status != graph.StatusSucceeded {
		t.Fatalf("outcome = %+v, want succeeded", out)
	}
	if n := b.count(id, graph.EventLLMCall, ""); n != len(feature.Roles()) {
		t.Errorf("llm.call events = %d, want one per producer (%d)", n, len(feature.Roles()))
	}
	for _, e := range b.cp.Events(id) {
		if e.Type != graph.EventLLMCall {
			continue
		}
		var data struct {
			Model        string `json:"model"`
			PromptTokens int    `json:"prompt_tokens"`
			ReplyTokens  int    `json:"reply_tokens"`
		}
		if err := json.Unmarshal(e.Data, &data); err != nil {
			t.Fatal(err)
		}
		if data.Model != scripted.Model || data.PromptTokens == 0 || data.ReplyTokens == 0 {
			t.Errorf("%s llm.call = %+v, want model %s and token counts", e.Node, data, scripted.Model)
		}
	}
}

func TestLLMExecutorScriptedBrokenResearch(t *testing.T) {
	t.Parallel()
	script := parseScript(t, `{"roles": {"feature.research": ["decisions:\n- title: x\n  chosen: [y\n"]}}`)
	b := setupLLM(t, scripted.New(feature.Builtin, script))
	id, out := b.runTask()
	if out.Status != graph.StatusFailed {
		t.Fatalf("outcome = %+v, want failed", out)
	}
	if !strings.Contains(out.Error, "validate_research: research.yaml does not parse") {
		t.Errorf("error = %q, want it to name research.yaml", out.Error)
	}
	if n := b.count(id, graph.EventLLMCall, feature.NodePlan); n != 0 {
		t.Errorf("plan called %d times after research failed", n)
	}
}

func TestLLMExecutorConfigErrorIsNotRetried(t *testing.T) {
	t.Parallel()
	// Built-in replies for every role but research: its call fails with
	// *llm.ConfigError, which must not be retried.
	defaults := func(role, desc string, fb []string) (string, bool) {
		if role == feature.RoleResearch {
			return "", false
		}
		return feature.Builtin(role, desc, fb)
	}
	b := setupLLM(t, scripted.New(defaults, nil))
	id, out := b.runTask()
	if out.Status != graph.StatusFailed {
		t.Fatalf("outcome = %+v, want failed", out)
	}
	if !strings.Contains(out.Error, `no reply for role "feature.research"`) {
		t.Errorf("error = %q, want it to name the role", out.Error)
	}
	if n := b.count(id, graph.EventLLMCall, feature.NodeResearch); n != 1 {
		t.Errorf("research calls = %d, want 1 (no retries)", n)
	}
	if n := b.count(id, graph.EventNodeRetrying, ""); n != 0 {
		t.Errorf("node.retrying events = %d, want 0", n)
	}
}

func TestLLMExecutorScriptedRepliesFollowIterations(t *testing.T) {
	t.Parallel()
	const src = `{"roles": {"feature.merge": ["# Merge, first draft\n", "# Merge, second draft\n"]}}`
	cp := graph.NewMemoryCheckpointer()
	// Each step runs on a fresh provider and engine over the same store,
	// as after a restart: the replies follow the iteration, not a counter.
	engine := func() *graph.Engine {
		g, err := feature.New(feature.LLMExecutor(scripted.New(feature.Builtin, parseScript(t, src))))
		if err != nil {
			t.Fatal(err)
		}
		eng, err := graph.NewEngine(cp, []graph.Workflow{g})
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	ctx := context.Background()
	in, _ := json.Marshal(feature.Input{Description: featuretest.DefaultDescription})
	task, err := engine().Create(ctx, graph.NewTask{Workflow: feature.Name, Title: "t", Input: in,
		Options: json.RawMessage(`{"gates": {"allowPrd": true, "allowPlan": true, "allowMerge": false}}`)})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"# Merge, first draft\n", "# Merge, second draft\n", "# Merge, second draft\n"} {
		out, err := engine().Run(ctx, task.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != graph.StatusWaiting || out.Interrupt == nil || out.Interrupt.Node != feature.NodeMerge || out.Interrupt.Iteration != i+1 {
			t.Fatalf("run %d: outcome = %+v, want waiting at merge iteration %d", i+1, out, i+1)
		}
		if got := out.Interrupt.Payload.Artifact; got == nil || got.Content != want {
			t.Errorf("merge iteration %d shows %+v, want %q", i+1, got, want)
		}
		if _, err := engine().Decide(ctx, task.ID, graph.DecisionInput{InterruptID: out.Interrupt.ID,
			Action: graph.ActionReject, Feedback: "again", DecidedBy: "tester"}); err != nil {
			t.Fatal(err)
		}
	}
}

// providerFunc is an llm.Provider from a function.
type providerFunc func(context.Context, llm.Request) (llm.Response, error)

func (f providerFunc) Name() string { return "func" }
func (f providerFunc) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	return f(ctx, req)
}

func TestLLMExecutorMapsRequestAndReply(t *testing.T) {
	t.Parallel()
	var got llm.Request
	p := providerFunc(func(_ context.Context, req llm.Request) (llm.Response, error) {
		got = req
		return llm.Response{Text: "hi", Model: "m", PromptTokens: 3, ReplyTokens: 1, Duration: time.Second}, nil
	})
	req := feature.Request{Role: feature.RolePlan, Prompt: "plan it", TaskID: "t1", Iteration: 2}
	rep, err := feature.LLMExecutor(p).Execute(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got.Role != req.Role || got.Prompt != req.Prompt || got.TaskID != req.TaskID || got.Iteration != req.Iteration {
		t.Errorf("provider got %+v for %+v", got, req)
	}
	want := feature.Reply{Text: "hi", Model: "m", PromptTokens: 3, ReplyTokens: 1, Duration: time.Second}
	if rep != want {
		t.Errorf("reply = %+v, want %+v", rep, want)
	}
}

func TestLLMExecutorErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		err       error
		permanent bool
	}{
		{"ConfigIsPermanent", &llm.ConfigError{Provider: "x", Message: "model not found"}, true},
		{"TransientIsRetried", llm.Transient(errors.New("503")), false},
		{"OtherIsRetried", errors.New("connection reset"), false},
		{"ContextIsPassedOn", context.Canceled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := providerFunc(func(context.Context, llm.Request) (llm.Response, error) { return llm.Response{}, tc.err })
			_, err := feature.LLMExecutor(p).Execute(context.Background(), feature.Request{Role: feature.RolePlan})
			if !errors.Is(err, tc.err) {
				t.Errorf("err = %v, want it to wrap %v", err, tc.err)
			}
			if graph.IsPermanent(err) != tc.permanent {
				t.Errorf("IsPermanent = %v, want %v", graph.IsPermanent(err), tc.permanent)
			}
		})
	}
}

func TestBuiltinReply(t *testing.T) {
	t.Parallel()
	for _, r := range feature.Roles() {
		if text, ok := feature.BuiltinReply(r, "x"); !ok || text == "" {
			t.Errorf("%s: no built-in reply", r)
		}
	}
	if _, ok := feature.BuiltinReply("sdd.reviewer", "x"); ok {
		t.Error("sdd.reviewer has a feature built-in reply")
	}
}
