package pm_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/llm/scripted"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent/agenttest"
	"github.com/gatehousehq/gatehouse/internal/workflows/pm"
)

const description = "Add CSV export of monthly invoices for the finance team."

var criteria = []string{"Finance can download a CSV of any month's invoices.", "Amounts keep two decimals."}

func input(t testing.TB) string {
	return agenttest.JSON(t, pm.Input{Description: description, AcceptanceCriteria: criteria})
}

func provider(t testing.TB, roles map[string][]string) llm.Provider {
	if roles == nil {
		roles = map[string][]string{}
	}
	return scripted.New(pm.Builtin, agenttest.Script(t, roles))
}

// setup gives the test a database and the pm workflow over a scripted
// provider with roles' replies; nodes are not retried.
func setup(t *testing.T, roles map[string][]string, opts ...pm.Option) *agenttest.Env {
	t.Helper()
	p := provider(t, roles)
	return agenttest.New(t, func(tb testing.TB) graph.Workflow {
		g, err := pm.New(p, append([]pm.Option{pm.WithRetry(graph.RetryPolicy{Attempts: 1})}, opts...)...)
		if err != nil {
			tb.Fatalf("pm.New: %v", err)
		}
		return g
	})
}

func verdict(status string, findings, actions []string) string {
	b, _ := json.Marshal(map[string]any{"status": status, "findings": findings, "recommended_actions": actions})
	return string(b)
}

func TestStepFailsTwiceThenPasses(t *testing.T) {
	t.Parallel()
	e := setup(t, map[string][]string{pm.RoleVerifier: {
		verdict("fail", []string{"the CSV header is missing"}, []string{"write a header row"}),
		"```json\n" + verdict("FAILED", []string{"amounts have three decimals"}, []string{"round amounts to two decimals"}) + "\n```",
		verdict("pass", []string{"header present, amounts rounded"}, nil),
	}})
	id := e.Create(input(t), "")
	e.Succeeds(id)

	s := agenttest.State[pm.State](e, id)
	if want := map[string]int{"step-1": 3, "step-2": 1, "step-3": 1}; !maps.Equal(s.AttemptsByStep, want) {
		t.Errorf("attempts_by_step = %v, want %v", s.AttemptsByStep, want)
	}
	if s.Status != pm.StatusSucceeded || s.CurrentStepIndex != 3 || s.Summary == "" || s.TaskID != id {
		t.Errorf("state = status %s index %d task %s", s.Status, s.CurrentStepIndex, s.TaskID)
	}
	// Every attempt is on record with its verification.
	var got []string
	for _, a := range s.History {
		got = append(got, a.StepID+"#"+itoa(a.Attempt)+":"+a.Verification.Status)
	}
	if want := []string{"step-1#1:fail", "step-1#2:fail", "step-1#3:pass", "step-2#1:pass", "step-3#1:pass"}; !slices.Equal(got, want) {
		t.Errorf("history = %v, want %v", got, want)
	}
	if h := s.History[1]; h.JobID != id+"/step-1/2" || h.Target != "llm:scripted" || h.ResultStatus != pm.ResultCompleted ||
		!slices.Equal(h.Verification.Findings, []string{"amounts have three decimals"}) {
		t.Errorf("attempt 2 = %+v", h)
	}

	// The re-dispatches carry the remediation.
	prompts := e.Prompts(id, pm.RoleWorker)
	if len(prompts) != 5 {
		t.Fatalf("worker prompts = %d, want 5", len(prompts))
	}
	if strings.Contains(prompts[0], "failed verification") {
		t.Errorf("first dispatch has remediation:\n%s", prompts[0])
	}
	if !agenttest.Contains(prompts[1], "attempt 2", "Attempt 1 failed verification", "the CSV header is missing", "write a header row") {
		t.Errorf("second dispatch lacks the remediation:\n%s", prompts[1])
	}
	if !agenttest.Contains(prompts[2], "attempt 3", "amounts have three decimals", "round amounts to two decimals") ||
		strings.Contains(prompts[2], "the CSV header is missing") {
		t.Errorf("third dispatch's remediation is not the last verification's:\n%s", prompts[2])
	}
	if strings.Contains(prompts[3], "failed verification") {
		t.Errorf("the next step inherited the remediation:\n%s", prompts[3])
	}
	if !agenttest.Contains(prompts[0], description, criteria[0], criteria[1], "a short design note") {
		t.Errorf("worker prompt lacks the task:\n%s", prompts[0])
	}

	wantNodes := []string{"load_task_context", "plan_steps", "has_next_step",
		"dispatch_step", "collect_result", "verify_step_result",
		"dispatch_step:2", "collect_result:2", "verify_step_result:2",
		"dispatch_step:3", "collect_result:3", "verify_step_result:3", "has_next_step:2",
		"dispatch_step:4", "collect_result:4", "verify_step_result:4", "has_next_step:3",
		"dispatch_step:5", "collect_result:5", "verify_step_result:5", "has_next_step:4",
		"finalize_summary"}
	if got := e.Phases(id, graph.EventNodeCompleted, ""); !slices.Equal(got, wantNodes) {
		t.Errorf("node runs = %v", got)
	}
	if arts := e.Artifacts(id, "step-1.md"); len(arts) != 3 {
		t.Errorf("step-1.md versions = %d, want 3", len(arts))
	}
	if arts := e.Artifacts(id, "step-1.verification.json"); len(arts) != 3 || !strings.Contains(arts[0].Content, "the CSV header is missing") {
		t.Errorf("step-1.verification.json = %+v", arts)
	}
	res := agenttest.Result[pm.Result](e, id)
	if res.Status != pm.StatusSucceeded || len(res.Steps) != 3 || res.Steps[0].Attempts != 3 || res.Steps[0].Status != "pass" || res.Summary == "" {
		t.Errorf("result = %+v", res)
	}
}

