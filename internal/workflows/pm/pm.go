// Package pm is the `pm` workflow of seed 001 and SPEC §9: the Project
// Manager Agent drives one task to completion through a plan of steps,
// executed by workers and verified against the acceptance criteria, with
// bounded retries.
//
//	load_task_context → plan_steps (optional gate plan, option allowPlan) → has_next_step
//	has_next_step → dispatch_step (a step is left) | finalize_summary (none left) → END
//	dispatch_step → collect_result → verify_step_result
//	verify_step_result → has_next_step (pass) | dispatch_step (fail, attempts left: with remediation)
//	                   | mark_failed (fail, no attempts left)
//
// The state carries seed 001's fields (task_id, acceptance_criteria,
// preferences_effective, plan {steps, assumptions}, current_step_index,
// attempts_by_step, last_result, verification {status, findings,
// recommended_actions}) plus every attempt's record (history).
//
// Steps run on a Worker (dispatch, then collect, each checkpointed); the
// built-in LLMWorker asks the pm.worker role. A step is tried at most
// max_attempts times (task option, default 3); each re-dispatch carries
// the failed verification's findings and recommended actions as the job's
// remediation. mark_failed fails the task with the step and the final
// findings in its error (seed 001: "write failure status with the final
// verification findings"); the findings also stay in the state's
// verification and history. A retry of such a task fails the same way: the
// step's attempts are spent. An empty plan goes straight to
// finalize_summary.
//
// It imports graph, llm and agent only: no storage, no HTTP.
package pm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
)

// Name is the workflow's name.
const Name = "pm"

// StateVersion is the version of State's shape, part of the workflow's
// definition version: bump it when a change of State would make a stored
// checkpoint mean something else.
const StateVersion = 1

// Node names, in graph order.
const (
	NodeLoadTaskContext  = "load_task_context"
	NodePlanSteps        = "plan_steps"
	NodeHasNextStep      = "has_next_step"
	NodeDispatchStep     = "dispatch_step"
	NodeCollectResult    = "collect_result"
	NodeVerifyStepResult = "verify_step_result"
	NodeMarkFailed       = "mark_failed"
	NodeFinalizeSummary  = "finalize_summary"
)

// Nodes lists the node names in graph order.
func Nodes() []string {
	return []string{NodeLoadTaskContext, NodePlanSteps, NodeHasNextStep, NodeDispatchStep, NodeCollectResult,
		NodeVerifyStepResult, NodeMarkFailed, NodeFinalizeSummary}
}

// The agent roles (SPEC §9).
const (
	RolePlanner    = "pm.planner"
	RoleWorker     = "pm.worker"
	RoleVerifier   = "pm.verifier"
	RoleSummarizer = "pm.summarizer"
)

// Roles lists the agent roles in graph order.
func Roles() []string { return []string{RolePlanner, RoleWorker, RoleVerifier, RoleSummarizer} }

// The optional gate at plan_steps and the option that auto-approves it.
const (
	GatePlan        = "plan"
	OptionAllowPlan = "allowPlan"
)

// Artifacts. Each step's result is "<step id>.md" and its verification
// "<step id>.verification.json", one version per attempt.
const (
	ArtifactPlan    = "plan.yaml"
	ArtifactSummary = "summary.md"
)

