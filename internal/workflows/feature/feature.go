// Package feature is the `feature` workflow of seed 002 and SPEC §9:
//
//	analyze → validate_spec_analyze → requirements (gate prd, allowPrd) →
//	validate_spec_requirements → research → validate_research →
//	plan (gate plan, allowPlan) → validate_plan_tasks → implement →
//	merge (gate merge, allowMerge) → END
//
// Producer nodes (analyze, requirements, research, plan, implement, merge)
// each make exactly one Executor call per node run and record it as an
// llm.call event; validators make none and check the YAML documents
// against their schemas. The documents live in the state as the text of
// the seed's spec directory: spec.yaml, research.yaml, plan.yaml,
// tasks.yaml and feature.yaml (with status.completedPhases and
// status.phaseTimings), plus implementation.md and merge.md.
//
// It imports graph, llm and agent only: no storage, no HTTP.
package feature

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
	"gopkg.in/yaml.v3"
)

// Name is the workflow's name.
const Name = "feature"

// StateVersion is the version of State's shape, part of the workflow's
// definition version: bump it when a change of State would make a stored
// checkpoint mean something else.
const StateVersion = 1

// Node names, in graph order.
const (
	NodeAnalyze                  = "analyze"
	NodeValidateSpecAnalyze      = "validate_spec_analyze"
	NodeRequirements             = "requirements"
	NodeValidateSpecRequirements = "validate_spec_requirements"
	NodeResearch                 = "research"
	NodeValidateResearch         = "validate_research"
	NodePlan                     = "plan"
	NodeValidatePlanTasks        = "validate_plan_tasks"
	NodeImplement                = "implement"
	NodeMerge                    = "merge"
)

// Nodes lists the node names in graph order.
func Nodes() []string {
	return []string{NodeAnalyze, NodeValidateSpecAnalyze, NodeRequirements, NodeValidateSpecRequirements,
		NodeResearch, NodeValidateResearch, NodePlan, NodeValidatePlanTasks, NodeImplement, NodeMerge}
}

// Gate kinds and the task options that auto-approve them.
const (
	GatePRD   = "prd"
	GatePlan  = "plan"
	GateMerge = "merge"

	OptionAllowPrd   = "allowPrd"
	OptionAllowPlan  = "allowPlan"
	OptionAllowMerge = "allowMerge"
)

// Input limits.
const (
	MaxDescription = 64 << 10
	MaxName        = 100
)

// DefaultRetry is the producer nodes' retry policy: an executor error is
// tried again twice, after 200ms then 400ms (±20%).
var DefaultRetry = graph.RetryPolicy{Attempts: 3, Backoff: 200 * time.Millisecond, MaxBackoff: 2 * time.Second, Jitter: 0.2}

// DefaultTimeout bounds each try of a producer node.
const DefaultTimeout = 5 * time.Minute

// State is the feature workflow's state. It is plain JSON.
type State struct {
	// Description is the feature request (input).
	Description string `json:"description"`
	// Name is the input's name, or the one analyze chose.
	Name string `json:"name"`
	// Summary is analyze's summary of the feature.
	Summary string `json:"summary,omitempty"`

	SpecYAML       string `json:"spec_yaml"`
	ResearchYAML   string `json:"research_yaml,omitempty"`
	PlanYAML       string `json:"plan_yaml,omitempty"`
	TasksYAML      string `json:"tasks_yaml,omitempty"`
	FeatureYAML    string `json:"feature_yaml"`
	Implementation string `json:"implementation,omitempty"`
	MergeSummary   string `json:"merge_summary,omitempty"`

	// Feedback is every rejection so far, in order: the record that
	// spec.yaml's rejectionFeedback mirrors (kept here too so a spec.yaml
	// that does not parse loses none of it).
	Feedback []Feedback `json:"rejection_feedback,omitempty"`
	// Unpublished names documents a decision changed (feedback recorded,
	// tasks re-derived from an edited plan) that the next node run records
	// as artifacts.
	Unpublished []string `json:"unpublished,omitempty"`
}

// Input is the workflow's input.
type Input struct {
	Description string `json:"description"`
	Name        string `json:"name,omitempty"`
}