func TestStepFailingEveryTimeMarksFailed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		options  string
		attempts int
	}{{"", 3}, {`{"max_attempts": 2}`, 2}} {
		e := setup(t, map[string][]string{pm.RoleVerifier: {
			verdict("fail", []string{"no tests were added"}, []string{"add tests for the export"})}})
		id := e.Create(input(t), tc.options)
		task := e.Fails(id)
		for _, want := range []string{"step step-1", "failed verification after " + itoa(tc.attempts) + " attempts",
			"findings: no tests were added", "recommended actions: add tests for the export"} {
			if !strings.Contains(task.Error, want) {
				t.Errorf("error = %q, want %q in it", task.Error, want)
			}
		}
		failed := e.Events(id, graph.EventNodeFailed)
		if len(failed) != 1 || failed[0].Node != pm.NodeMarkFailed {
			t.Errorf("node.failed = %+v", failed)
		}
		s := agenttest.State[pm.State](e, id)
		if s.Status != pm.StatusFailed || s.FailedStep != "step-1" || s.AttemptsByStep["step-1"] != tc.attempts ||
			s.Verification == nil || s.Verification.Status != pm.VerifyFail || len(s.History) != tc.attempts {
			t.Errorf("state = %+v", s)
		}
		if n := len(e.LLMCalls(id, pm.RoleSummarizer)); n != 0 {
			t.Errorf("summarizer called %d times", n)
		}
		if n := len(e.LLMCalls(id, pm.RoleWorker)); n != tc.attempts {
			t.Errorf("worker calls = %d, want %d", n, tc.attempts)
		}
	}
}

func TestNoStepsGoesStraightToTheSummary(t *testing.T) {
	t.Parallel()
	e := setup(t, map[string][]string{pm.RolePlanner: {"steps: []\nassumptions:\n  - the export already exists\n"}})
	id := e.Create(input(t), "")
	e.Succeeds(id)
	if got := e.Phases(id, graph.EventNodeCompleted, ""); !slices.Equal(got, []string{"load_task_context", "plan_steps", "has_next_step", "finalize_summary"}) {
		t.Errorf("node runs = %v", got)
	}
	if n := len(e.LLMCalls(id, pm.RoleWorker)) + len(e.LLMCalls(id, pm.RoleVerifier)); n != 0 {
		t.Errorf("%d worker/verifier calls", n)
	}
	if p := e.Prompts(id, pm.RoleSummarizer); len(p) != 1 || !strings.Contains(p[0], "The plan had no steps") {
		t.Errorf("summarizer prompt = %q", p)
	}
	res := agenttest.Result[pm.Result](e, id)
	if res.Status != pm.StatusSucceeded || len(res.Steps) != 0 || res.Summary == "" {
		t.Errorf("result = %+v", res)
	}
}

