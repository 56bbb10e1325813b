package sdd_test

// The sdd workflow on the real engine and PostgreSQL, its agents answered
// by the scripted provider (per-role reply lists as LLM_SCRIPT_FILE gives
// them, built-in replies for the other roles). Every Create, Run and Decide
// goes through a fresh engine (agenttest).

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm/scripted"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent/agenttest"
	"github.com/gatehousehq/gatehouse/internal/workflows/sdd"
)

const brief = "An invoice approval workflow for finance teams: invoices are uploaded, routed to approvers, and paid."

const (
	gatesClosed = `{"gates": {"allowSdd": false}}`
	// allowSdd passes the human review: without it the sdd gate stops,
	// gates option or not (seed 000: "Human Review Must Approve").
	allowSdd = `{"gates": {"allowSdd": true}}`
)

func input(t testing.TB) string { return agenttest.JSON(t, sdd.Input{ProjectBrief: brief}) }

// setup gives the test a database and the sdd workflow over a scripted
// provider with roles' replies; agent nodes are not retried.
func setup(t *testing.T, roles map[string][]string, opts ...sdd.Option) *agenttest.Env {
	t.Helper()
	if roles == nil {
		roles = map[string][]string{}
	}
	script := agenttest.Script(t, roles)
	return agenttest.New(t, func(tb testing.TB) graph.Workflow {
		g, err := sdd.New(scripted.New(sdd.Builtin, script),
			append([]sdd.Option{sdd.WithRetry(graph.RetryPolicy{Attempts: 1})}, opts...)...)
		if err != nil {
			tb.Fatalf("sdd.New: %v", err)
		}
		return g
	})
}

func needsRevision(issue string) string {
	b, _ := json.Marshal(map[string]any{"needs_revision": true, "issues": []string{issue}})
	return string(b)
}

