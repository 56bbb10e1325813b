package feature_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
	"gopkg.in/yaml.v3"
)

// fastRetry keeps retry tests quick; the policy's shape is the default one.
var fastRetry = graph.RetryPolicy{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Jitter: 0.2}

type harness struct {
	t    *testing.T
	cp   *graph.MemoryCheckpointer
	eng  *graph.Engine
	stub *featuretest.StubExecutor
}

func newHarness(t *testing.T, opts ...feature.Option) *harness {
	t.Helper()
	stub := featuretest.NewStub("")
	g, err := feature.New(stub, append([]feature.Option{feature.WithRetry(fastRetry)}, opts...)...)
	if err != nil {
		t.Fatalf("feature.New: %v", err)
	}
	cp := graph.NewMemoryCheckpointer()
	eng, err := graph.NewEngine(cp, []graph.Workflow{g})
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	return &harness{t: t, cp: cp, eng: eng, stub: stub}
}

// start creates a task; options is the task's options JSON ("" for none).
func (h *harness) start(options string) string {
	h.t.Helper()
	in, _ := json.Marshal(map[string]string{"description": featuretest.DefaultDescription})
	nt := graph.NewTask{Workflow: feature.Name, Title: "t", Input: in}
	if options != "" {
		nt.Options = json.RawMessage(options)
	}
	task, err := h.eng.Create(context.Background(), nt)
	if err != nil {
		h.t.Fatalf("Create: %v", err)
	}
	return task.ID
}

func (h *harness) run(id string) graph.Outcome {
	h.t.Helper()
	out, err := h.eng.Run(context.Background(), id, 0)
	if err != nil {
		h.t.Fatalf("Run: %v", err)
	}
	return out
}

// waitsAt runs the task and checks it waits on a gate of node.
func (h *harness) waitsAt(id, node, kind string, iteration int) *graph.Interrupt {
	h.t.Helper()
	out := h.run(id)
	if out.Status != graph.StatusWaiting || out.Interrupt == nil {
		h.t.Fatalf("outcome = %+v, want waiting at %s", out, node)
	}
	itr := out.Interrupt
	if itr.Node != node || itr.Kind != kind || itr.Iteration != iteration {
		h.t.Fatalf("interrupt at %s/%s iteration %d, want %s/%s iteration %d", itr.Node, itr.Kind, itr.Iteration, node, kind, iteration)
	}
	return itr
}

func (h *harness) decide(id string, itr *graph.Interrupt, action, feedback, value string) {
	h.t.Helper()
	in := graph.DecisionInput{InterruptID: itr.ID, Action: action, Feedback: feedback, DecidedBy: "tester"}
	if value != "" {
		in.Value, _ = json.Marshal(value)
	}
	if _, err := h.eng.Decide(context.Background(), id, in); err != nil {
		h.t.Fatalf("Decide %s: %v", action, err)
	}
}

func (h *harness) succeeds(id string) {
	h.t.Helper()
	if out := h.run(id); out.Status != graph.StatusSucceeded {
		h.t.Fatalf("outcome = %+v, want succeeded", out)
	}
}

func (h *harness) state(id string) feature.State {
	h.t.Helper()
	snap, err := h.cp.Load(context.Background(), id)
	if err != nil {
		h.t.Fatalf("Load: %v", err)
	}
	var s feature.State
	if err := json.Unmarshal(snap.Checkpoint.State, &s); err != nil {
		h.t.Fatalf("state: %v", err)
	}
	return s
}