func TestPlanGate(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	id := e.Create(input(t), `{"gates": {"allowPlan": false}}`)
	itr := e.Waits(id, pm.NodePlanSteps, pm.GatePlan, 1)
	if a := itr.Payload.Artifact; a == nil || a.Name != pm.ArtifactPlan || !strings.Contains(a.Content, "step-1") {
		t.Fatalf("gate artifact = %+v", a)
	}
	e.Decide(id, itr.ID, graph.ActionReject, "Add a step for the documentation.", "")
	itr = e.Waits(id, pm.NodePlanSteps, pm.GatePlan, 2)
	if p := e.Prompts(id, pm.RolePlanner); len(p) != 2 || !strings.Contains(p[1], "Add a step for the documentation.") {
		t.Errorf("planner prompts = %q", p)
	}

	if err := e.TryDecide(id, itr.ID, graph.ActionEdit, "", "steps:\n  - title: no outputs\n"); err == nil {
		t.Error("an edit without expected outputs was accepted")
	}
	edited := "steps:\n  - id: docs\n    title: Document the export\n    expected_outputs: [a README section]\nassumptions: []\n"
	e.Decide(id, itr.ID, graph.ActionEdit, "", edited)
	e.Succeeds(id)
	s := agenttest.State[pm.State](e, id)
	if len(s.Plan.Steps) != 1 || s.Plan.Steps[0].ID != "docs" || s.AttemptsByStep["docs"] != 1 || len(s.PlanFeedback) != 1 {
		t.Errorf("state = %+v", s)
	}
	if arts := e.Artifacts(id, pm.ArtifactPlan); len(arts) != 3 || arts[2].Content != edited {
		t.Errorf("plan.yaml versions = %d", len(arts))
	}
}

// fakeWorker is a Worker outside the LLM: it records its calls and fails
// the first collection of a job once.
type fakeWorker struct {
	mu         sync.Mutex
	dispatched []string
	collected  []string
	failed     map[string]bool
}

func (w *fakeWorker) Dispatch(_ context.Context, _ *graph.NodeRun, job pm.Job) (pm.Ticket, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dispatched = append(w.dispatched, job.ID)
	return pm.Ticket{Target: "sandbox-7"}, nil
}

func (w *fakeWorker) Collect(_ context.Context, _ *graph.NodeRun, job pm.Job, t pm.Ticket) (pm.StepResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.collected = append(w.collected, job.ID+"@"+t.Target)
	if !w.failed[job.ID] {
		w.failed[job.ID] = true
		return pm.StepResult{}, errors.New("sandbox not ready")
	}
	return pm.StepResult{Output: "did " + job.Title, Artifacts: []string{"s3://bucket/" + job.StepID}}, nil
}

func TestCustomWorker(t *testing.T) {
	t.Parallel()
	w := &fakeWorker{failed: map[string]bool{}}
	p := provider(t, nil)
	e := agenttest.New(t, func(tb testing.TB) graph.Workflow {
		g, err := pm.New(p, pm.WithWorker(w), pm.WithRetry(graph.RetryPolicy{Attempts: 2}))
		if err != nil {
			tb.Fatal(err)
		}
		return g
	})
	id := e.Create(input(t), "")
	e.Succeeds(id)
	if want := []string{id + "/step-1/1", id + "/step-2/1", id + "/step-3/1"}; !slices.Equal(w.dispatched, want) {
		t.Errorf("dispatched = %v", w.dispatched)
	}
	if len(w.collected) != 6 || w.collected[0] != id+"/step-1/1@sandbox-7" {
		t.Errorf("collected = %v", w.collected)
	}
	if n := len(e.LLMCalls(id, pm.RoleWorker)); n != 0 {
		t.Errorf("the LLM worker was called %d times", n)
	}
	s := agenttest.State[pm.State](e, id)
	if r := s.LastResult; r == nil || r.Target != "sandbox-7" || r.Status != pm.ResultCompleted || r.StepID != "step-3" ||
		r.Output != "did Verify against the acceptance criteria" || r.CollectedAt.IsZero() {
		t.Errorf("last_result = %+v", r)
	}
}

func TestPlanAndVerificationParsing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ text, err string }{
		{"steps: []", ""},
		{"```yaml\nsteps:\n  - title: A\n    expected_outputs: [x]\n```", ""},
		{"", "plan.yaml is empty"},
		{"Here is my plan: do it.", "no steps list"},
		{"I would split it in three steps.", "must be a mapping"},
		{"assumptions: []", "no steps list"},
		{"steps: [", "does not parse"},
		{"steps:\n  - title: A\n", "expected_outputs is required"},
		{"steps:\n  - expected_outputs: [x]\n", "title is required"},
		{"steps:\n  - {id: a, title: A, expected_outputs: [x]}\n  - {id: a, title: B, expected_outputs: [y]}\n", "id is used twice"},
		{"steps:\n  - {id: 'a b', title: A, expected_outputs: [x]}\n", "id must be"},
		{"steps: {a: 1}", "does not match the plan format"},
	} {
		_, err := pm.ParsePlan(tc.text)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ParsePlan(%q) = %v, want %q", tc.text, err, tc.err)
		}
	}
	p, _ := pm.ParsePlan("steps:\n  - title: A\n    expected_outputs: [x]\n  - title: B\n    expected_outputs: [y]\n")
	if p.Steps[0].ID != "step-1" || p.Steps[1].ID != "step-2" {
		t.Errorf("default ids = %+v", p.Steps)
	}
	for reply, want := range map[string]string{
		`{"status": "pass"}`:                     pm.VerifyPass,
		`{"status": "Failed", "findings": "x"}`:  pm.VerifyFail,
		`Verdict: {"passed": true}`:              pm.VerifyPass,
		`{"status": "maybe"}`:                    "",
		`{"findings": []}`:                       "",
		`The result looks good to me, it passes`: "",
	} {
		v, err := pm.ParseVerification(reply)
		if want == "" && err == nil || want != "" && (err != nil || v.Status != want) {
			t.Errorf("ParseVerification(%q) = %+v, %v; want %q", reply, v, err, want)
		}
	}
}

