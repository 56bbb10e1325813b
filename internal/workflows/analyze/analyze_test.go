package analyze_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm/scripted"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent/agenttest"
	"github.com/gatehousehq/gatehouse/internal/workflows/analyze"
)

const query = "Why do checkout requests time out on Mondays?"

var logFile = analyze.File{Name: "checkout.log", Content: "2026-11-23T09:00:01Z WARN pool exhausted: 50/50 connections busy\n"}

func input(t testing.TB, files ...analyze.File) string {
	return agenttest.JSON(t, analyze.Input{Query: query, Files: files})
}

func setup(t *testing.T, replies []string) *agenttest.Env {
	t.Helper()
	roles := map[string][]string{}
	if len(replies) > 0 {
		roles[analyze.RoleAnalyst] = replies
	}
	script := agenttest.Script(t, roles)
	return agenttest.New(t, func(tb testing.TB) graph.Workflow {
		g, err := analyze.New(scripted.New(analyze.Builtin, script), analyze.WithRetry(graph.RetryPolicy{Attempts: 1}))
		if err != nil {
			tb.Fatalf("analyze.New: %v", err)
		}
		return g
	})
}

func TestQuestionsUntilSolutionApproved(t *testing.T) {
	t.Parallel()
	const final = "# Analysis\n\nThe connection pool is too small for Monday's batch jobs; raise it to 120.\n"
	e := setup(t, []string{"Question 1: when did it start?", "Question 2: which jobs run on Mondays?",
		"Question 3: what is the pool size?", "Proposal: raise the pool to 120. Agreed?", final})
	id := e.Create(input(t, logFile), "")

	answers := []string{"Three weeks ago.", "The invoicing batch at 09:00.", "50 connections.", "SOLUTION APPROVED"}
	for i, answer := range answers {
		itr := e.Waits(id, analyze.NodeAsk, analyze.InterruptQuestion, i+1)
		// Accepting is offered only with the proposal (the fourth message).
		wantActions := []string{"respond"}
		if i == 3 {
			wantActions = []string{"respond", "approve"}
		}
		if itr.Payload.Type != graph.InterruptQuestion ||
			!slices.Equal(itr.Payload.Actions, wantActions) || !strings.Contains(itr.Payload.Title, fmt.Sprintf("turn %d", i+1)) {
			t.Fatalf("question %d = %+v", i+1, itr.Payload)
		}
		if i < 3 && !strings.HasPrefix(itr.Payload.Question, fmt.Sprintf("Question %d", i+1)) {
			t.Fatalf("question %d asks %q", i+1, itr.Payload.Question)
		}
		e.Decide(id, itr.ID, graph.ActionRespond, "", answer)
	}
	e.Succeeds(id)

	res := agenttest.Result[analyze.Result](e, id)
	if res.Analysis != final || res.Turns != 4 || !slices.Equal(res.Files, []string{"checkout.log"}) {
		t.Errorf("result = %+v", res)
	}
	s := agenttest.State[analyze.State](e, id)
	if len(s.AnalysisHistory) != 9 || s.AnalysisHistory[0] != (analyze.Message{Role: analyze.FromUser, Content: query}) ||
		s.AnalysisHistory[8].Content != answers[3] || s.AnalysisOutput != final || s.UserInput != "" || s.CurrentAnalysisQuery != "" {
		t.Errorf("state = %+v", s)
	}
	if arts := e.Artifacts(id, analyze.ArtifactAnalysis); len(arts) != 1 || arts[0].Content != final {
		t.Errorf("analysis.md = %+v", arts)
	}
	// Each prompt carries the conversation so far; the final one all of it.
	prompts := e.Prompts(id, analyze.RoleAnalyst)
	if len(prompts) != 5 {
		t.Fatalf("analyst prompts = %d, want 5", len(prompts))
	}
	if !strings.Contains(prompts[1], "Human: Three weeks ago.") || strings.Contains(prompts[1], "invoicing batch") {
		t.Errorf("second prompt = %s", prompts[1])
	}
	if !agenttest.Contains(prompts[4], append(answers, "Question 3: what is the pool size?", "final analysis")...) {
		t.Errorf("final prompt lacks the conversation:\n%s", prompts[4])
	}
	wantPhases := []string{"prepare", "ask", "prepare:2", "ask:2", "prepare:3", "ask:3", "prepare:4", "ask:4", "prepare:5"}
	if got := e.Phases(id, graph.EventNodeCompleted, ""); !slices.Equal(got, wantPhases) {
		t.Errorf("node runs = %v, want %v", got, wantPhases)
	}
	// Each question was asked once and answered once.
	if n := len(e.Events(id, graph.EventInterruptRaised)); n != 4 {
		t.Errorf("interrupts = %d, want 4", n)
	}
}