// InputSchema is the JSON Schema of Input.
var InputSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "title": "Feature",
  "additionalProperties": false,
  "required": ["description"],
  "properties": {
    "description": {"type": "string", "minLength": 1, "maxLength": 65536, "title": "Description",
      "description": "What the feature should do, for whom, and any constraints."},
    "name": {"type": "string", "maxLength": 100, "title": "Name", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$",
      "errorMessage": "Use kebab-case: lower-case letters and digits in words joined by hyphens, e.g. csv-export.",
      "description": "Short kebab-case name; chosen by the analyst when empty."}
  }
}`)

// kebab is the form of a feature's name (the schema's pattern).
var kebab = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// ParseInput decodes and checks a task's input. Errors: *graph.ValidationError
// naming the field (input.description, input.name, input.<unknown>).
func ParseInput(raw json.RawMessage) (Input, error) {
	var in Input
	if err := agent.Decode(raw, &in, "input", "the feature input", "description", "name"); err != nil {
		return in, err
	}
	in.Description = strings.TrimSpace(in.Description)
	in.Name = strings.TrimSpace(in.Name)
	switch {
	case in.Description == "":
		return in, &graph.ValidationError{Field: "input.description", Message: "is required and must not be empty"}
	case len(in.Description) > MaxDescription:
		return in, &graph.ValidationError{Field: "input.description", Message: fmt.Sprintf("is longer than %d bytes", MaxDescription)}
	case !utf8.ValidString(in.Description):
		return in, &graph.ValidationError{Field: "input.description", Message: "is not valid UTF-8"}
	case utf8.RuneCountInString(in.Name) > MaxName:
		return in, &graph.ValidationError{Field: "input.name", Message: fmt.Sprintf("is longer than %d characters", MaxName)}
	case strings.ContainsAny(in.Name, "\n\r\t"):
		return in, &graph.ValidationError{Field: "input.name", Message: "must be one line"}
	case in.Name != "" && !kebab.MatchString(in.Name):
		return in, &graph.ValidationError{Field: "input.name",
			Message: "must be kebab-case: lower-case letters and digits in words joined by hyphens, e.g. csv-export"}
	}
	return in, nil
}

// Option configures the workflow.
type Option func(*config)

type config struct {
	retry   graph.RetryPolicy
	timeout time.Duration
	now     func() time.Time
}

// WithRetry sets the producer nodes' retry policy (default DefaultRetry).
func WithRetry(p graph.RetryPolicy) Option { return func(c *config) { c.retry = p } }

// WithTimeout bounds each try of a producer node (default DefaultTimeout;
// 0 or less: none).
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithClock sets the clock of the phase timings (tests).
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

type workflow struct {
	exec Executor
	cfg  config
}

// New compiles the feature workflow over exec.
func New(exec Executor, opts ...Option) (*graph.Graph[State], error) {
	if exec == nil {
		return nil, errors.New("feature: nil Executor")
	}
	w := &workflow{exec: exec, cfg: config{retry: DefaultRetry, timeout: DefaultTimeout, now: time.Now}}
	for _, o := range opts {
		o(&w.cfg)
	}
	prod := []graph.NodeOption{graph.WithRetry(w.cfg.retry)}
	if w.cfg.timeout > 0 {
		prod = append(prod, graph.WithTimeout(w.cfg.timeout))
	}
	withDesc := func(d string, o []graph.NodeOption) []graph.NodeOption {
		return append(slices.Clone(o), graph.WithDescription(d))
	}
	return graph.New[State](Name).
		StateVersion(StateVersion).
		ValidateState(validateState).
		Describe("Feature", "From a feature request to a merge: analysis, PRD (approved), research, plan (approved), implementation and merge (approved).").
		Deliverable(MergeFile).
		Node(NodeAnalyze, w.analyze, withDesc("The analyst names and summarises the request (spec.yaml).", prod)...).
		Node(NodeValidateSpecAnalyze, w.validateSpecAnalyze, graph.WithDescription("Checks spec.yaml has a name and a summary.")).
		Node(NodeRequirements, w.requirements, withDesc("The product manager writes the PRD into spec.yaml.", prod)...).
		Node(NodeValidateSpecRequirements, w.validateSpecRequirements, graph.WithDescription("Checks spec.yaml's requirements.")).
		Node(NodeResearch, w.research, withDesc("The researcher records technical decisions (research.yaml).", prod)...).
		Node(NodeValidateResearch, w.validateResearch, graph.WithDescription("Checks research.yaml's decisions.")).
		Node(NodePlan, w.plan, withDesc("The tech lead plans phases and tasks (plan.yaml, tasks.yaml).", prod)...).
		Node(NodeValidatePlanTasks, w.validatePlanTasks, graph.WithDescription("Checks plan.yaml and tasks.yaml agree.")).
		Node(NodeImplement, w.implement, withDesc("The engineer implements the tasks (implementation.md).", prod)...).
		Node(NodeMerge, w.merge, withDesc("The release engineer prepares the merge (merge.md).", prod)...).
		Gate(NodeRequirements, graph.Gate[State]{Kind: GatePRD, Option: OptionAllowPrd, Title: "Approve the PRD (spec.yaml)",
			Artifact: SpecFile, OnReject: reject(NodeRequirements), OnEdit: editSpec}).
		Gate(NodePlan, graph.Gate[State]{Kind: GatePlan, Option: OptionAllowPlan, Title: "Approve the implementation plan (plan.yaml)",
			Artifact: PlanFile, OnReject: reject(NodePlan), OnEdit: editPlan}).
		Gate(NodeMerge, graph.Gate[State]{Kind: GateMerge, Option: OptionAllowMerge, Title: "Approve the merge (merge.md)",
			Artifact: MergeFile, OnReject: reject(NodeMerge), OnEdit: editMerge}).
		Edge(NodeAnalyze, NodeValidateSpecAnalyze).
		Edge(NodeValidateSpecAnalyze, NodeRequirements).
		Edge(NodeRequirements, NodeValidateSpecRequirements).
		Edge(NodeValidateSpecRequirements, NodeResearch).
		Edge(NodeResearch, NodeValidateResearch).
		Edge(NodeValidateResearch, NodePlan).
		Edge(NodePlan, NodeValidatePlanTasks).
		Edge(NodeValidatePlanTasks, NodeImplement).
		Edge(NodeImplement, NodeMerge).
		Edge(NodeMerge, graph.END).
		Init(initState).
		Result(result).
		InputSchema(InputSchema).
		Compile()
}

var gateOptions = []string{OptionAllowPrd, OptionAllowPlan, OptionAllowMerge}

func initState(raw json.RawMessage, opts graph.Options) (State, error) {
	in, err := ParseInput(raw)
	if err != nil {
		return State{}, err
	}
	for k := range opts.Gates {
		if !slices.Contains(gateOptions, k) {
			return State{}, &graph.ValidationError{Field: "options.gates." + k,
				Message: "is not a gate of the feature workflow (" + strings.Join(gateOptions, ", ") + ")"}
		}
	}
	return State{
		Description: in.Description,
		Name:        in.Name,
		SpecYAML:    initialSpec(in.Name, in.Description),
		FeatureYAML: initialFeature(in.Name, in.Description),
	}, nil
}

// validateState checks a state a person supplied (a fork's patch): the
// request must still be there, as the input schema requires of it.
func validateState(s State) error {
	switch {
	case strings.TrimSpace(s.Description) == "":
		return &graph.ValidationError{Field: "state.description", Message: "is required and must not be empty"}
	case len(s.Description) > MaxDescription:
		return &graph.ValidationError{Field: "state.description", Message: fmt.Sprintf("is longer than %d bytes", MaxDescription)}
	case utf8.RuneCountInString(s.Name) > MaxName:
		return &graph.ValidationError{Field: "state.name", Message: fmt.Sprintf("is longer than %d characters", MaxName)}
	}
	return nil
}

// Result is what a succeeded feature task reports.
type Result struct {
	Name            string   `json:"name"`
	Summary         string   `json:"summary,omitempty"`
	CompletedPhases []string `json:"completed_phases"`
	Artifacts       []string `json:"artifacts"`
	Tasks           int      `json:"tasks"`
	Rejections      int      `json:"rejections"`
}

func result(s State) any {
	r := Result{Name: s.Name, Summary: s.Summary, CompletedPhases: []string{}, Artifacts: s.ArtifactNames(),
		Rejections: len(s.Feedback)}
	if ps, err := CompletedPhases(s.FeatureYAML); err == nil {
		r.CompletedPhases = ps
	}
	if root, err := parseDoc(s.TasksYAML); err == nil {
		if ts := mapGet(root, "tasks"); ts != nil && ts.Kind == yaml.SequenceNode {
			r.Tasks = len(ts.Content)
		}
	}
	return r
}

// ArtifactNames lists the documents the state holds, in workflow order.
func (s State) ArtifactNames() []string {
	out := []string{}
	for _, d := range s.documents() {
		if strings.TrimSpace(d.content) != "" {
			out = append(out, d.name)
		}
	}
	return out
}

type doc struct{ name, contentType, content string }

func (s State) documents() []doc {
	return []doc{
		{SpecFile, ContentYAML, s.SpecYAML},
		{ResearchFile, ContentYAML, s.ResearchYAML},
		{PlanFile, ContentYAML, s.PlanYAML},
		{TasksFile, ContentYAML, s.TasksYAML},
		{FeatureFile, ContentYAML, s.FeatureYAML},
		{ImplementationFile, ContentMarkdown, s.Implementation},
		{MergeFile, ContentMarkdown, s.MergeSummary},
	}
}

// Document returns the content of the named document ("" if unknown).
func (s State) Document(name string) string {
	for _, d := range s.documents() {
		if d.name == name {
			return d.content
		}
	}
	return ""
}

// publish records the named documents as artifacts of this node run, plus
// every document a decision changed since the last node run.
func publish(run *graph.NodeRun, s *State, names ...string) {
	for _, n := range s.Unpublished {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	s.Unpublished = nil
	for _, d := range s.documents() {
		if slices.Contains(names, d.name) {
			run.Artifact(d.name, d.contentType, d.content)
		}
	}
}

func markUnpublished(s *State, names ...string) {
	for _, n := range names {
		if !slices.Contains(s.Unpublished, n) {
			s.Unpublished = append(s.Unpublished, n)
		}
	}
}

// done marks the producer's phase complete in feature.yaml with its timing
// and records the documents it produced.
func (w *workflow) done(run *graph.NodeRun, s State, start time.Time, docs ...string) (State, error) {
	fy, err := completePhase(s.FeatureYAML, run.Node, run.Phase, s.Name, start, w.cfg.now())
	if err != nil {
		return s, graph.Permanent(fmt.Errorf("%s: %w", run.Node, err))
	}
	s.FeatureYAML = fy
	publish(run, &s, append(docs, FeatureFile)...)
	return s, nil
}

// replyDoc reads a YAML reply: its mapping, or nil when it is not one (the
// text is then kept as written, for the validator to report with its line).
func replyDoc(text string) *yaml.Node {
	root, err := parseDoc(text)
	if err != nil || root.Kind != yaml.MappingNode {
		return nil
	}
	return root
}

// specBase is the spec.yaml mapping a reply merges into: the current one,
// or one rebuilt from the state when the current one does not parse.
func specBase(s State) *yaml.Node {
	if root, err := parseDoc(s.SpecYAML); err == nil && root.Kind == yaml.MappingNode {
		return root
	}
	root, _ := parseDoc(initialSpec(s.Name, s.Description))
	if s.Summary != "" {
		mapSet(root, "summary", toNode(s.Summary))
	}
	return root
}

// Keys of spec.yaml a reply may not overwrite.
var specOwned = []string{"description", "phase", "rejectionFeedback"}

func (w *workflow) analyze(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	start := w.cfg.now()
	rep, err := w.call(ctx, run, s, RoleAnalyze, analyzePrompt(s))
	if err != nil {
		return s, err
	}
	text := stripFences(rep.Text)
	if root := replyDoc(text); root != nil {
		base := specBase(s)
		mergeMapping(base, root, specOwned...)
		if s.Name != "" {
			mapSet(base, "name", toNode(s.Name)) // the requester's name wins
		}
		s.Name = mapText(base, "name")
		s.Summary = mapText(base, "summary")
		setPhase(base, NodeAnalyze)
		withFeedback(base, s.Feedback)
		s.SpecYAML = render(base)
	} else {
		s.SpecYAML = text
	}
	return w.done(run, s, start, SpecFile)
}

func (w *workflow) requirements(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	start := w.cfg.now()
	rep, err := w.call(ctx, run, s, RoleRequirements, requirementsPrompt(s, run.Iteration))
	if err != nil {
		return s, err
	}
	text := stripFences(rep.Text)
	if root := replyDoc(text); root != nil {
		base := specBase(s)
		mergeMapping(base, root, append(specOwned, "name")...)
		setPhase(base, NodeRequirements)
		withFeedback(base, s.Feedback)
		s.SpecYAML = render(base)
	} else {
		s.SpecYAML = text
	}
	return w.done(run, s, start, SpecFile)
}

func (w *workflow) research(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	start := w.cfg.now()
	rep, err := w.call(ctx, run, s, RoleResearch, researchPrompt(s))
	if err != nil {
		return s, err
	}
	s.ResearchYAML = stripFences(rep.Text)
	return w.done(run, s, start, ResearchFile)
}

func (w *workflow) plan(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	start := w.cfg.now()
	rep, err := w.call(ctx, run, s, RolePlan, planPrompt(s, run.Iteration))
	if err != nil {
		return s, err
	}
	s.PlanYAML = stripFences(rep.Text)
	s.TasksYAML = ""
	if root, err := validateDoc(PlanFile, s.PlanYAML, planS); err == nil {
		s.TasksYAML = render(toNode(deriveTasks(root)))
	} // else validate_plan_tasks reports it
	return w.done(run, s, start, PlanFile, TasksFile)
}

func (w *workflow) implement(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	start := w.cfg.now()
	rep, err := w.call(ctx, run, s, RoleImplement, implementPrompt(s))
	if err != nil {
		return s, err
	}
	s.Implementation = stripFences(rep.Text)
	return w.done(run, s, start, ImplementationFile)
}

func (w *workflow) merge(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	start := w.cfg.now()
	rep, err := w.call(ctx, run, s, RoleMerge, mergePrompt(s, run.Iteration))
	if err != nil {
		return s, err
	}
	s.MergeSummary = stripFences(rep.Text)
	return w.done(run, s, start, MergeFile)
}

// --- gates ---

// reject records the feedback in spec.yaml's rejectionFeedback and reopens
// the phase, so the node runs again as the next iteration.
func reject(phase string) func(State, string, int) (State, error) {
	return func(s State, feedback string, iteration int) (State, error) {
		s.Feedback = append(slices.Clone(s.Feedback), Feedback{Phase: phase, Iteration: iteration, Feedback: feedback})
		s.SpecYAML = specWithFeedback(s.SpecYAML, s.Feedback)
		fy, err := reopenPhase(s.FeatureYAML, phase)
		if err != nil {
			return s, graph.Permanent(fmt.Errorf("%s gate: %w", phase, err))
		}
		s.FeatureYAML = fy
		s.Unpublished = slices.Clone(s.Unpublished)
		markUnpublished(&s, SpecFile, FeatureFile)
		return s, nil
	}
}

func editSpec(s State, content string) (State, error) {
	root, err := validateDoc(SpecFile, content, specRequirementsS)
	if err != nil {
		return s, graph.Permanent(fmt.Errorf("edit of the PRD refused: %w", err))
	}
	s.SpecYAML = content
	s.Name = mapText(root, "name")
	s.Summary = mapText(root, "summary")
	return s, nil
}

func editPlan(s State, content string) (State, error) {
	root, err := validateDoc(PlanFile, content, planS)
	if err != nil {
		return s, graph.Permanent(fmt.Errorf("edit of the plan refused: %w", err))
	}
	s.PlanYAML = content
	s.TasksYAML = render(toNode(deriveTasks(root)))
	s.Unpublished = slices.Clone(s.Unpublished)
	markUnpublished(&s, TasksFile)
	return s, nil
}

func editMerge(s State, content string) (State, error) {
	if strings.TrimSpace(content) == "" {
		return s, graph.Permanent(errors.New("edit of the merge refused: merge.md is empty"))
	}
	s.MergeSummary = content
	return s, nil
}