// Task outcomes in the state.
const (
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// Limits and defaults.
const (
	MaxDescription     = 64 << 10
	MaxCriteria        = 50
	MaxCriterion       = 2 << 10
	DefaultMaxAttempts = 3
	MaxMaxAttempts     = 10
	DefaultStepTimeout = 10 * time.Minute
)

// DefaultRetry is the retry policy of the nodes that call the LLM or the
// worker: a failure is tried again twice, after 200ms then 400ms (±20%).
var DefaultRetry = graph.RetryPolicy{Attempts: 3, Backoff: 200 * time.Millisecond, MaxBackoff: 2 * time.Second, Jitter: 0.2}

// DefaultTimeout bounds each try of an LLM node.
const DefaultTimeout = 5 * time.Minute

// State is the pm workflow's state (seed 001's state model). Plain JSON.
type State struct {
	TaskID             string   `json:"task_id"`
	Description        string   `json:"description"`
	AcceptanceCriteria []string `json:"acceptance_criteria"`
	// Preferences are the input's; PreferencesEffective the defaults with
	// them applied (computed by load_task_context).
	Preferences          map[string]any `json:"preferences,omitempty"`
	PreferencesEffective map[string]any `json:"preferences_effective"`
	Plan                 Plan           `json:"plan"`
	CurrentStepIndex     int            `json:"current_step_index"`
	AttemptsByStep       map[string]int `json:"attempts_by_step"`
	MaxAttempts          int            `json:"max_attempts"`
	// CurrentJob and Ticket are the step attempt in flight.
	CurrentJob   *Job          `json:"current_job,omitempty"`
	Ticket       *Ticket       `json:"ticket,omitempty"`
	LastResult   *StepResult   `json:"last_result"`
	Verification *Verification `json:"verification"`
	// History records every attempt: its result and its verification.
	History []Attempt `json:"history"`
	// PlanFeedback is every rejection of the plan at the gate.
	PlanFeedback []PlanFeedback `json:"plan_feedback,omitempty"`
	Summary      string         `json:"summary,omitempty"`
	// Status is running, succeeded or failed; FailedStep names the step
	// that used up its attempts.
	Status     string `json:"status"`
	FailedStep string `json:"failed_step,omitempty"`
}

// Attempt is one step attempt on record.
type Attempt struct {
	StepID       string       `json:"step_id"`
	Attempt      int          `json:"attempt"`
	JobID        string       `json:"job_id"`
	Target       string       `json:"target"`
	ResultStatus string       `json:"result_status"`
	Verification Verification `json:"verification"`
}

// PlanFeedback is one rejection of the plan.
type PlanFeedback struct {
	Iteration int    `json:"iteration"`
	Feedback  string `json:"feedback"`
}

// Input is the workflow's input: the task and its acceptance criteria.
type Input struct {
	Description        string         `json:"description"`
	AcceptanceCriteria []string       `json:"acceptance_criteria"`
	Preferences        map[string]any `json:"preferences,omitempty"`
}

// InputSchema is the JSON Schema of Input.
var InputSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "title": "Project task",
  "additionalProperties": false,
  "required": ["description", "acceptance_criteria"],
  "properties": {
    "description": {"type": "string", "minLength": 1, "maxLength": 65536, "title": "Task",
      "description": "What must be done.", "format": "textarea"},
    "acceptance_criteria": {"type": "array", "minItems": 1, "maxItems": 50, "title": "Acceptance criteria",
      "description": "Statements the result is verified against, one per item.",
      "items": {"type": "string", "minLength": 1, "maxLength": 2048}},
    "preferences": {"type": "object", "title": "Preferences",
      "description": "Overrides of the default preferences; the API also takes other keys (e.g. {\"language\": \"Go\"}).",
      "properties": {
        "language": {"type": "string", "maxLength": 100, "title": "Language", "description": "The programming language, e.g. Go."},
        "summary_style": {"enum": ["concise", "detailed"], "title": "Summary style"},
        "require_evidence": {"type": "boolean", "default": true, "title": "Each step must show evidence"}
      }}
  }
}`)

// OptionsSchema is the JSON Schema of the task options the workflow reads.
var OptionsSchema = json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "gates": {"type": "object", "additionalProperties": false,
      "properties": {"allowPlan": {"type": "boolean", "title": "Approve the plan without a human"}}},
    "max_attempts": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3, "title": "Attempts per step at most"}
  }
}`)

// ParseInput decodes and checks a task's input. Errors:
// *graph.ValidationError naming the field (input.description,
// input.acceptance_criteria[2], …).
func ParseInput(raw json.RawMessage) (Input, error) {
	var in Input
	if err := agent.Decode(raw, &in, "input", "the pm input", "description", "acceptance_criteria", "preferences"); err != nil {
		return in, err
	}
	var err error
	if in.Description, err = agent.Text("input.description", in.Description, true, MaxDescription); err != nil {
		return in, err
	}
	switch {
	case len(in.AcceptanceCriteria) == 0:
		return in, &graph.ValidationError{Field: "input.acceptance_criteria", Message: "is required: give at least one criterion"}
	case len(in.AcceptanceCriteria) > MaxCriteria:
		return in, &graph.ValidationError{Field: "input.acceptance_criteria", Message: fmt.Sprintf("has more than %d criteria", MaxCriteria)}
	}
	for i, c := range in.AcceptanceCriteria {
		if in.AcceptanceCriteria[i], err = agent.Text(fmt.Sprintf("input.acceptance_criteria[%d]", i), c, true, MaxCriterion); err != nil {
			return in, err
		}
	}
	return in, parsePreferences(in.Preferences)
}

