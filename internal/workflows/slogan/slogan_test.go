package slogan_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/llm/scripted"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent/agenttest"
	"github.com/gatehousehq/gatehouse/internal/workflows/slogan"
)

const product = "eco-friendly water bottles"

func input(t testing.TB) string { return agenttest.JSON(t, slogan.Input{UserInput: product}) }

// fastRetry keeps the seed's three tries without its seconds of backoff.
var fastRetry = graph.RetryPolicy{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}

// setupWith gives the test a database and the slogan workflow over p.
func setupWith(t *testing.T, p llm.Provider, opts ...slogan.Option) *agenttest.Env {
	t.Helper()
	return agenttest.New(t, func(tb testing.TB) graph.Workflow {
		g, err := slogan.New(p, append([]slogan.Option{slogan.WithRetry(fastRetry)}, opts...)...)
		if err != nil {
			tb.Fatalf("slogan.New: %v", err)
		}
		return g
	})
}

// setup is setupWith a scripted provider with roles' replies.
func setup(t *testing.T, roles map[string][]string, opts ...slogan.Option) *agenttest.Env {
	t.Helper()
	if roles == nil {
		roles = map[string][]string{}
	}
	return setupWith(t, scripted.New(slogan.Builtin, agenttest.Script(t, roles)), opts...)
}

func TestIsApproved(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		review string
		want   bool
	}{
		// seed 004's examples
		{"This is perfect! SHIP IT!", true},
		{"This needs work on shipping logistics", false},
		{"SHIP IT!", true},
		{"Perfect! SHIP IT! Great work.", true},
		{"This needs work on shipping", false},
		// issue 5's
		{"relationship", false},
		{"Ship it", true},
		{"SHIP IT!!", true},
		// Decided: a negated "ship it" asks for another turn (package comment).
		{"don't ship it yet", false},
		{"Don’t ship it yet: the rhythm is off.", false},
		{"I would not ship it.", false},
		{"Not ready to ship it, tighten the second half.", false},
		{"Never ship it like this.", false},
		{"Ship it? Not yet.", false},
		{"Not bad at all — SHIP IT!", true},
		{"No notes, so ship it!", true},
		{"Don't change a thing. Ship it!", true},
		{"I wouldn't ship it yet... actually, yes: SHIP IT!", true},
		{"ship-it", false},
		{"shipit", false},
		{"friendship items", false},
		{"", false},
	} {
		if got := slogan.IsApproved(tc.review); got != tc.want {
			t.Errorf("IsApproved(%q) = %v, want %v", tc.review, got, tc.want)
		}
	}
}

func TestApprovedOnTurnTwo(t *testing.T) {
	t.Parallel()
	e := setup(t, map[string][]string{
		slogan.RoleWriter:   {"Hydrate Green, Live Clean", `"Hydrate Green, Save Our Seas"`},
		slogan.RoleReviewer: {"Good rhythm but vague. Be specific about impact.", "SHIP IT!"},
	})
	id := e.Create(input(t), "")
	task := e.Succeeds(id)
	res := agenttest.Result[slogan.Result](e, id)
	if res.CompletionReason != slogan.ReasonApproved || res.TurnCount != 2 || len(res.Turns) != 2 ||
		res.FinalSlogan != "Hydrate Green, Save Our Seas" || res.MaxTurns != slogan.DefaultMaxTurns || res.ModelName != scripted.Model {
		t.Fatalf("result = %+v", res)
	}
	t1, t2 := res.Turns[0], res.Turns[1]
	if t1.TurnNumber != 1 || t1.Slogan != "Hydrate Green, Live Clean" || t1.Approved || t1.Feedback == nil ||
		*t1.Feedback != "Good rhythm but vague. Be specific about impact." || t1.Reviewer != slogan.ReviewerLLM || t1.Timestamp.IsZero() {
		t.Errorf("turn 1 = %+v", t1)
	}
	if t2.TurnNumber != 2 || !t2.Approved || t2.Feedback != nil {
		t.Errorf("turn 2 = %+v", t2)
	}
	if r := slogan.CompletionReason(task.Status, task.Result); r != slogan.ReasonApproved {
		t.Errorf("CompletionReason = %q", r)
	}
	prompts := e.Prompts(id, slogan.RoleWriter)
	if len(prompts) != 2 || !strings.Contains(prompts[0], "Create a slogan for: "+product) || strings.Contains(prompts[0], "Previous feedback") ||
		!strings.Contains(prompts[1], "Previous feedback:\nGood rhythm but vague. Be specific about impact.\n\nPlease improve based on the feedback.") {
		t.Errorf("writer prompts = %q", prompts)
	}
	if p := e.Prompts(id, slogan.RoleReviewer); len(p) != 2 || !strings.Contains(p[1], "Please review this slogan: Hydrate Green, Save Our Seas") {
		t.Errorf("reviewer prompts = %q", p)
	}
	if got := e.Phases(id, graph.EventNodeCompleted, ""); !slices.Equal(got, []string{"writer", "reviewer", "decide", "writer:2", "reviewer:2", "decide:2"}) {
		t.Errorf("node runs = %v", got)
	}
	if arts := e.Artifacts(id, slogan.ArtifactSlogan); len(arts) != 2 || arts[1].Content != "Hydrate Green, Save Our Seas" {
		t.Errorf("slogan.txt versions = %+v", arts)
	}
	if s := agenttest.State[slogan.State](e, id); s.CompletedAt == nil || s.Feedback != "" || s.CurrentSlogan != "" {
		t.Errorf("final state = %+v", s)
	}
}