func wantPhases(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestRevisionLoopStopsAtMaxRevisions(t *testing.T) {
	t.Parallel()
	var reviews []string
	for i := 1; i <= 5; i++ {
		reviews = append(reviews, needsRevision(fmt.Sprintf("no auth section (review %d)", i)))
	}
	e := setup(t, map[string][]string{sdd.RoleReviewer: reviews})
	id := e.Create(input(t), allowSdd)
	e.Succeeds(id)

	s := agenttest.State[sdd.State](e, id)
	if s.RevisionCount != 3 || !s.NeedsRevision || !s.ForcedContinue || s.MaxRevisions != 3 {
		t.Errorf("revision_count %d needs_revision %v forced %v max %d, want 3 true true 3",
			s.RevisionCount, s.NeedsRevision, s.ForcedContinue, s.MaxRevisions)
	}
	// The full cycle ran three times, then the way was forced on.
	wantPhases(t, "nodes started", e.Phases(id, graph.EventNodeStarted, ""), []string{
		"draft_hld", "draft_lld", "design_database", "review_doc",
		"draft_hld:2", "draft_lld:2", "design_database:2", "review_doc:2",
		"draft_hld:3", "draft_lld:3", "design_database:3", "review_doc:3",
		"format_doc", "human_review"})
	if n := len(e.LLMCalls(id, sdd.RoleReviewer)); n != 3 {
		t.Errorf("reviewer calls = %d, want 3 (the 4th and 5th replies unused)", n)
	}

	// Each redraft's prompt carries the review that asked for it.
	prompts := e.Prompts(id, sdd.RoleArchitect)
	if len(prompts) != 3 {
		t.Fatalf("architect prompts = %d, want 3", len(prompts))
	}
	if strings.Contains(prompts[0], "no auth section") {
		t.Errorf("first architect prompt already has review feedback:\n%s", prompts[0])
	}
	if !strings.Contains(prompts[1], "no auth section (review 1)") || !strings.Contains(prompts[2], "no auth section (review 2)") {
		t.Errorf("redraft prompts lack the reviewer's issues:\n%s\n----\n%s", prompts[1], prompts[2])
	}
	for _, role := range []string{sdd.RoleAPIData, sdd.RoleDatabase} {
		if p := e.Prompts(id, role); len(p) != 3 || !strings.Contains(p[1], "no auth section (review 1)") {
			t.Errorf("%s's second prompt lacks the revision feedback", role)
		}
	}
	// The writer is told what stayed open.
	if p := e.Prompts(id, sdd.RoleWriter); len(p) != 1 || !strings.Contains(p[0], "no auth section (review 3)") {
		t.Errorf("writer prompt lacks the open issues: %q", p)
	}
	if n := len(e.Artifacts(id, sdd.ArtifactReview)); n != 3 {
		t.Errorf("review.json versions = %d, want 3", n)
	}
	res := agenttest.Result[sdd.Result](e, id)
	if res.RevisionCount != 3 || !res.ForcedContinue || res.DocumentStatus != sdd.StatusFinal || res.FinalDocument == "" {
		t.Errorf("result = %+v", res)
	}
}

func TestRevisionLoopEndsWhenTheReviewerIsSatisfied(t *testing.T) {
	t.Parallel()
	e := setup(t, map[string][]string{sdd.RoleReviewer: {
		"```json\n" + needsRevision("the LLD has no error model") + "\n```",
		`Here is my review: {"needs_revision": false, "issues": [], "summary": "good"}`}})
	id := e.Create(input(t), allowSdd)
	e.Succeeds(id)
	s := agenttest.State[sdd.State](e, id)
	if s.RevisionCount != 1 || s.NeedsRevision || s.ForcedContinue || s.RevisionFeedback != "" {
		t.Errorf("state = count %d needs %v forced %v feedback %q", s.RevisionCount, s.NeedsRevision, s.ForcedContinue, s.RevisionFeedback)
	}
	wantPhases(t, "review_doc runs", e.Phases(id, graph.EventNodeCompleted, sdd.NodeReviewDoc), []string{"review_doc", "review_doc:2"})
}

func TestMaxRevisionsOption(t *testing.T) {
	t.Parallel()
	e := setup(t, map[string][]string{sdd.RoleReviewer: {needsRevision("always")}})
	id := e.Create(input(t), `{"max_revisions": 1, "gates": {"allowSdd": true}}`)
	e.Succeeds(id)
	if s := agenttest.State[sdd.State](e, id); s.RevisionCount != 1 || !s.ForcedContinue || s.MaxRevisions != 1 {
		t.Errorf("state = %+v", s)
	}
	if n := len(e.LLMCalls(id, sdd.RoleReviewer)); n != 1 {
		t.Errorf("reviewer calls = %d, want 1", n)
	}
}

func TestHumanRejectLoopsToDraftHLD(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	id := e.Create(input(t), gatesClosed)
	itr := e.Waits(id, sdd.NodeHumanReview, sdd.GateSDD, 1)
	s := agenttest.State[sdd.State](e, id)
	if s.DocumentStatus != sdd.StatusReview || s.Approved != nil {
		t.Errorf("at the gate: document_status %q approved %v, want review and undecided", s.DocumentStatus, s.Approved)
	}
	if a := itr.Payload.Artifact; a == nil || a.Name != sdd.ArtifactSDD || a.Content != s.FinalDocument || s.FinalDocument == "" {
		t.Fatalf("gate artifact = %+v, want sdd.md as in the state", a)
	}
	if !slices.Equal(itr.Payload.Actions, []string{"approve", "reject", "edit"}) {
		t.Errorf("actions = %v", itr.Payload.Actions)
	}

	const words = "Add a section on GDPR data deletion and retention."
	before := len(e.Events(id, ""))
	e.Decide(id, itr.ID, graph.ActionReject, words, "")
	itr2 := e.Waits(id, sdd.NodeHumanReview, sdd.GateSDD, 2)
	if itr2.ID == itr.ID {
		t.Fatal("the second review reused the first interrupt")
	}
	var after []string
	for _, ev := range e.Events(id, graph.EventNodeStarted)[0:] {
		if ev.Seq > int64(before) {
			after = append(after, ev.Phase)
		}
	}
	wantPhases(t, "nodes after the rejection", after, []string{"draft_hld:2", "draft_lld:2", "design_database:2",
		"review_doc:2", "format_doc:2", "human_review:2"})
	for _, role := range []string{sdd.RoleArchitect, sdd.RoleAPIData, sdd.RoleDatabase, sdd.RoleReviewer, sdd.RoleWriter} {
		p := e.Prompts(id, role)
		if len(p) != 2 || strings.Contains(p[0], words) || !strings.Contains(p[1], words) {
			t.Errorf("%s: the human's words are not in the second prompt (only): %d prompts", role, len(p))
		}
	}
	s = agenttest.State[sdd.State](e, id)
	if len(s.HumanFeedback) != 1 || s.HumanFeedback[0] != (sdd.HumanFeedback{Round: 1, Feedback: words}) ||
		s.DocumentStatus != sdd.StatusReview || s.Approved != nil || s.RevisionCount != 0 {
		t.Errorf("state after the redraft = %+v", s)
	}

	e.Decide(id, itr2.ID, graph.ActionApprove, "", "")
	e.Succeeds(id)
	res := agenttest.Result[sdd.Result](e, id)
	if res.DocumentStatus != sdd.StatusFinal || !res.Approved || res.HumanRejections != 1 {
		t.Errorf("result = %+v", res)
	}
}

func TestApprovalMakesTheDocumentFinal(t *testing.T) {
	t.Parallel()
	t.Run("approve", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		id := e.Create(input(t), gatesClosed)
		itr := e.Waits(id, sdd.NodeHumanReview, sdd.GateSDD, 1)
		e.Decide(id, itr.ID, graph.ActionApprove, "", "")
		e.Succeeds(id)
		s := agenttest.State[sdd.State](e, id)
		writer, _ := sdd.BuiltinReply(sdd.RoleWriter, brief)
		if s.DocumentStatus != sdd.StatusFinal || s.Approved == nil || !*s.Approved ||
			strings.TrimSpace(s.FinalDocument) != strings.TrimSpace(writer) {
			t.Errorf("state = status %q approved %v final %d bytes", s.DocumentStatus, s.Approved, len(s.FinalDocument))
		}
		for _, name := range []string{sdd.ArtifactHLD, sdd.ArtifactLLD, sdd.ArtifactDatabase, sdd.ArtifactReview, sdd.ArtifactSDD} {
			if n := len(e.Artifacts(id, name)); n != 1 {
				t.Errorf("%s versions = %d, want 1", name, n)
			}
		}
		if res := agenttest.Result[sdd.Result](e, id); res.FinalDocument != s.FinalDocument || !res.Approved {
			t.Errorf("result = %+v", res)
		}
		// Every agent call is on record, with the scripted model.
		calls := e.LLMCalls(id, "")
		if len(calls) != 5 {
			t.Fatalf("llm.call events = %d, want 5", len(calls))
		}
		for _, c := range calls {
			if c.Model != scripted.Model || c.Provider != scripted.Name || c.Prompt == "" || c.Reply == "" || c.PromptTokens == 0 {
				t.Errorf("llm.call = %+v", c)
			}
		}
	})
	t.Run("edit", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		id := e.Create(input(t), gatesClosed)
		itr := e.Waits(id, sdd.NodeHumanReview, sdd.GateSDD, 1)
		err := e.TryDecide(id, itr.ID, graph.ActionEdit, "", "too short")
		agenttest.WantValidation(t, err, "value")
		edited := "# Software Design Document\n\n" + strings.Repeat("The edited design keeps every section. ", 5)
		e.Decide(id, itr.ID, graph.ActionEdit, "", edited)
		e.Succeeds(id)
		s := agenttest.State[sdd.State](e, id)
		if s.FinalDocument != edited || s.DocumentStatus != sdd.StatusFinal {
			t.Errorf("final document = %q (%s)", s.FinalDocument, s.DocumentStatus)
		}
		if arts := e.Artifacts(id, sdd.ArtifactSDD); len(arts) != 2 || arts[1].Content != edited {
			t.Errorf("sdd.md versions = %+v", arts)
		}
	})
	t.Run("stops without a gates option", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		id := e.Create(input(t), "")
		out := e.Run(id)
		if out.Status != graph.StatusWaiting || out.Interrupt == nil || out.Interrupt.Kind != sdd.GateSDD {
			t.Errorf("without options: %+v, want waiting at the sdd gate", out)
		}
	})
	t.Run("auto-approved with allowSdd", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		id := e.Create(input(t), `{"gates": {"allowSdd": true}}`)
		e.Succeeds(id)
		if s := agenttest.State[sdd.State](e, id); s.DocumentStatus != sdd.StatusFinal || len(e.Events(id, graph.EventInterruptRaised)) != 0 {
			t.Errorf("document_status %q", s.DocumentStatus)
		}
	})
}