// MaxLanguage is the most characters preferences.language may have.
const MaxLanguage = 100

// parsePreferences checks the preferences InputSchema names (other keys
// pass through to the prompts as given); an empty language is dropped.
func parsePreferences(p map[string]any) error {
	if v, ok := p["language"]; ok {
		raw, isString := v.(string)
		lang := strings.TrimSpace(raw)
		switch {
		case !isString:
			return &graph.ValidationError{Field: "input.preferences.language", Message: "must be a string, e.g. \"Go\""}
		case utf8.RuneCountInString(raw) > MaxLanguage:
			return &graph.ValidationError{Field: "input.preferences.language", Message: fmt.Sprintf("is longer than %d characters", MaxLanguage)}
		case lang == "":
			delete(p, "language")
		default:
			p["language"] = lang
		}
	}
	if v, ok := p["summary_style"]; ok && v != "concise" && v != "detailed" {
		return &graph.ValidationError{Field: "input.preferences.summary_style", Message: `must be "concise" or "detailed"`}
	}
	if v, ok := p["require_evidence"]; ok {
		if _, isBool := v.(bool); !isBool {
			return &graph.ValidationError{Field: "input.preferences.require_evidence", Message: "must be true or false"}
		}
	}
	return nil
}

// Options are the task options the workflow reads.
type Options struct {
	Gates       json.RawMessage `json:"gates,omitempty"`
	MaxAttempts *int            `json:"max_attempts,omitempty"`
}

// Option configures the workflow.
type Option func(*config)

type config struct {
	retry       graph.RetryPolicy
	timeout     time.Duration
	stepTimeout time.Duration
	worker      Worker
	now         func() time.Time
}

// WithRetry sets the retry policy of the nodes that call the LLM or the
// worker (default DefaultRetry).
func WithRetry(p graph.RetryPolicy) Option { return func(c *config) { c.retry = p } }

// WithTimeout bounds each try of an LLM node (default DefaultTimeout; 0
// or less: none).
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithStepTimeout bounds each try of collect_result, i.e. how long a job
// may take (default DefaultStepTimeout).
func WithStepTimeout(d time.Duration) Option { return func(c *config) { c.stepTimeout = d } }

// WithWorker sets the Worker that executes steps (default LLMWorker of
// the workflow's provider).
func WithWorker(w Worker) Option { return func(c *config) { c.worker = w } }

// WithClock sets the clock of dispatch and collection times (tests).
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

type workflow struct {
	p   llm.Provider
	cfg config
}