func TestFilesAreInTheFirstPrompt(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	other := analyze.File{Name: "notes.md", Content: "# Notes\nMondays: invoicing batch."}
	id := e.Create(input(t, logFile, other), "")
	e.Waits(id, analyze.NodeAsk, analyze.InterruptQuestion, 1)
	prompts := e.Prompts(id, analyze.RoleAnalyst)
	if len(prompts) != 1 {
		t.Fatalf("prompts = %d", len(prompts))
	}
	if !agenttest.Contains(prompts[0], query, "=== file: checkout.log ===", strings.TrimSpace(logFile.Content),
		"=== file: notes.md ===", "Mondays: invoicing batch.", "Attached files (2)") {
		t.Errorf("first prompt lacks the files:\n%s", prompts[0])
	}
}

func TestApproveActionAndBuiltinReplies(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	id := e.Create(input(t), "")
	itr := e.Waits(id, analyze.NodeAsk, analyze.InterruptQuestion, 1)
	first := itr.Payload.Question
	// No proposal yet: nothing to accept.
	if slices.Contains(itr.Payload.Actions, graph.ActionApprove) {
		t.Errorf("the first question offers approve: %v", itr.Payload.Actions)
	}
	e.Decide(id, itr.ID, graph.ActionRespond, "", "Every Monday, all customers.")
	itr = e.Waits(id, analyze.NodeAsk, analyze.InterruptQuestion, 2)
	if itr.Payload.Question == first {
		t.Errorf("the built-in analyst asked the same question twice: %q", first)
	}
	e.Decide(id, itr.ID, graph.ActionRespond, "", "Keep the API unchanged.")
	itr = e.Waits(id, analyze.NodeAsk, analyze.InterruptQuestion, 3)
	if !strings.Contains(itr.Payload.Question, analyze.ApprovalPhrase) {
		t.Errorf("third message is no proposal: %q", itr.Payload.Question)
	}
	e.Decide(id, itr.ID, graph.ActionApprove, "", "")
	e.Succeeds(id)
	res := agenttest.Result[analyze.Result](e, id)
	if !strings.HasPrefix(res.Analysis, "# Analysis: Why do checkout requests time out on Mondays?") || res.Turns != 3 {
		t.Errorf("result = %+v", res)
	}
	if s := agenttest.State[analyze.State](e, id); s.AnalysisHistory[len(s.AnalysisHistory)-1].Content != analyze.ApprovalPhrase {
		t.Errorf("approve was recorded as %q", s.AnalysisHistory[len(s.AnalysisHistory)-1].Content)
	}
}

func TestApproves(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]bool{
		"SOLUTION APPROVED":             true,
		"solution approved, thanks":     true,
		"Solution\n  approved.":         true,
		"The solution is approved":      false,
		"SOLUTION NOT APPROVED":         false,
		"approved":                      false,
		"I have a question on solution": false,
	} {
		if got := analyze.Approves(msg); got != want {
			t.Errorf("Approves(%q) = %v, want %v", msg, got, want)
		}
	}
}

func TestInputValidation(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	many := make([]analyze.File, analyze.MaxFiles+1)
	for i := range many {
		many[i] = analyze.File{Name: fmt.Sprintf("f%d.txt", i), Content: "x"}
	}
	big := strings.Repeat("x", analyze.MaxFileContent)
	for _, tc := range []struct{ input, options, field string }{
		{`{}`, "", "input.query"},
		{`{"query": " "}`, "", "input.query"},
		{`{"query": 1}`, "", "input.query"},
		{`{"query": "q", "file": []}`, "", "input.file"},
		{`{"query": "q", "files": {}}`, "", "input.files"},
		{`{"query": "q", "files": [{"name": "", "content": "x"}]}`, "", "input.files[0].name"},
		{`{"query": "q", "files": [{"name": "a", "content": "x"}, {"name": "a", "content": "y"}]}`, "", "input.files[1].name"},
		{`{"query": "q", "files": [{"name": "a\nb", "content": "x"}]}`, "", "input.files[0].name"},
		{`{"query": "q", "files": [{"name": "a", "content": "x\u0000y"}]}`, "", "input.files[0].content"},
		{`{"query": "q", "files": [{"name": "a", "content": "x", "size": 1}]}`, "", "input.files[0].size"},
		{agenttest.JSON(t, analyze.Input{Query: "q", Files: []analyze.File{{Name: "a", Content: big + "x"}}}), "", "input.files[0].content"},
		{agenttest.JSON(t, analyze.Input{Query: "q", Files: []analyze.File{{Name: "a", Content: big}, {Name: "b", Content: big}, {Name: "c", Content: big}, {Name: "d", Content: "x"}}}), "", "input.files"},
		{agenttest.JSON(t, analyze.Input{Query: "q", Files: many}), "", "input.files"},
		{input(t), `{"gates": {"allowPlan": true}}`, "options.gates.allowPlan"},
		{input(t), `{"max_turns": 3}`, "options.max_turns"},
	} {
		_, err := e.TryCreate(tc.input, tc.options)
		agenttest.WantValidation(t, err, tc.field)
	}
}