func TestShortHLDFailsDraftLLD(t *testing.T) {
	t.Parallel()
	e := setup(t, map[string][]string{sdd.RoleArchitect: {"# HLD\n\nToo short to build on."}})
	id := e.Create(input(t), allowSdd)
	task := e.Fails(id)
	const msg = "hld_draft is required and must be at least 100 characters"
	if !strings.Contains(task.Error, msg) || !strings.Contains(task.Error, "draft_lld") {
		t.Errorf("error = %q, want draft_lld to fail with %q", task.Error, msg)
	}
	failed := e.Events(id, graph.EventNodeFailed)
	if len(failed) != 1 || failed[0].Node != sdd.NodeDraftLLD {
		t.Errorf("node.failed = %+v", failed)
	}
	if n := len(e.LLMCalls(id, sdd.RoleAPIData)); n != 0 {
		t.Errorf("the API designer was called %d times", n)
	}
	if task.CurrentNode != sdd.NodeDraftLLD {
		t.Errorf("current node = %q", task.CurrentNode)
	}
}

func TestUnreadableReviewFails(t *testing.T) {
	t.Parallel()
	e := setup(t, map[string][]string{sdd.RoleReviewer: {"Looks fine to me."}})
	task := e.Fails(e.Create(input(t), allowSdd))
	if !strings.Contains(task.Error, "review_doc") || !strings.Contains(task.Error, "not the JSON review") {
		t.Errorf("error = %q", task.Error)
	}
}