// New compiles the pm workflow; its planner, verifier and summarizer ask
// p, and so does the default worker.
func New(p llm.Provider, opts ...Option) (*graph.Graph[State], error) {
	if p == nil {
		return nil, errors.New("pm: nil llm.Provider")
	}
	w := &workflow{p: p, cfg: config{retry: DefaultRetry, timeout: DefaultTimeout, stepTimeout: DefaultStepTimeout, now: time.Now}}
	for _, o := range opts {
		o(&w.cfg)
	}
	if w.cfg.worker == nil {
		w.cfg.worker = LLMWorker(p)
	}
	with := func(timeout time.Duration, desc string) []graph.NodeOption {
		o := []graph.NodeOption{graph.WithRetry(w.cfg.retry), graph.WithDescription(desc)}
		if timeout > 0 {
			o = append(o, graph.WithTimeout(timeout))
		}
		return o
	}
	return graph.New[State](Name).
		StateVersion(StateVersion).
		Describe("Project task", "A project manager plans a task in steps, dispatches them to workers, verifies each result against the acceptance criteria with bounded retries, and summarises.").
		Deliverable(ArtifactSummary).
		Node(NodeLoadTaskContext, w.loadTaskContext, graph.WithDescription("Reads the task and its acceptance criteria; computes the effective preferences.")).
		Node(NodePlanSteps, w.planSteps, with(w.cfg.timeout, "The planner splits the task into steps with expected outputs and evidence (plan.yaml).")...).
		Node(NodeHasNextStep, hasNextStep, graph.WithDescription("Is a step left?")).
		Node(NodeDispatchStep, w.dispatchStep, with(w.cfg.timeout, "Dispatches the step to a worker, with remediation on a retry.")...).
		Node(NodeCollectResult, w.collectResult, with(w.cfg.stepTimeout, "Waits for the worker's result.")...).
		Node(NodeVerifyStepResult, w.verifyStepResult, with(w.cfg.timeout, "The verifier checks the result against the acceptance criteria.")...).
		Node(NodeMarkFailed, markFailed, graph.WithDescription("Fails the task with the step's final verification findings.")).
		Node(NodeFinalizeSummary, w.finalizeSummary, with(w.cfg.timeout, "The summarizer writes the final summary (summary.md).")...).
		Gate(NodePlanSteps, graph.Gate[State]{Kind: GatePlan, Option: OptionAllowPlan, Title: "Approve the step plan (plan.yaml)",
			Artifact: ArtifactPlan, OnReject: rejectPlan, OnEdit: editPlan}).
		Edge(NodeLoadTaskContext, NodePlanSteps).
		Edge(NodePlanSteps, NodeHasNextStep).
		Route(NodeHasNextStep, nextStep, NodeDispatchStep+"=yes", NodeFinalizeSummary+"=no").
		Edge(NodeDispatchStep, NodeCollectResult).
		Edge(NodeCollectResult, NodeVerifyStepResult).
		Route(NodeVerifyStepResult, afterVerify, NodeHasNextStep+"=pass", NodeDispatchStep+"=fail, retries left", NodeMarkFailed+"=fail, no retries left").
		Edge(NodeMarkFailed, graph.END).
		Edge(NodeFinalizeSummary, graph.END).
		Init(initState).
		Result(result).
		InputSchema(InputSchema).OptionsSchema(OptionsSchema).
		Compile()
}

func initState(raw json.RawMessage, opts graph.Options) (State, error) {
	in, err := ParseInput(raw)
	if err != nil {
		return State{}, err
	}
	if err := agent.Gates(Name, opts, OptionAllowPlan); err != nil {
		return State{}, err
	}
	var o Options
	if err := agent.Decode(opts.Raw, &o, "options", "the pm options", "gates", "max_attempts"); err != nil {
		return State{}, err
	}
	maxAttempts, err := agent.IntOption("options.max_attempts", o.MaxAttempts, DefaultMaxAttempts, 1, MaxMaxAttempts)
	if err != nil {
		return State{}, err
	}
	return State{Description: in.Description, AcceptanceCriteria: in.AcceptanceCriteria, Preferences: in.Preferences,
		PreferencesEffective: map[string]any{}, Plan: Plan{Steps: []Step{}, Assumptions: []string{}},
		AttemptsByStep: map[string]int{}, MaxAttempts: maxAttempts, History: []Attempt{}, Status: StatusRunning}, nil
}

// Result is what a succeeded pm task reports.
type Result struct {
	Status  string       `json:"status"`
	Summary string       `json:"summary"`
	Steps   []StepReport `json:"steps"`
}

// StepReport is one step in the result.
type StepReport struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Attempts int    `json:"attempts"`
	Status   string `json:"status"`
}

func result(s State) any {
	r := Result{Status: s.Status, Summary: s.Summary, Steps: []StepReport{}}
	for i, st := range s.Plan.Steps {
		rep := StepReport{ID: st.ID, Title: st.Title, Attempts: s.AttemptsByStep[st.ID], Status: "pending"}
		if i < s.CurrentStepIndex {
			rep.Status = VerifyPass
		}
		r.Steps = append(r.Steps, rep)
	}
	return r
}

// currentStep is the step at current_step_index.
func (s State) currentStep() (Step, bool) {
	if s.CurrentStepIndex < 0 || s.CurrentStepIndex >= len(s.Plan.Steps) {
		return Step{}, false
	}
	return s.Plan.Steps[s.CurrentStepIndex], true
}

// --- routers ---

func nextStep(s State) string {
	if _, ok := s.currentStep(); ok {
		return NodeDispatchStep
	}
	return NodeFinalizeSummary
}