func TestNeverApprovedStopsAtMaxTurns(t *testing.T) {
	t.Parallel()
	t.Run("task option", func(t *testing.T) {
		t.Parallel()
		e := setup(t, map[string][]string{slogan.RoleWriter: {"One", "Two", "Three"},
			slogan.RoleReviewer: {"Too vague.", "Don't ship it yet.", "Still needs work."}})
		id := e.Create(input(t), `{"max_turns": 3}`)
		task := e.Succeeds(id)
		res := agenttest.Result[slogan.Result](e, id)
		if res.CompletionReason != slogan.ReasonMaxTurns || res.TurnCount != 3 || len(res.Turns) != 3 || res.FinalSlogan != "Three" {
			t.Fatalf("result = %+v", res)
		}
		for i, turn := range res.Turns {
			if turn.Approved || turn.Feedback == nil || turn.TurnNumber != i+1 {
				t.Errorf("turn %d = %+v", i+1, turn)
			}
		}
		if r := slogan.CompletionReason(task.Status, task.Result); r != slogan.ReasonMaxTurns {
			t.Errorf("CompletionReason = %q", r)
		}
	})
	t.Run("workflow default", func(t *testing.T) {
		t.Parallel()
		e := setup(t, map[string][]string{slogan.RoleReviewer: {"Needs work."}}, slogan.WithMaxTurns(4))
		id := e.Create(input(t), "")
		e.Succeeds(id)
		if res := agenttest.Result[slogan.Result](e, id); res.CompletionReason != slogan.ReasonMaxTurns || res.TurnCount != 4 || res.MaxTurns != 4 {
			t.Errorf("result = %+v", res)
		}
		if n := len(e.LLMCalls(id, slogan.RoleWriter)); n != 4 {
			t.Errorf("writer calls = %d", n)
		}
	})
}

// downProvider fails every call of role like an Ollama that is not running.
type downProvider struct {
	role  string
	calls atomic.Int32
	next  llm.Provider
}

func (p *downProvider) Name() string { return "down" }
func (p *downProvider) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if req.Role == p.role {
		p.calls.Add(1)
		return llm.Response{Model: "mistral:latest"}, llm.Transient(errors.New("dial tcp 127.0.0.1:11434: connect: connection refused"))
	}
	return p.next.Complete(ctx, req)
}

func TestProviderDownEndsInError(t *testing.T) {
	t.Parallel()
	for _, role := range []string{slogan.RoleWriter, slogan.RoleReviewer} {
		t.Run(role, func(t *testing.T) {
			t.Parallel()
			p := &downProvider{role: role, next: scripted.New(slogan.Builtin, nil)}
			e := setupWith(t, p)
			id := e.Create(input(t), "")
			task := e.Fails(id)
			if r := slogan.CompletionReason(task.Status, task.Result); r != slogan.ReasonError {
				t.Errorf("CompletionReason = %q", r)
			}
			if !strings.Contains(task.Error, "turn 1") || !strings.Contains(task.Error, "connection refused") || !strings.Contains(task.Error, role) {
				t.Errorf("error = %q", task.Error)
			}
			if n := p.calls.Load(); n != 3 {
				t.Errorf("calls = %d, want 3 (the seed's retries)", n)
			}
			if n := len(e.Events(id, graph.EventNodeRetrying)); n != 2 {
				t.Errorf("node.retrying events = %d, want 2", n)
			}
			calls := e.LLMCalls(id, role)
			if len(calls) != 3 || calls[2].Attempt != 3 || !strings.Contains(calls[2].Error, "connection refused") {
				t.Errorf("llm.call events = %+v", calls)
			}
		})
	}
}

func TestCancelledTaskReason(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	id := e.Create(input(t), `{"human_reviewer": true}`)
	e.Waits(id, slogan.NodeReviewer, slogan.InterruptReview, 1)
	if err := e.Store().Cancel(agenttest.Ctx(t), id, "tester"); err != nil {
		t.Fatal(err)
	}
	task := e.Task(id)
	if task.Status != graph.StatusCancelled || slogan.CompletionReason(task.Status, task.Result) != slogan.ReasonCancelled {
		t.Errorf("task %s, reason %q", task.Status, slogan.CompletionReason(task.Status, task.Result))
	}
}