func (h *harness) events(id, typ string) []graph.Event {
	var out []graph.Event
	for _, e := range h.cp.Events(id) {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// phasesStarted lists the phases of node.started events of node (all
// nodes when node is "").
func (h *harness) phasesStarted(id, node string) []string {
	var out []string
	for _, e := range h.events(id, graph.EventNodeStarted) {
		if node == "" || e.Node == node {
			out = append(out, e.Phase)
		}
	}
	return out
}

func (h *harness) lastArtifact(id, name string) graph.Artifact {
	h.t.Helper()
	arts := h.cp.Artifacts(id)
	for i := len(arts) - 1; i >= 0; i-- {
		if arts[i].Name == name {
			return arts[i]
		}
	}
	h.t.Fatalf("no artifact %s", name)
	return graph.Artifact{}
}

func (h *harness) wantCalls(want map[string]int) {
	h.t.Helper()
	got := h.stub.CallsByRole()
	for _, r := range feature.Roles() {
		if got[r] != want[r] {
			h.t.Errorf("calls of %s = %d, want %d (all: %v)", r, got[r], want[r], got)
		}
	}
}

func completed(t *testing.T, s feature.State) []string {
	t.Helper()
	ps, err := feature.CompletedPhases(s.FeatureYAML)
	if err != nil {
		t.Fatalf("CompletedPhases: %v", err)
	}
	return ps
}

func timings(t *testing.T, s feature.State) []string {
	t.Helper()
	ps, err := feature.PhaseTimingNames(s.FeatureYAML)
	if err != nil {
		t.Fatalf("PhaseTimingNames: %v", err)
	}
	return ps
}

var allPhases = []string{"analyze", "requirements", "research", "plan", "implement", "merge"}

func once() map[string]int {
	m := map[string]int{}
	for _, r := range feature.Roles() {
		m[r] = 1
	}
	return m
}

func TestFullRunWithoutInterrupts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, options string }{
		{"no gates option", ""},
		{"gates option absent", `{"other": 1}`},
		{"every gate allowed", `{"gates": {"allowPrd": true, "allowPlan": true, "allowMerge": true}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			id := h.start(tc.options)
			h.succeeds(id)

			h.wantCalls(once())
			if n := h.stub.CallCount(); n != 6 {
				t.Errorf("executor calls = %d, want 6", n)
			}
			if got := h.phasesStarted(id, ""); !slices.Equal(got, feature.Nodes()) {
				t.Errorf("nodes started = %v, want %v", got, feature.Nodes())
			}
			if n := len(h.events(id, graph.EventInterruptRaised)); n != 0 {
				t.Errorf("%d interrupts raised, want none", n)
			}
			s := h.state(id)
			if got := completed(t, s); !slices.Equal(got, allPhases) {
				t.Errorf("completedPhases = %v, want %v", got, allPhases)
			}
			if got := timings(t, s); !slices.Equal(got, allPhases) {
				t.Errorf("phaseTimings = %v, want %v", got, allPhases)
			}
			ts, _ := feature.PhaseTimings(s.FeatureYAML)
			for _, pt := range ts {
				st, err1 := time.Parse(time.RFC3339Nano, pt.StartedAt)
				en, err2 := time.Parse(time.RFC3339Nano, pt.CompletedAt)
				if err1 != nil || err2 != nil || en.Before(st) || pt.DurationMS < 0 {
					t.Errorf("bad timing %+v", pt)
				}
			}
			if s.Name != "let-users-export-their-reports-as" {
				t.Errorf("name = %q, want analyze's", s.Name)
			}
			var tasks struct {
				Tasks []struct{ ID, PhaseID, Title string } `yaml:"tasks"`
			}
			if err := yaml.Unmarshal([]byte(s.TasksYAML), &tasks); err != nil || len(tasks.Tasks) != 4 || tasks.Tasks[0].ID != "task-1" {
				t.Errorf("tasks.yaml = %q (%v)", s.TasksYAML, err)
			}

			// Every document is an artifact with its content type.
			for name, ct := range map[string]string{"spec.yaml": "application/yaml", "research.yaml": "application/yaml",
				"plan.yaml": "application/yaml", "tasks.yaml": "application/yaml", "feature.yaml": "application/yaml",
				"implementation.md": "text/markdown", "merge.md": "text/markdown"} {
				a := h.lastArtifact(id, name)
				if a.ContentType != ct || a.Content != s.Document(name) {
					t.Errorf("artifact %s: type %s, content matches state: %v", name, a.ContentType, a.Content == s.Document(name))
				}
			}

			// One llm.call event per call, with what the UI shows.
			calls := h.events(id, graph.EventLLMCall)
			if len(calls) != 6 {
				t.Fatalf("llm.call events = %d, want 6", len(calls))
			}
			for i, e := range calls {
				var d map[string]any
				if err := json.Unmarshal(e.Data, &d); err != nil {
					t.Fatal(err)
				}
				if d["role"] != feature.Roles()[i] || d["model"] != "stub" || d["prompt"] == "" || d["reply"] == "" {
					t.Errorf("llm.call %d = %v", i, d)
				}
				for _, k := range []string{"duration_ms", "prompt_tokens", "reply_tokens"} {
					if _, ok := d[k].(float64); !ok {
						t.Errorf("llm.call %d: %s = %v", i, k, d[k])
					}
				}
			}

			task, _ := h.cp.Task(id)
			var res feature.Result
			if err := json.Unmarshal(task.Result, &res); err != nil {
				t.Fatal(err)
			}
			if res.Name != s.Name || !slices.Equal(res.CompletedPhases, allPhases) || res.Tasks != 4 ||
				!slices.Equal(res.Artifacts, []string{"spec.yaml", "research.yaml", "plan.yaml", "tasks.yaml", "feature.yaml", "implementation.md", "merge.md"}) {
				t.Errorf("result = %+v", res)
			}
		})
	}
}

func TestRejectRequirementsTwiceThenApprove(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.start(`{"gates": {}}`)

	itr1 := h.waitsAt(id, "requirements", "prd", 1)
	s := h.state(id)
	if itr1.Payload.Artifact == nil || itr1.Payload.Artifact.Name != "spec.yaml" || itr1.Payload.Artifact.Content != s.SpecYAML {
		t.Fatalf("gate artifact = %+v, want spec.yaml as in state", itr1.Payload.Artifact)
	}
	if !slices.Contains(completed(t, s), "requirements") {
		t.Errorf("completedPhases = %v, want requirements in it at the gate", completed(t, s))
	}
	if !slices.Equal(itr1.Payload.Actions, []string{"approve", "reject", "edit"}) {
		t.Errorf("actions = %v", itr1.Payload.Actions)
	}

	h.decide(id, itr1, "reject", "Add an export size limit.", "")
	itr2 := h.waitsAt(id, "requirements", "prd", 2)

	// The checkpoint of the decision (before the re-run) has the phase
	// reopened and the feedback in spec.yaml.
	var atDecision *graph.Checkpoint
	for _, cp := range h.cp.History(id) {
		if cp.NextNode == "requirements" && cp.Iterations["requirements"] == 1 && cp.PendingInterrupt == "" {
			atDecision = &cp
		}
	}
	if atDecision == nil {
		t.Fatal("no checkpoint of the rejection")
	}
	var dec feature.State
	if err := json.Unmarshal(atDecision.State, &dec); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(completed(t, dec), "requirements") {
		t.Errorf("completedPhases after reject = %v, want requirements removed", completed(t, dec))
	}
	fb, err := feature.RejectionFeedback(dec.SpecYAML)
	if err != nil || len(fb) != 1 || fb[0] != (feature.Feedback{Phase: "requirements", Iteration: 1, Feedback: "Add an export size limit."}) {
		t.Fatalf("rejectionFeedback = %+v (%v)", fb, err)
	}

	if itr2.ID == itr1.ID {
		t.Fatal("second gate reuses the first interrupt's id")
	}
	if !slices.Contains(completed(t, h.state(id)), "requirements") {
		t.Error("requirements not re-marked complete after the re-run")
	}
	h.decide(id, itr2, "reject", "Name the CSV columns.", "")
	h.waitsAt(id, "requirements", "prd", 3)

	prompts := h.stub.PromptsFor(feature.RoleRequirements)
	if len(prompts) != 3 {
		t.Fatalf("requirements prompts = %d, want 3", len(prompts))
	}
	if strings.Contains(prompts[0], "export size limit") {
		t.Error("first prompt already has feedback")
	}
	if !strings.Contains(prompts[1], "- (requirements, iteration 1) Add an export size limit.") || strings.Contains(prompts[1], "CSV columns") {
		t.Errorf("second prompt lacks the first feedback:\n%s", prompts[1])
	}
	if !strings.Contains(prompts[2], "- (requirements, iteration 1) Add an export size limit.") ||
		!strings.Contains(prompts[2], "- (requirements, iteration 2) Name the CSV columns.") {
		t.Errorf("third prompt lacks the feedback:\n%s", prompts[2])
	}
	fb, _ = feature.RejectionFeedback(h.state(id).SpecYAML)
	if len(fb) != 2 || fb[1].Iteration != 2 || fb[1].Feedback != "Name the CSV columns." {
		t.Errorf("rejectionFeedback = %+v", fb)
	}

	// A stale decision is refused and changes nothing.
	before := h.state(id)
	_, err = h.eng.Decide(context.Background(), id, graph.DecisionInput{InterruptID: itr1.ID, Action: "approve"})
	var ce *graph.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("decision on a resolved interrupt: %v, want ConflictError", err)
	}
	if after := h.state(id); after.SpecYAML != before.SpecYAML || after.FeatureYAML != before.FeatureYAML {
		t.Error("a refused decision changed the state")
	}

	snap, _ := h.cp.Load(context.Background(), id)
	h.decide(id, snap.Interrupt, "approve", "", "")
	h.waitsAt(id, "plan", "plan", 1)

	h.wantCalls(map[string]int{feature.RoleAnalyze: 1, feature.RoleRequirements: 3, feature.RoleResearch: 1, feature.RolePlan: 1})
	want := []string{"requirements", "requirements:2", "requirements:3"}
	if got := h.phasesStarted(id, "requirements"); !slices.Equal(got, want) {
		t.Errorf("node.started phases = %v, want %v", got, want)
	}
	wantTimings := []string{"analyze", "requirements", "requirements:2", "requirements:3", "research", "plan"}
	if got := timings(t, h.state(id)); !slices.Equal(got, wantTimings) {
		t.Errorf("phaseTimings = %v, want %v", got, wantTimings)
	}
	var iters []int
	for _, e := range h.events(id, graph.EventInterruptRaised) {
		iters = append(iters, e.Iteration)
	}
	if !slices.Equal(iters, []int{1, 2, 3, 1}) {
		t.Errorf("interrupt iterations = %v", iters)
	}
	// The spec.yaml of each iteration is an artifact; the last one carries the feedback.
	if got := h.lastArtifact(id, "spec.yaml").Content; !strings.Contains(got, "Name the CSV columns.") {
		t.Errorf("latest spec.yaml artifact lacks the feedback:\n%s", got)
	}

	// Walk the remaining gates to the end.
	snap, _ = h.cp.Load(context.Background(), id)
	h.decide(id, snap.Interrupt, "approve", "", "")
	itr := h.waitsAt(id, "merge", "merge", 1)
	h.decide(id, itr, "approve", "", "")
	h.succeeds(id)
	h.wantCalls(map[string]int{feature.RoleAnalyze: 1, feature.RoleRequirements: 3, feature.RoleResearch: 1,
		feature.RolePlan: 1, feature.RoleImplement: 1, feature.RoleMerge: 1})
	if got := completed(t, h.state(id)); !slices.Equal(got, allPhases) {
		t.Errorf("completedPhases = %v", got)
	}
	task, _ := h.cp.Task(id)
	var res feature.Result
	if err := json.Unmarshal(task.Result, &res); err != nil || res.Rejections != 2 {
		t.Errorf("result = %s (%v)", task.Result, err)
	}
}

// A PRD that does not parse reaches the gate as written; rejecting it
// re-runs requirements on a spec rebuilt from the state, with no feedback lost.
func TestRejectUnparsablePRD(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	broken := "requirements:\n  - id: FR-1\n    description: a: b\n"
	h.stub.SetReplies(feature.RoleRequirements, broken, feature.DefaultReply(feature.RoleRequirements, "x"))
	id := h.start(`{"gates": {"allowPlan": true, "allowMerge": true}}`)
	itr := h.waitsAt(id, "requirements", "prd", 1)
	if itr.Payload.Artifact.Content != broken {
		t.Fatalf("gate shows %q, want the reply as written", itr.Payload.Artifact.Content)
	}
	h.decide(id, itr, "reject", "That is not YAML.", "")
	itr = h.waitsAt(id, "requirements", "prd", 2)
	s := h.state(id)
	fb, err := feature.RejectionFeedback(s.SpecYAML)
	if err != nil || len(fb) != 1 || fb[0].Feedback != "That is not YAML." {
		t.Fatalf("rejectionFeedback = %+v (%v) in\n%s", fb, err, s.SpecYAML)
	}
	var spec struct {
		Name, Summary, Description string
		Requirements               []any
	}
	if err := yaml.Unmarshal([]byte(s.SpecYAML), &spec); err != nil || spec.Name != s.Name || spec.Summary == "" ||
		spec.Description != featuretest.DefaultDescription || len(spec.Requirements) != 3 {
		t.Errorf("rebuilt spec.yaml = %+v (%v)", spec, err)
	}
	if p := h.stub.PromptsFor(feature.RoleRequirements); !strings.Contains(p[1], "- (requirements, iteration 1) That is not YAML.") {
		t.Errorf("second prompt lacks the feedback:\n%s", p[1])
	}
	h.decide(id, itr, "approve", "", "")
	h.succeeds(id)
}

func TestPlanRejectThroughMergeApprove(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.start(`{"gates": {"allowPrd": true}}`)

	itr := h.waitsAt(id, "plan", "plan", 1)
	h.decide(id, itr, "reject", "Split task-3 into pages and styles.", "")
	itr = h.waitsAt(id, "plan", "plan", 2)

	prompts := h.stub.PromptsFor(feature.RolePlan)
	if len(prompts) != 2 || !strings.Contains(prompts[1], "- (plan, iteration 1) Split task-3 into pages and styles.") {
		t.Fatalf("plan prompts lack the feedback: %q", prompts)
	}
	fb, _ := feature.RejectionFeedback(h.state(id).SpecYAML)
	if len(fb) != 1 || fb[0].Phase != "plan" {
		t.Errorf("rejectionFeedback = %+v", fb)
	}
	// The spec.yaml changed by the decision is published by the next node run.
	if got := h.lastArtifact(id, "spec.yaml"); got.Node != "plan" || !strings.Contains(got.Content, "Split task-3") {
		t.Errorf("spec.yaml artifact after plan rejection = %+v", got)
	}

	h.decide(id, itr, "approve", "", "")
	itr = h.waitsAt(id, "merge", "merge", 1)
	if itr.Payload.Artifact == nil || itr.Payload.Artifact.Name != "merge.md" || itr.Payload.Artifact.ContentType != "text/markdown" {
		t.Errorf("merge gate artifact = %+v", itr.Payload.Artifact)
	}
	h.decide(id, itr, "reject", "Mention the rollback.", "")
	itr = h.waitsAt(id, "merge", "merge", 2)
	if p := h.stub.PromptsFor(feature.RoleMerge); len(p) != 2 || !strings.Contains(p[1], "- (merge, iteration 1) Mention the rollback.") ||
		strings.Contains(p[1], "- (plan, iteration 1)") {
		t.Errorf("merge prompts = %q", p)
	}
	h.decide(id, itr, "approve", "", "")
	h.succeeds(id)

	h.wantCalls(map[string]int{feature.RoleAnalyze: 1, feature.RoleRequirements: 1, feature.RoleResearch: 1,
		feature.RolePlan: 2, feature.RoleImplement: 1, feature.RoleMerge: 2})
	s := h.state(id)
	if got := completed(t, s); !slices.Equal(got, allPhases) {
		t.Errorf("completedPhases = %v", got)
	}
	want := []string{"analyze", "requirements", "research", "plan", "plan:2", "implement", "merge", "merge:2"}
	if got := timings(t, s); !slices.Equal(got, want) {
		t.Errorf("phaseTimings = %v, want %v", got, want)
	}
}

const editedSpec = `name: csv-export
summary: Users export reports as CSV.
requirements:
  - id: FR-1
    description: Export any report as CSV.
  - id: FR-9
    description: Exports work in offline mode.
rejectionFeedback: []
`

func TestEditPRD(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, content string
		wantErr       string // "" = the task succeeds
	}{
		{"valid edit", editedSpec, ""},
		{"unparsable", "name: x\nsummary: y\nrequirements: a: b\n", "edit of the PRD refused: spec.yaml does not parse: yaml: line 3: mapping values are not allowed"},
		{"no requirements", "name: x\nsummary: y\nrequirements: []\n", "edit of the PRD refused: spec.yaml is invalid: line 3: requirements must be a non-empty list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			id := h.start(`{"gates": {"allowPlan": true, "allowMerge": true}}`)
			itr := h.waitsAt(id, "requirements", "prd", 1)
			value, _ := json.Marshal(tc.content)
			_, err := h.eng.Decide(context.Background(), id, graph.DecisionInput{InterruptID: itr.ID, Action: "edit", Value: value})
			if tc.wantErr != "" {
				// Today the engine applies the edit when the task runs, and
				// the refused edit fails the task; an engine that checks edits
				// when they are decided refuses the decision instead.
				var ve *graph.ValidationError
				if errors.As(err, &ve) {
					if !strings.Contains(err.Error(), strings.TrimPrefix(tc.wantErr, "edit of the PRD refused: ")) {
						t.Fatalf("Decide = %v, want %q", err, tc.wantErr)
					}
				} else if err != nil {
					t.Fatalf("Decide: %v", err)
				} else if out := h.run(id); out.Status != graph.StatusFailed || !strings.Contains(out.Error, tc.wantErr) {
					t.Fatalf("outcome = %+v, want failure %q", out, tc.wantErr)
				}
				if h.stub.Calls(feature.RoleResearch) != 0 {
					t.Error("research ran after a refused edit")
				}
				return
			}
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			h.succeeds(id)
			s := h.state(id)
			if s.SpecYAML != editedSpec || s.Name != "csv-export" {
				t.Errorf("spec.yaml = %q, name %q; want the edited text", s.SpecYAML, s.Name)
			}
			if a := h.lastArtifact(id, "spec.yaml"); a.Content != editedSpec || a.ContentType != "application/yaml" {
				t.Errorf("spec.yaml artifact = %+v", a)
			}
			if p := h.stub.PromptsFor(feature.RoleResearch); len(p) != 1 || !strings.Contains(p[0], "Exports work in offline mode.") {
				t.Errorf("research prompt lacks the edited requirement: %q", p)
			}
			h.wantCalls(once())
		})
	}
}

func TestEditPlanRederivesTasks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.start(`{"gates": {"allowPrd": true, "allowMerge": true}}`)
	itr := h.waitsAt(id, "plan", "plan", 1)
	plan := "phases:\n  - id: p1\n    name: Only\n    tasks:\n      - Write the exporter\n      - title: Test the exporter\n"
	h.decide(id, itr, "edit", "", plan)
	h.succeeds(id)
	s := h.state(id)
	want := "tasks:\n  - id: task-1\n    phaseId: p1\n    title: Write the exporter\n    state: todo\n  - id: task-2\n    phaseId: p1\n    title: Test the exporter\n    state: todo\n"
	if s.PlanYAML != plan || s.TasksYAML != want {
		t.Errorf("plan.yaml = %q\ntasks.yaml = %q", s.PlanYAML, s.TasksYAML)
	}
	if a := h.lastArtifact(id, "tasks.yaml"); a.Content != want {
		t.Errorf("tasks.yaml artifact not republished: %+v", a)
	}
	if p := h.stub.PromptsFor(feature.RoleImplement); len(p) != 1 || !strings.Contains(p[0], "Test the exporter") {
		t.Errorf("implement prompt = %q", p)
	}
}

func TestValidatorFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, role, reply string
		node              string
		want              []string
		notCalled         string // the next producer's role, which must not run
	}{
		{"requirements unparsable", feature.RoleRequirements,
			"requirements:\n  - id: FR-1\n    description: a: b\n", "validate_spec_requirements",
			[]string{"validate_spec_requirements: spec.yaml does not parse: yaml: line 3: mapping values are not allowed"}, feature.RoleResearch},
		{"requirements fenced but unparsable", feature.RoleRequirements,
			"```yaml\nrequirements:\n  - [FR-1\nfoo: bar\n```", "validate_spec_requirements",
			[]string{"validate_spec_requirements: spec.yaml does not parse: yaml: line"}, feature.RoleResearch},
		{"requirements empty list", feature.RoleRequirements, "requirements: []\n", "validate_spec_requirements",
			[]string{"validate_spec_requirements: spec.yaml is invalid:", "requirements must be a non-empty list"}, feature.RoleResearch},
		{"requirements item without description", feature.RoleRequirements, "requirements:\n  - id: FR-1\n", "validate_spec_requirements",
			[]string{"spec.yaml is invalid:", "requirements[0] is missing required key description"}, feature.RoleResearch},
		{"analyze without summary", feature.RoleAnalyze, "name: x\n", "validate_spec_analyze",
			[]string{"validate_spec_analyze: spec.yaml is invalid: line 1: document is missing required key summary"}, feature.RoleRequirements},
		{"analyze prose", feature.RoleAnalyze, "Sure! Here is the analysis: a: b", "validate_spec_analyze",
			[]string{"validate_spec_analyze: spec.yaml does not parse: yaml: line 1:"}, feature.RoleRequirements},
		{"research unparsable", feature.RoleResearch, "decisions:\n- title: x\n  chosen: [y\n", "validate_research",
			[]string{"validate_research: research.yaml does not parse: yaml: line"}, feature.RolePlan},
		{"research decisions not a list", feature.RoleResearch, "decisions: postgres\n", "validate_research",
			[]string{"validate_research: research.yaml is invalid: line 1: decisions must be a non-empty list, got text \"postgres\""}, feature.RolePlan},
		{"plan phase without tasks", feature.RolePlan, "phases:\n  - id: p1\n    name: One\n    tasks: []\n", "validate_plan_tasks",
			[]string{"validate_plan_tasks: plan.yaml is invalid: line 4: phases[0].tasks must be a non-empty list"}, feature.RoleImplement},
		{"plan unknown dependency", feature.RolePlan,
			"phases:\n  - id: p1\n    name: One\n    tasks:\n      - id: t1\n        title: A\n        dependsOn: [t9]\n", "validate_plan_tasks",
			[]string{"validate_plan_tasks: tasks.yaml is invalid: tasks[0]: dependsOn \"t9\" is not a task id"}, feature.RoleImplement},
		{"plan duplicate task ids", feature.RolePlan,
			"phases:\n  - id: p1\n    name: One\n    tasks: [{id: t1, title: A}]\n  - id: p2\n    name: Two\n    tasks: [{id: t1, title: B}]\n", "validate_plan_tasks",
			[]string{`tasks.yaml is invalid: tasks[1]: task id "t1" is used twice`}, feature.RoleImplement},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.stub.SetReplies(tc.role, tc.reply)
			id := h.start("")
			out := h.run(id)
			if out.Status != graph.StatusFailed {
				t.Fatalf("outcome = %+v, want failed", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.Error, w) {
					t.Errorf("error %q lacks %q", out.Error, w)
				}
			}
			task, _ := h.cp.Task(id)
			if task.Status != graph.StatusFailed || task.Error != out.Error || task.CurrentNode != tc.node {
				t.Errorf("task = %s at %s: %q", task.Status, task.CurrentNode, task.Error)
			}
			failed := h.events(id, graph.EventNodeFailed)
			if len(failed) != 1 || failed[0].Node != tc.node {
				t.Errorf("node.failed events = %+v, want one of %s", failed, tc.node)
			}
			if n := len(h.events(id, graph.EventNodeRetrying)); n != 0 {
				t.Errorf("validation failure retried %d times", n)
			}
			if n := h.stub.Calls(tc.role); n != 1 {
				t.Errorf("%s called %d times, want 1", tc.role, n)
			}
			if n := h.stub.Calls(tc.notCalled); n != 0 {
				t.Errorf("%s ran after the failed validation", tc.notCalled)
			}
		})
	}
}

func TestInputValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, tc := range []struct {
		name, input, options, field string
	}{
		{"empty object", `{}`, "", "input.description"},
		{"empty description", `{"description": ""}`, "", "input.description"},
		{"blank description", `{"description": " \n\t "}`, "", "input.description"},
		{"null description", `{"description": null}`, "", "input.description"},
		{"description not a string", `{"description": 5}`, "", "input.description"},
		{"unknown field", `{"description": "x", "priority": 1}`, "", "input.priority"},
		{"not an object", `["x"]`, "", "input"},
		{"name not a string", `{"description": "x", "name": {}}`, "", "input.name"},
		{"name too long", `{"description": "x", "name": "` + strings.Repeat("n", 101) + `"}`, "", "input.name"},
		{"unknown gate", `{"description": "x"}`, `{"gates": {"allowPRD": true}}`, "options.gates.allowPRD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			nt := graph.NewTask{ID: graph.NewID(), Workflow: feature.Name, Input: json.RawMessage(tc.input)}
			if tc.options != "" {
				nt.Options = json.RawMessage(tc.options)
			}
			_, err := h.eng.Create(context.Background(), nt)
			var ve *graph.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("Create: %v, want ValidationError on %s", err, tc.field)
			}
			if !errors.Is(err, graph.ErrInvalid) || ve.Message == "" {
				t.Errorf("error %v is not ErrInvalid with a message", err)
			}
			if _, ok := h.cp.Task(nt.ID); ok {
				t.Error("a task was stored for bad input")
			}
		})
	}
	t.Run("name kept", func(t *testing.T) {
		t.Parallel()
		in, err := feature.ParseInput(json.RawMessage(`{"description": "  Add CSV export. ", "name": "csv-export"}`))
		if err != nil || in.Description != "Add CSV export." || in.Name != "csv-export" {
			t.Fatalf("ParseInput = %+v, %v", in, err)
		}
	})
}

func TestInputNameWins(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	task, err := h.eng.Create(context.Background(), graph.NewTask{Workflow: feature.Name,
		Input: json.RawMessage(`{"description": "Add CSV export.", "name": "csv-export"}`)})
	if err != nil {
		t.Fatal(err)
	}
	h.succeeds(task.ID)
	s := h.state(task.ID)
	var spec struct{ Name string }
	_ = yaml.Unmarshal([]byte(s.SpecYAML), &spec)
	if s.Name != "csv-export" || spec.Name != "csv-export" {
		t.Errorf("name = %q, spec.yaml name = %q, want the input's", s.Name, spec.Name)
	}
	if p := h.stub.PromptsFor(feature.RoleAnalyze); len(p) != 1 || !strings.Contains(p[0], `"csv-export"`) {
		t.Errorf("analyze prompt = %q", p)
	}
}

func TestExecutorRetries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		err        error
		times      int
		wantStatus graph.TaskStatus
		wantCalls  int
		retrying   int
	}{
		{"two transient failures", errors.New("connection reset"), 2, graph.StatusSucceeded, 3, 2},
		{"always failing", errors.New("connection reset"), 0, graph.StatusFailed, 3, 2},
		{"permanent failure", graph.Permanent(errors.New("model not found")), 0, graph.StatusFailed, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.stub.Fail(feature.RoleResearch, tc.err, tc.times)
			id := h.start("")
			out := h.run(id)
			if out.Status != tc.wantStatus {
				t.Fatalf("outcome = %+v, want %s", out, tc.wantStatus)
			}
			if n := h.stub.Calls(feature.RoleResearch); n != tc.wantCalls {
				t.Errorf("research calls = %d, want %d", n, tc.wantCalls)
			}
			if n := len(h.events(id, graph.EventNodeRetrying)); n != tc.retrying {
				t.Errorf("node.retrying events = %d, want %d", n, tc.retrying)
			}
			var llm int
			for _, e := range h.events(id, graph.EventLLMCall) {
				if e.Node == "research" {
					llm++
				}
			}
			if llm != tc.wantCalls {
				t.Errorf("research llm.call events = %d, want one per call (%d)", llm, tc.wantCalls)
			}
			if tc.wantStatus == graph.StatusFailed && !strings.Contains(out.Error, "research: feature.research call failed: "+tc.err.Error()) {
				t.Errorf("error = %q", out.Error)
			}
			if tc.wantStatus == graph.StatusSucceeded {
				if got := timings(t, h.state(id)); !slices.Equal(got, allPhases) {
					t.Errorf("phaseTimings = %v: a failed try left a trace", got)
				}
			}
		})
	}
}

func TestProducerTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, feature.WithTimeout(30*time.Millisecond), feature.WithRetry(graph.RetryPolicy{Attempts: 1}))
	h.stub.Block(feature.RoleImplement)
	id := h.start("")
	out := h.run(id)
	if out.Status != graph.StatusFailed || !strings.Contains(out.Error, "implement timed out after 30ms") {
		t.Fatalf("outcome = %+v, want a timeout failure", out)
	}
	select {
	case req := <-h.stub.Entered():
		if req.Role != feature.RoleImplement || req.TaskID != id || req.Iteration != 1 {
			t.Errorf("blocked request = %+v", req)
		}
	default:
		t.Error("the blocked call was not announced")
	}
}

func TestLLMCallEventIsCut(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	long := "# Implementation\n" + strings.Repeat("é", 40<<10) // 80 KiB of two-byte runes
	h.stub.SetReplies(feature.RoleImplement, long)
	id := h.start("")
	h.succeeds(id)
	if h.state(id).Implementation != long {
		t.Error("the state does not keep the whole reply")
	}
	for _, e := range h.events(id, graph.EventLLMCall) {
		if e.Node != "implement" {
			continue
		}
		var d struct {
			Reply          string `json:"reply"`
			ReplyTruncated bool   `json:"reply_truncated"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if len(d.Reply) > feature.MaxEventText || len(d.Reply) < feature.MaxEventText-1 || !d.ReplyTruncated ||
			strings.ContainsRune(d.Reply, '\uFFFD') {
			t.Errorf("reply in event: %d bytes, truncated=%v", len(d.Reply), d.ReplyTruncated)
		}
		return
	}
	t.Fatal("no llm.call event for implement")
}

func TestFencedRepliesAccepted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.stub.SetReplies(feature.RoleAnalyze, "```yaml\n"+feature.DefaultReply(feature.RoleAnalyze, "Add CSV export.")+"```\n")
	id := h.start("")
	h.succeeds(id)
	if s := h.state(id); s.Name != "add-csv-export" {
		t.Errorf("name = %q", s.Name)
	}
}

func TestGraphShape(t *testing.T) {
	t.Parallel()
	if _, err := feature.New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	g, err := feature.New(featuretest.NewStub(""))
	if err != nil {
		t.Fatal(err)
	}
	d := g.Describe()
	var nodes []string
	for _, n := range d.Nodes {
		nodes = append(nodes, n.Name)
	}
	if !slices.Equal(nodes, feature.Nodes()) {
		t.Errorf("nodes = %v", nodes)
	}
	for i, n := range feature.Nodes() {
		to := graph.END
		if i+1 < len(feature.Nodes()) {
			to = feature.Nodes()[i+1]
		}
		if !slices.Contains(d.Edges, graph.EdgeInfo{From: n, To: to}) {
			t.Errorf("missing edge %s → %s", n, to)
		}
	}
	wantGates := []graph.GateInfo{{Node: "requirements", Kind: "prd", Option: "allowPrd"},
		{Node: "plan", Kind: "plan", Option: "allowPlan"}, {Node: "merge", Kind: "merge", Option: "allowMerge"}}
	if !slices.Equal(d.Gates, wantGates) {
		t.Errorf("gates = %+v", d.Gates)
	}
	var schema map[string]any
	if err := json.Unmarshal(d.InputSchema, &schema); err != nil || fmt.Sprint(schema["required"]) != "[description]" {
		t.Errorf("input schema = %s (%v)", d.InputSchema, err)
	}
}

func TestDefaultRepliesPassValidators(t *testing.T) {
	t.Parallel()
	for _, desc := range []string{"", "Add: CSV export!\n\"quoted\" and # hash", strings.Repeat("long ", 500)} {
		r := feature.DefaultReplies(desc)
		if len(r) != 6 {
			t.Fatalf("DefaultReplies has %d roles", len(r))
		}
		for role, text := range r {
			if strings.TrimSpace(text) == "" {
				t.Errorf("%s: empty default", role)
			}
			if strings.HasSuffix(role, "implement") || strings.HasSuffix(role, "merge") {
				continue
			}
			var v map[string]any
			if err := yaml.Unmarshal([]byte(text), &v); err != nil {
				t.Errorf("%s default for %q does not parse: %v", role, desc, err)
			}
		}
	}
	// The whole workflow on the defaults of an awkward description.
	h := newHarness(t)
	desc := "Add: CSV export!\n\"quoted\" and # hash"
	for role, text := range feature.DefaultReplies(desc) {
		h.stub.SetReplies(role, text)
	}
	id := h.start("")
	h.succeeds(id)
}

func TestPhaseTimingsUseTheClock(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(1500 * time.Millisecond)
		return now
	}
	h := newHarness(t, feature.WithClock(clock))
	id := h.start("")
	h.succeeds(id)
	ts, err := feature.PhaseTimings(h.state(id).FeatureYAML)
	if err != nil || len(ts) != 6 {
		t.Fatalf("timings = %+v (%v)", ts, err)
	}
	want := feature.PhaseTiming{Phase: "analyze", StartedAt: "2026-01-02T03:04:06.5Z", CompletedAt: "2026-01-02T03:04:08Z", DurationMS: 1500}
	if ts[0] != want {
		t.Errorf("first timing = %+v, want %+v", ts[0], want)
	}
	for _, pt := range ts {
		if pt.DurationMS != 1500 {
			t.Errorf("timing %+v", pt)
		}
	}
}

func TestEditMerge(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.start(`{"gates": {"allowPrd": true, "allowPlan": true}}`)
	itr := h.waitsAt(id, "merge", "merge", 1)
	const edited = "# Merge\n\nShorter, by hand.\n"
	h.decide(id, itr, "edit", "", edited)
	h.succeeds(id)
	if s := h.state(id); s.MergeSummary != edited {
		t.Errorf("merge.md = %q", s.MergeSummary)
	}
	if a := h.lastArtifact(id, "merge.md"); a.Content != edited || a.ContentType != "text/markdown" || a.Version != 2 {
		t.Errorf("merge.md artifact = %+v", a)
	}
	h.wantCalls(once())
}