func afterVerify(s State) string {
	switch {
	case s.Verification != nil && s.Verification.Status == VerifyPass:
		return NodeHasNextStep
	case s.Status == StatusFailed:
		return NodeMarkFailed
	default:
		return NodeDispatchStep
	}
}

// --- nodes ---

// defaultPreferences are the preferences a task starts from.
func defaultPreferences(maxAttempts int) map[string]any {
	return map[string]any{
		"max_attempts_per_step": maxAttempts,
		"require_evidence":      true,
		"step_timeout":          DefaultStepTimeout.String(),
		"summary_style":         "concise",
	}
}

func (w *workflow) loadTaskContext(_ context.Context, run *graph.NodeRun, s State) (State, error) {
	s.TaskID = run.TaskID
	eff := defaultPreferences(s.MaxAttempts)
	maps.Copy(eff, s.Preferences)
	s.PreferencesEffective = eff
	s.Status = StatusRunning
	return s, nil
}

func (w *workflow) planSteps(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	resp, err := agent.AskAnswering(ctx, w.p, run, RolePlanner, plannerPrompt(s, run.Iteration), s.Description, s.planFeedback())
	if err != nil {
		return s, err
	}
	plan, err := ParsePlan(resp.Text)
	if err != nil {
		// Worth another try: a model may well answer in the asked form next time.
		return s, fmt.Errorf("%s: %w", run.Node, err)
	}
	s.Plan = plan
	s = resetProgress(s)
	run.Artifact(ArtifactPlan, "application/yaml", plan.YAML())
	return s, nil
}

// resetProgress starts the plan from its first step.
func resetProgress(s State) State {
	s.CurrentStepIndex = 0
	s.AttemptsByStep = map[string]int{}
	s.CurrentJob, s.Ticket, s.LastResult, s.Verification = nil, nil, nil, nil
	s.History = []Attempt{}
	s.Status, s.FailedStep = StatusRunning, ""
	return s
}

func hasNextStep(_ context.Context, _ *graph.NodeRun, s State) (State, error) { return s, nil }

func (w *workflow) dispatchStep(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	step, ok := s.currentStep()
	if !ok {
		return s, graph.Permanent(fmt.Errorf("%s: no step at index %d", run.Node, s.CurrentStepIndex))
	}
	attempt := s.AttemptsByStep[step.ID] + 1
	job := Job{ID: fmt.Sprintf("%s/%s/%d", s.TaskID, step.ID, attempt), StepID: step.ID, Attempt: attempt,
		Title: step.Title, Description: step.Description, ExpectedOutputs: step.ExpectedOutputs, Evidence: step.Evidence,
		Capabilities: step.Capabilities, Task: s.Description, AcceptanceCriteria: s.AcceptanceCriteria,
		Preferences: s.PreferencesEffective, Timeout: DefaultStepTimeout.String()}
	if v := s.Verification; attempt > 1 && v != nil && v.StepID == step.ID && v.Status == VerifyFail {
		job.Remediation = v.Remediation()
	}
	t, err := w.cfg.worker.Dispatch(ctx, run, job)
	if err != nil {
		return s, fmt.Errorf("%s: dispatch of %s: %w", run.Node, job.ID, err)
	}
	if t.JobID == "" {
		t.JobID = job.ID
	}
	if t.DispatchedAt.IsZero() {
		t.DispatchedAt = w.cfg.now().UTC()
	}
	s.AttemptsByStep = maps.Clone(s.AttemptsByStep)
	s.AttemptsByStep[step.ID] = attempt
	s.CurrentJob, s.Ticket, s.LastResult = &job, &t, nil
	return s, nil
}

func (w *workflow) collectResult(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	if s.CurrentJob == nil || s.Ticket == nil {
		return s, graph.Permanent(fmt.Errorf("%s: no job was dispatched", run.Node))
	}
	job := *s.CurrentJob
	res, err := w.cfg.worker.Collect(ctx, run, job, *s.Ticket)
	if err != nil {
		return s, fmt.Errorf("%s: result of %s: %w", run.Node, job.ID, err)
	}
	// Normalise the result's metadata (seed 001's Collect Result).
	res.JobID, res.StepID, res.Attempt = job.ID, job.StepID, job.Attempt
	if res.Target == "" {
		res.Target = s.Ticket.Target
	}
	if res.Status != ResultError {
		res.Status = ResultCompleted
	}
	if res.Artifacts == nil {
		res.Artifacts = []string{}
	}
	if res.CollectedAt.IsZero() {
		res.CollectedAt = w.cfg.now().UTC()
	}
	s.LastResult = &res
	run.Artifact(job.StepID+".md", "text/markdown", res.Output)
	return s, nil
}