func TestHumanReviewer(t *testing.T) {
	t.Parallel()
	e := setup(t, map[string][]string{slogan.RoleWriter: {"First try", "Second try", "Third try"}})
	id := e.Create(input(t), `{"human_reviewer": true}`)

	itr := e.Waits(id, slogan.NodeReviewer, slogan.InterruptReview, 1)
	if a := itr.Payload.Artifact; a == nil || a.Name != slogan.ArtifactSlogan || a.Content != "First try" ||
		itr.Payload.Type != graph.InterruptQuestion || !slices.Equal(itr.Payload.Actions, []string{"approve", "reject", "respond"}) {
		t.Fatalf("interrupt = %+v", itr)
	}
	e.Decide(id, itr.ID, graph.ActionReject, "Mention the oceans.", "")

	itr = e.Waits(id, slogan.NodeReviewer, slogan.InterruptReview, 2)
	if itr.Payload.Artifact.Content != "Second try" {
		t.Errorf("turn 2 shows %q", itr.Payload.Artifact.Content)
	}
	if p := e.Prompts(id, slogan.RoleWriter); len(p) != 2 || !strings.Contains(p[1], "Previous feedback:\nMention the oceans.") {
		t.Errorf("writer prompts = %q", p)
	}
	// A review that says "don't ship it yet" is feedback, not approval.
	e.Decide(id, itr.ID, graph.ActionRespond, "", "Closer, but don't ship it yet.")

	itr = e.Waits(id, slogan.NodeReviewer, slogan.InterruptReview, 3)
	e.Decide(id, itr.ID, graph.ActionRespond, "", "Love it. Ship it!")
	e.Succeeds(id)

	res := agenttest.Result[slogan.Result](e, id)
	if res.CompletionReason != slogan.ReasonApproved || res.TurnCount != 3 || res.FinalSlogan != "Third try" {
		t.Fatalf("result = %+v", res)
	}
	for i, want := range []string{"Mention the oceans.", "Closer, but don't ship it yet."} {
		if tr := res.Turns[i]; tr.Approved || tr.Feedback == nil || *tr.Feedback != want || tr.Reviewer != slogan.ReviewerHuman {
			t.Errorf("turn %d = %+v", i+1, tr)
		}
	}
	if tr := res.Turns[2]; !tr.Approved || tr.Reviewer != slogan.ReviewerHuman {
		t.Errorf("turn 3 = %+v", tr)
	}
	if n := len(e.LLMCalls(id, slogan.RoleReviewer)); n != 0 {
		t.Errorf("the LLM reviewer was called %d times", n)
	}

	t.Run("approve", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		id := e.Create(input(t), `{"human_reviewer": true, "max_turns": 1}`)
		itr := e.Waits(id, slogan.NodeReviewer, slogan.InterruptReview, 1)
		e.Decide(id, itr.ID, graph.ActionApprove, "", "")
		e.Succeeds(id)
		if res := agenttest.Result[slogan.Result](e, id); res.CompletionReason != slogan.ReasonApproved || !res.Turns[0].Approved {
			t.Errorf("result = %+v", res)
		}
	})
}

func TestBuiltinReplies(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	id := e.Create(input(t), "")
	e.Succeeds(id)
	res := agenttest.Result[slogan.Result](e, id)
	if res.CompletionReason != slogan.ReasonApproved || res.TurnCount != 1 || !strings.Contains(res.FinalSlogan, "Water Bottles") {
		t.Errorf("result = %+v", res)
	}
	a, _ := slogan.BuiltinReply(slogan.RoleWriter, "smart home devices")
	b, _ := slogan.BuiltinReply(slogan.RoleWriter, "artisan sourdough bakery")
	if a == b || !strings.Contains(b, "Artisan Sourdough Bakery") {
		t.Errorf("writer replies do not vary: %q %q", a, b)
	}
	if r, _ := slogan.BuiltinReply(slogan.RoleReviewer, product); !slogan.IsApproved(r) {
		t.Errorf("built-in review %q does not approve", r)
	}
	if _, ok := slogan.BuiltinReply("sdd.writer", product); ok {
		t.Error("answers another workflow's role")
	}
}

func TestInputValidation(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	for _, tc := range []struct{ input, options, field string }{
		{`{}`, "", "input.user_input"},
		{`{"user_input": ""}`, "", "input.user_input"},
		{`{"user_input": ["a"]}`, "", "input.user_input"},
		{`{"user_input": "x", "product": "y"}`, "", "input.product"},
		{`{"user_input": "` + strings.Repeat("x", slogan.MaxUserInput+1) + `"}`, "", "input.user_input"},
		{input(t), `{"max_turns": 0}`, "options.max_turns"},
		{input(t), `{"max_turns": 21}`, "options.max_turns"},
		{input(t), `{"human_reviewer": "yes"}`, "options.human_reviewer"},
		{input(t), `{"gates": {"allowPlan": true}}`, "options.gates.allowPlan"},
		{input(t), `{"reviewer": "human"}`, "options.reviewer"},
	} {
		_, err := e.TryCreate(tc.input, tc.options)
		agenttest.WantValidation(t, err, tc.field)
	}
	if _, err := slogan.New(scripted.New(nil, nil), slogan.WithMaxTurns(0)); err == nil {
		t.Error("New accepted max turns 0")
	}
	var in json.RawMessage = []byte(`{"user_input": "  tea  "}`)
	if got, err := slogan.ParseInput(in); err != nil || got.UserInput != "tea" {
		t.Errorf("ParseInput = %+v, %v", got, err)
	}
}