func TestBuiltinReplies(t *testing.T) {
	t.Parallel()
	for _, r := range pm.Roles() {
		if text, ok := pm.BuiltinReply(r, description); !ok || strings.TrimSpace(text) == "" {
			t.Errorf("no built-in reply for %s", r)
		}
	}
	plan, _ := pm.BuiltinReply(pm.RolePlanner, description)
	if p, err := pm.ParsePlan(plan); err != nil || len(p.Steps) != 3 {
		t.Errorf("built-in plan = %+v, %v", p, err)
	}
	other, _ := pm.BuiltinReply(pm.RolePlanner, "Migrate the billing service to PostgreSQL 16.")
	if other == plan {
		t.Error("built-in plans do not vary with the task")
	}
	v, _ := pm.BuiltinReply(pm.RoleVerifier, "Survey")
	if got, err := pm.ParseVerification(v); err != nil || got.Status != pm.VerifyPass {
		t.Errorf("built-in verification = %+v, %v", got, err)
	}
	if _, ok := pm.BuiltinReply("slogan.writer", description); ok {
		t.Error("answers another workflow's role")
	}
}

func TestInputValidation(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	for _, tc := range []struct{ input, options, field string }{
		{`{"acceptance_criteria": ["a"]}`, "", "input.description"},
		{`{"description": "d"}`, "", "input.acceptance_criteria"},
		{`{"description": "d", "acceptance_criteria": []}`, "", "input.acceptance_criteria"},
		{`{"description": "d", "acceptance_criteria": "a"}`, "", "input.acceptance_criteria"},
		{`{"description": "d", "acceptance_criteria": ["a", " "]}`, "", "input.acceptance_criteria[1]"},
		{`{"description": "d", "acceptance_criteria": ["a"], "preferences": []}`, "", "input.preferences"},
		{`{"description": "d", "acceptance_criteria": ["a"], "task_id": "x"}`, "", "input.task_id"},
		{`{"description": "d", "acceptance_criteria": ["a"], "preferences": {"language": 0}}`, "", "input.preferences.language"},
		{`{"description": "d", "acceptance_criteria": ["a"], "preferences": {"language": "` + strings.Repeat("é", pm.MaxLanguage+1) + `"}}`, "", "input.preferences.language"},
		{`{"description": "d", "acceptance_criteria": ["a"], "preferences": {"summary_style": "long"}}`, "", "input.preferences.summary_style"},
		{`{"description": "d", "acceptance_criteria": ["a"], "preferences": {"require_evidence": "yes"}}`, "", "input.preferences.require_evidence"},
		{input(t), `{"max_attempts": 0}`, "options.max_attempts"},
		{input(t), `{"max_attempts": 11}`, "options.max_attempts"},
		{input(t), `{"gates": {"allowMerge": true}}`, "options.gates.allowMerge"},
		{input(t), `{"retries": 2}`, "options.retries"},
	} {
		_, err := e.TryCreate(tc.input, tc.options)
		agenttest.WantValidation(t, err, tc.field)
	}
	// Preferences reach preferences_effective over the defaults.
	id := e.Create(agenttest.JSON(t, pm.Input{Description: description, AcceptanceCriteria: criteria,
		Preferences: map[string]any{"summary_style": "detailed", "language": " Go ", "team": "core"}}), `{"gates": {"allowPlan": false}}`)
	e.Waits(id, pm.NodePlanSteps, pm.GatePlan, 1)
	s := agenttest.State[pm.State](e, id)
	if s.PreferencesEffective["summary_style"] != "detailed" || s.PreferencesEffective["language"] != "Go" || s.PreferencesEffective["team"] != "core" ||
		s.PreferencesEffective["require_evidence"] != true || s.PreferencesEffective["max_attempts_per_step"] != float64(3) {
		t.Errorf("preferences_effective = %v", s.PreferencesEffective)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