func (w *workflow) verifyStepResult(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	step, ok := s.currentStep()
	if !ok || s.LastResult == nil || s.CurrentJob == nil {
		return s, graph.Permanent(fmt.Errorf("%s: no result to verify", run.Node))
	}
	resp, err := agent.AskAnswering(ctx, w.p, run, RoleVerifier, verifierPrompt(s, step), step.Title, remediation(s.CurrentJob.Remediation))
	if err != nil {
		return s, err
	}
	v, err := ParseVerification(resp.Text)
	if err != nil {
		return s, fmt.Errorf("%s: %w", run.Node, err)
	}
	v.StepID, v.Attempt = step.ID, s.CurrentJob.Attempt
	b, _ := json.MarshalIndent(v, "", "  ")
	run.Artifact(step.ID+".verification.json", "application/json", string(b)+"\n")
	s.Verification = &v
	s.History = append(slices.Clone(s.History), Attempt{StepID: step.ID, Attempt: v.Attempt, JobID: s.CurrentJob.ID,
		Target: s.LastResult.Target, ResultStatus: s.LastResult.Status, Verification: v})
	switch {
	case v.Status == VerifyPass:
		s.CurrentStepIndex++
		s.CurrentJob, s.Ticket = nil, nil
	case s.AttemptsByStep[step.ID] >= s.MaxAttempts:
		s.Status, s.FailedStep = StatusFailed, step.ID
	}
	return s, nil
}

// markFailed fails the task with the final verification findings (seed
// 001's Mark Failed). They are in the state already, put there by
// verify_step_result.
func markFailed(_ context.Context, _ *graph.NodeRun, s State) (State, error) {
	msg := fmt.Sprintf("step %s failed verification after %d attempts", s.FailedStep, s.AttemptsByStep[s.FailedStep])
	for _, st := range s.Plan.Steps {
		if st.ID == s.FailedStep {
			msg = fmt.Sprintf("step %s (%s) failed verification after %d attempts", st.ID, st.Title, s.AttemptsByStep[st.ID])
		}
	}
	if v := s.Verification; v != nil {
		if len(v.Findings) > 0 {
			msg += "; findings: " + strings.Join(v.Findings, "; ")
		}
		if len(v.RecommendedActions) > 0 {
			msg += "; recommended actions: " + strings.Join(v.RecommendedActions, "; ")
		}
	}
	return s, graph.Permanent(errors.New(msg))
}

func (w *workflow) finalizeSummary(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	resp, err := agent.AskAnswering(ctx, w.p, run, RoleSummarizer, summarizerPrompt(s), s.Description, s.planFeedback())
	if err != nil {
		return s, err
	}
	s.Summary = strings.TrimSpace(agent.StripFences(resp.Text)) + "\n"
	s.Status = StatusSucceeded
	s.CurrentJob, s.Ticket = nil, nil
	run.Artifact(ArtifactSummary, "text/markdown", s.Summary)
	return s, nil
}

// --- the plan gate ---

func rejectPlan(s State, feedback string, iteration int) (State, error) {
	s.PlanFeedback = append(slices.Clone(s.PlanFeedback), PlanFeedback{Iteration: iteration, Feedback: feedback})
	return s, nil
}

func editPlan(s State, content string) (State, error) {
	plan, err := ParsePlan(content)
	if err != nil {
		return s, graph.Permanent(fmt.Errorf("edit of the plan refused: %w", err))
	}
	s.Plan = plan
	return resetProgress(s), nil
}

// --- prompts ---

func prefsText(p map[string]any) string {
	keys := slices.Collect(maps.Keys(p))
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, p[k]))
	}
	return strings.Join(parts, ", ")
}

func taskSection(s State) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "The task:\n---\n%s\n---\n\n", s.Description)
	sb.WriteString(list("Acceptance criteria", s.AcceptanceCriteria))
	if len(s.PreferencesEffective) > 0 {
		sb.WriteString("Preferences: " + prefsText(s.PreferencesEffective) + "\n\n")
	}
	return sb.String()
}