func TestInputValidation(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	for _, tc := range []struct{ input, options, field string }{
		{`{}`, "", "input.project_brief"},
		{`{"project_brief": "   "}`, "", "input.project_brief"},
		{`{"project_brief": 7}`, "", "input.project_brief"},
		{`{"project_brief": "x", "brief": "y"}`, "", "input.brief"},
		{`[1]`, "", "input"},
		{`{"project_brief": "` + strings.Repeat("x", sdd.MaxBrief+1) + `"}`, "", "input.project_brief"},
		{input(t), `{"max_revisions": 11}`, "options.max_revisions"},
		{input(t), `{"max_revisions": -1}`, "options.max_revisions"},
		{input(t), `{"max_revisions": "3"}`, "options.max_revisions"},
		{input(t), `{"gates": {"allowPlan": true}}`, "options.gates.allowPlan"},
		{input(t), `{"turns": 3}`, "options.turns"},
	} {
		_, err := e.TryCreate(tc.input, tc.options)
		agenttest.WantValidation(t, err, tc.field)
	}
	if _, err := e.TryCreate(input(t), `{"max_revisions": 0, "gates": {"allowSdd": false}}`); err != nil {
		t.Errorf("valid options refused: %v", err)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	g, err := sdd.New(scripted.New(sdd.Builtin, nil))
	if err != nil {
		t.Fatal(err)
	}
	d := g.Describe()
	if !slices.Equal(d.Gates, []graph.GateInfo{{Node: sdd.NodeHumanReview, Kind: sdd.GateSDD, Option: sdd.OptionAllowSdd}}) {
		t.Errorf("gates = %+v", d.Gates)
	}
	for _, e := range []graph.EdgeInfo{
		{From: sdd.NodeReviewDoc, To: sdd.NodeDraftHLD, Condition: "revise"},
		{From: sdd.NodeReviewDoc, To: sdd.NodeFormatDoc, Condition: "continue"},
		{From: sdd.NodeHumanReview, To: sdd.NodeDraftHLD, Condition: "rejected"},
	} {
		if !slices.Contains(d.Edges, e) {
			t.Errorf("edges lack %+v: %+v", e, d.Edges)
		}
	}
	for _, r := range sdd.Roles() {
		if text, ok := sdd.BuiltinReply(r, brief); !ok || strings.TrimSpace(text) == "" {
			t.Errorf("no built-in reply for %s", r)
		}
	}
	if _, ok := sdd.BuiltinReply("feature.plan", brief); ok {
		t.Error("BuiltinReply answers another workflow's role")
	}
	// Built-in replies name the brief's subject and pass the validators.
	hld, _ := sdd.BuiltinReply(sdd.RoleArchitect, brief)
	other, _ := sdd.BuiltinReply(sdd.RoleArchitect, "A ticket booking site for concerts and festivals.")
	if !strings.Contains(hld, "Invoice") || hld == other || len(hld) < sdd.MinDraft {
		t.Errorf("architect's built-in reply does not vary with the brief")
	}
	rev, _ := sdd.BuiltinReply(sdd.RoleReviewer, brief)
	if r, err := sdd.ParseReview(rev); err != nil || r.NeedsRevision {
		t.Errorf("built-in review = %+v, %v", r, err)
	}
}

func TestParseReview(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		reply  string
		needs  bool
		issues []string
		bad    bool
	}{
		{`{"needs_revision": true, "issues": ["no auth section"]}`, true, []string{"no auth section"}, false},
		{`{"needs_revision": false}`, false, []string{}, false},
		{`{"issues": ["x"]}`, false, []string{"x"}, false},
		{"```json\n{\"needs_revision\": \"yes\", \"issues\": \"one\"}\n```", true, []string{"one"}, false},
		{`Review: {"needs_revision": true, "issues": [{"section": "API", "problem": "no errors"}]} Thanks.`, true,
			[]string{"problem: no errors, section: API"}, false},
		{`LGTM`, false, nil, true},
		{`{"needs_revision": maybe}`, false, nil, true},
		{`{"needs_revision": "perhaps"}`, false, nil, true},
	} {
		r, err := sdd.ParseReview(tc.reply)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: no error", tc.reply)
			}
			continue
		}
		if err != nil || r.NeedsRevision != tc.needs || !slices.Equal(r.Issues, tc.issues) {
			t.Errorf("%q = %+v, %v", tc.reply, r, err)
		}
	}
}