func plannerPrompt(s State, iteration int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "You are the project manager's planner (role %s).", RolePlanner)
	if iteration > 1 {
		fmt.Fprintf(&sb, " This is plan revision %d.", iteration)
	}
	sb.WriteString(" Split the task into steps a worker in a sandbox can execute one by one.\n\n")
	sb.WriteString(taskSection(s))
	if len(s.PlanFeedback) > 0 {
		sb.WriteString("A reviewer rejected earlier plans. Address every point:\n")
		for _, f := range s.PlanFeedback {
			fmt.Fprintf(&sb, "- (plan %d) %s\n", f.Iteration, strings.ReplaceAll(strings.TrimSpace(f.Feedback), "\n", "\n  "))
		}
		sb.WriteString("\n")
	}
	sb.WriteString(`Reply with one YAML document only (no prose, no code fences):
steps:            # in execution order; an empty list when nothing needs doing
  - id: step-1
    title: a short imperative title
    description: what to do
    expected_outputs: [explicit outputs, at least one]
    evidence: [what proves the step was done]
    capabilities: [optional: what the sandbox needs, e.g. go, postgres]
assumptions: [what you assume]
`)
	return sb.String()
}

func verifierPrompt(s State, step Step) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "You are the verifier (role %s). Check one step's result against the acceptance criteria and the step's expected outputs.\n\n", RoleVerifier)
	sb.WriteString(taskSection(s))
	fmt.Fprintf(&sb, "The step: %s (%s), attempt %d of at most %d\n", step.Title, step.ID, s.CurrentJob.Attempt, s.MaxAttempts)
	if step.Description != "" {
		sb.WriteString(step.Description + "\n")
	}
	sb.WriteString("\n")
	sb.WriteString(list("Expected outputs", step.ExpectedOutputs))
	sb.WriteString(list("Required evidence", step.Evidence))
	if s.CurrentJob.Remediation != "" {
		sb.WriteString("This attempt had to remediate:\n" + s.CurrentJob.Remediation + "\n\n")
	}
	fmt.Fprintf(&sb, "The worker's result (%s):\n---\n%s\n---\n\n", s.LastResult.Status, strings.TrimRight(s.LastResult.Output, "\n"))
	sb.WriteString(`Reply with one JSON object only:
{"status": "pass" or "fail",
 "findings": ["each gap or problem, with the evidence you looked at"],
 "recommended_actions": ["what the next attempt must do to pass"]}
`)
	return sb.String()
}

func summarizerPrompt(s State) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "You are the project manager writing the final summary (role %s).\n\n", RoleSummarizer)
	sb.WriteString(taskSection(s))
	if len(s.Plan.Steps) == 0 {
		sb.WriteString("The plan had no steps: nothing needed doing.\n\n")
	} else {
		sb.WriteString("Steps and their verified results:\n")
		for _, st := range s.Plan.Steps {
			fmt.Fprintf(&sb, "- %s (%s): %d attempt(s)", st.Title, st.ID, s.AttemptsByStep[st.ID])
			for i := len(s.History) - 1; i >= 0; i-- {
				if h := s.History[i]; h.StepID == st.ID {
					fmt.Fprintf(&sb, "; verification %s", h.Verification.Status)
					if len(h.Verification.Findings) > 0 {
						fmt.Fprintf(&sb, ": %s", strings.Join(h.Verification.Findings, "; "))
					}
					break
				}
			}
			sb.WriteString("\n")
		}
		sb.WriteString("\n")
	}
	sb.WriteString(list("Assumptions", s.Plan.Assumptions))
	sb.WriteString("Write the final task summary in Markdown: outcome, what was done per step, how each acceptance criterion is met, open risks.\n")
	return sb.String()
}

// planFeedback is every rejection of the plan, oldest first.
func (s State) planFeedback() []string {
	var out []string
	for _, f := range s.PlanFeedback {
		out = append(out, f.Feedback)
	}
	return out
}

// remediation is text as a one-point feedback list, or none.
func remediation(text string) []string {
	if strings.TrimSpace(text) == "" {
		return nil
	}
	return []string{text}
}
