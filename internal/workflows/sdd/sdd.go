// Package sdd is the `sdd` workflow of seed 000 and SPEC §9: five agents
// write a software design document from a project brief, a reviewer sends
// it back for revision, and a human approves it.
//
//	draft_hld → draft_lld → design_database → review_doc →(should_revise)
//	    revise:   → draft_hld (with revision_feedback)
//	    continue: → format_doc → human_review (gate sdd, option allowSdd) → END
//	                              rejected: → draft_hld (with the human's words)
//
// The reviewer replies with JSON; needs_revision true increments
// revision_count, and should_revise loops back to draft_hld — the full
// cycle, every agent again — while revision_count < max_revisions (task
// option, default 3), then forces the way on to format_doc (seed 000's
// graph_edges.py). A human rejection at human_review also loops back to
// draft_hld; the human's words reach every agent's prompt from then on.
// It does not count as a revision and does not reset revision_count.
// document_status moves draft → review (format_doc) → final (approval).
//
// Each agent validates its inputs first (seed 000's validate_state): e.g.
// draft_lld fails the task with "hld_draft is required and must be at
// least 100 characters" when the HLD is shorter.
//
// Like every gate, human_review auto-approves when the task has no
// "gates" option or {"gates": {"allowSdd": true}}; {"gates": {}} or
// {"gates": {"allowSdd": false}} makes a human decide.
//
// It imports graph, llm and agent only: no storage, no HTTP.
package sdd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
)

// Name is the workflow's name.
const Name = "sdd"

// StateVersion is the version of State's shape, part of the workflow's
// definition version: bump it when a change of State would make a stored
// checkpoint mean something else.
const StateVersion = 1

// Node names, in graph order.
const (
	NodeDraftHLD       = "draft_hld"
	NodeDraftLLD       = "draft_lld"
	NodeDesignDatabase = "design_database"
	NodeReviewDoc      = "review_doc"
	NodeFormatDoc      = "format_doc"
	NodeHumanReview    = "human_review"
)

// Nodes lists the node names in graph order.
func Nodes() []string {
	return []string{NodeDraftHLD, NodeDraftLLD, NodeDesignDatabase, NodeReviewDoc, NodeFormatDoc, NodeHumanReview}
}

// The agent roles (SPEC §9), one per LLM node.
const (
	RoleArchitect = "sdd.architect"
	RoleAPIData   = "sdd.api_data"
	RoleDatabase  = "sdd.database"
	RoleReviewer  = "sdd.reviewer"
	RoleWriter    = "sdd.writer"
)

// Roles lists the agent roles in graph order.
func Roles() []string {
	return []string{RoleArchitect, RoleAPIData, RoleDatabase, RoleReviewer, RoleWriter}
}

// The gate at human_review and the option that auto-approves it.
const (
	GateSDD        = "sdd"
	OptionAllowSdd = "allowSdd"
)

// Artifacts, one per document.
const (
	ArtifactHLD      = "hld.md"
	ArtifactLLD      = "lld.md"
	ArtifactDatabase = "database.md"
	ArtifactReview   = "review.json"
	ArtifactSDD      = "sdd.md"
)

// Document statuses (seed 000's DocumentStatus).
const (
	StatusDraft  = "draft"
	StatusReview = "review"
	StatusFinal  = "final"
)

// Limits.
const (
	MaxBrief = 64 << 10
	// MinDraft is the length (characters, trimmed) a draft the next agent
	// builds on must have (seed 000: "at least 100 characters").
	MinDraft = 100
	// DefaultMaxRevisions is max_revisions when the task does not set it.
	DefaultMaxRevisions = 3
	// MaxMaxRevisions bounds the option.
	MaxMaxRevisions = 10
)

// DefaultRetry is the LLM nodes' retry policy: a failed call is tried
// again twice, after 200ms then 400ms (±20%).
var DefaultRetry = graph.RetryPolicy{Attempts: 3, Backoff: 200 * time.Millisecond, MaxBackoff: 2 * time.Second, Jitter: 0.2}

// DefaultTimeout bounds each try of an LLM node.
const DefaultTimeout = 5 * time.Minute

// State is the sdd workflow's state (seed 000's DocumentState). It is
// plain JSON.
type State struct {
	// ProjectBrief is the input.
	ProjectBrief   string `json:"project_brief"`
	HLDDraft       string `json:"hld_draft,omitempty"`
	LLDDraft       string `json:"lld_draft,omitempty"`
	DatabaseSchema string `json:"database_schema,omitempty"`
	FinalDocument  string `json:"final_document,omitempty"`
	// DocumentStatus is draft, review (after format_doc) or final (after
	// the human's approval).
	DocumentStatus string `json:"document_status"`
	// ReviewFeedback is the reviewer's last review.
	ReviewFeedback *Review `json:"review_feedback,omitempty"`
	NeedsRevision  bool    `json:"needs_revision"`
	// RevisionCount counts the reviews that asked for a revision.
	RevisionCount int `json:"revision_count"`
	MaxRevisions  int `json:"max_revisions"`
	// ForcedContinue is set when the reviewer still asked for a revision
	// but max_revisions was reached: the document went on as it was.
	ForcedContinue bool `json:"forced_continue,omitempty"`
	// RevisionFeedback is what the next draft must address: the
	// reviewer's issues, or the human's words after a rejection.
	RevisionFeedback string `json:"revision_feedback,omitempty"`
	// HumanFeedback is every human rejection, in order.
	HumanFeedback []HumanFeedback `json:"human_feedback,omitempty"`
	// Approved is nil until a human (or the gate option) decides.
	Approved *bool `json:"approved"`
}

// HumanFeedback is one rejection at human_review.
type HumanFeedback struct {
	// Round is the human review's iteration (1, 2, …).
	Round    int    `json:"round"`
	Feedback string `json:"feedback"`
}

// Input is the workflow's input.
type Input struct {
	ProjectBrief string `json:"project_brief"`
}

// InputSchema is the JSON Schema of Input.
var InputSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "title": "Software design document",
  "additionalProperties": false,
  "required": ["project_brief"],
  "properties": {
    "project_brief": {"type": "string", "minLength": 1, "maxLength": 65536, "title": "Project brief",
      "description": "What the system must do, for whom, and under which constraints.", "format": "textarea"}
  }
}`)

// OptionsSchema is the JSON Schema of the task options the workflow reads.
var OptionsSchema = json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "gates": {"type": "object", "additionalProperties": false,
      "properties": {"allowSdd": {"type": "boolean", "title": "Approve the document without a human"}}},
    "max_revisions": {"type": "integer", "minimum": 0, "maximum": 10, "default": 3, "title": "Reviewer revisions at most"}
  }
}`)

// ParseInput decodes and checks a task's input. Errors:
// *graph.ValidationError naming the field (input.project_brief, …).
func ParseInput(raw json.RawMessage) (Input, error) {
	var in Input
	if err := agent.Decode(raw, &in, "input", "the sdd input", "project_brief"); err != nil {
		return in, err
	}
	var err error
	in.ProjectBrief, err = agent.Text("input.project_brief", in.ProjectBrief, true, MaxBrief)
	return in, err
}

// Options are the task options the workflow reads.
type Options struct {
	Gates        json.RawMessage `json:"gates,omitempty"`
	MaxRevisions *int            `json:"max_revisions,omitempty"`
}

// Option configures the workflow.
type Option func(*config)

type config struct {
	retry        graph.RetryPolicy
	timeout      time.Duration
	maxRevisions int
}

// WithRetry sets the LLM nodes' retry policy (default DefaultRetry).
func WithRetry(p graph.RetryPolicy) Option { return func(c *config) { c.retry = p } }

// WithTimeout bounds each try of an LLM node (default DefaultTimeout; 0
// or less: none).
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithMaxRevisions sets max_revisions for tasks that do not set it
// (default DefaultMaxRevisions).
func WithMaxRevisions(n int) Option { return func(c *config) { c.maxRevisions = n } }

type workflow struct {
	p   llm.Provider
	cfg config
}

// New compiles the sdd workflow; its agents ask p.
func New(p llm.Provider, opts ...Option) (*graph.Graph[State], error) {
	if p == nil {
		return nil, errors.New("sdd: nil llm.Provider")
	}
	w := &workflow{p: p, cfg: config{retry: DefaultRetry, timeout: DefaultTimeout, maxRevisions: DefaultMaxRevisions}}
	for _, o := range opts {
		o(&w.cfg)
	}
	if w.cfg.maxRevisions < 0 || w.cfg.maxRevisions > MaxMaxRevisions {
		return nil, fmt.Errorf("sdd: max revisions %d is not between 0 and %d", w.cfg.maxRevisions, MaxMaxRevisions)
	}
	agentNode := func(desc string) []graph.NodeOption {
		o := []graph.NodeOption{graph.WithRetry(w.cfg.retry), graph.WithDescription(desc)}
		if w.cfg.timeout > 0 {
			o = append(o, graph.WithTimeout(w.cfg.timeout))
		}
		return o
	}
	return graph.New[State](Name).
		StateVersion(StateVersion).
		Describe("Software design document",
			"From a project brief to an approved software design document: HLD, LLD and database design, reviewed and revised, formatted, approved by a human.").
		Deliverable(ArtifactSDD).
		Node(NodeDraftHLD, w.draftHLD, agentNode("The system architect drafts the high-level design (hld.md).")...).
		Node(NodeDraftLLD, w.draftLLD, agentNode("The API and data designer drafts the low-level design (lld.md).")...).
		Node(NodeDesignDatabase, w.designDatabase, agentNode("The database designer writes the schema (database.md).")...).
		Node(NodeReviewDoc, w.reviewDoc, agentNode("The reviewer checks the drafts and may ask for a revision (review.json).")...).
		Node(NodeFormatDoc, w.formatDoc, agentNode("The technical writer assembles the final document.")...).
		Node(NodeHumanReview, humanReview, graph.WithDescription("A human approves the document (sdd.md) or sends it back.")).
		Gate(NodeHumanReview, graph.Gate[State]{Kind: GateSDD, Option: OptionAllowSdd, AlwaysAsks: true, Title: "Approve the software design document (sdd.md)",
			Artifact: ArtifactSDD, OnApprove: approve, OnReject: reject, RejectTo: NodeDraftHLD, OnEdit: edit}).
		Edge(NodeDraftHLD, NodeDraftLLD).
		Edge(NodeDraftLLD, NodeDesignDatabase).
		Edge(NodeDesignDatabase, NodeReviewDoc).
		Route(NodeReviewDoc, ShouldRevise, NodeDraftHLD+"=revise", NodeFormatDoc+"=continue").
		Edge(NodeFormatDoc, NodeHumanReview).
		Edge(NodeHumanReview, graph.END).
		Init(w.init).
		Result(result).
		InputSchema(InputSchema).OptionsSchema(OptionsSchema).
		Compile()
}

func (w *workflow) init(raw json.RawMessage, opts graph.Options) (State, error) {
	in, err := ParseInput(raw)
	if err != nil {
		return State{}, err
	}
	if err := agent.Gates(Name, opts, OptionAllowSdd); err != nil {
		return State{}, err
	}
	var o Options
	if err := agent.Decode(opts.Raw, &o, "options", "the sdd options", "gates", "max_revisions"); err != nil {
		return State{}, err
	}
	maxRev, err := agent.IntOption("options.max_revisions", o.MaxRevisions, w.cfg.maxRevisions, 0, MaxMaxRevisions)
	if err != nil {
		return State{}, err
	}
	return State{ProjectBrief: in.ProjectBrief, DocumentStatus: StatusDraft, MaxRevisions: maxRev}, nil
}

// ShouldRevise is seed 000's should_revise: back to draft_hld while the
// reviewer asks for a revision and revision_count < max_revisions, else on
// to format_doc.
func ShouldRevise(s State) string {
	if s.NeedsRevision && s.RevisionCount < s.MaxRevisions {
		return NodeDraftHLD
	}
	return NodeFormatDoc
}

// Result is what a succeeded sdd task reports.
type Result struct {
	DocumentStatus  string `json:"document_status"`
	Approved        bool   `json:"approved"`
	RevisionCount   int    `json:"revision_count"`
	ForcedContinue  bool   `json:"forced_continue"`
	HumanRejections int    `json:"human_rejections"`
	FinalDocument   string `json:"final_document"`
}

func result(s State) any {
	return Result{DocumentStatus: s.DocumentStatus, Approved: s.Approved != nil && *s.Approved, RevisionCount: s.RevisionCount,
		ForcedContinue: s.ForcedContinue, HumanRejections: len(s.HumanFeedback), FinalDocument: s.FinalDocument}
}

// --- input validation of each agent (seed 000's validate_state) ---

type check struct {
	field, value string
	min          int
}

// validate fails the node permanently, naming the agent and every missing
// input, when a check does not hold.
func validate(node, agentName string, checks ...check) error {
	var errs []string
	for _, c := range checks {
		if n := len([]rune(strings.TrimSpace(c.value))); n < max(c.min, 1) {
			if c.min > 1 {
				errs = append(errs, fmt.Sprintf("%s is required and must be at least %d characters", c.field, c.min))
			} else {
				errs = append(errs, c.field+" is required")
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return graph.Permanent(fmt.Errorf("%s: %s cannot run: %s", node, agentName, strings.Join(errs, "; ")))
}

func (s State) briefCheck() check { return check{"project_brief", s.ProjectBrief, 1} }
func (s State) hldCheck() check   { return check{"hld_draft", s.HLDDraft, MinDraft} }
func (s State) lldCheck() check   { return check{"lld_draft", s.LLDDraft, MinDraft} }
func (s State) dbCheck() check    { return check{"database_schema", s.DatabaseSchema, 1} }

// --- nodes ---

func (w *workflow) ask(ctx context.Context, run *graph.NodeRun, s State, role, prompt string) (string, error) {
	resp, err := agent.AskAnswering(ctx, w.p, run, role, prompt, s.ProjectBrief, s.feedback())
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(agent.StripFences(resp.Text)) + "\n", nil
}

func (w *workflow) draftHLD(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	if err := validate(run.Node, "SystemArchitectAgent", s.briefCheck()); err != nil {
		return s, err
	}
	text, err := w.ask(ctx, run, s, RoleArchitect, architectPrompt(s, run.Iteration))
	if err != nil {
		return s, err
	}
	s.HLDDraft = text
	s.DocumentStatus = StatusDraft
	s.Approved = nil
	run.Artifact(ArtifactHLD, "text/markdown", s.HLDDraft)
	return s, nil
}

func (w *workflow) draftLLD(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	if err := validate(run.Node, "APIDataAgent", s.briefCheck(), s.hldCheck()); err != nil {
		return s, err
	}
	text, err := w.ask(ctx, run, s, RoleAPIData, apiDataPrompt(s, run.Iteration))
	if err != nil {
		return s, err
	}
	s.LLDDraft = text
	run.Artifact(ArtifactLLD, "text/markdown", s.LLDDraft)
	return s, nil
}

func (w *workflow) designDatabase(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	if err := validate(run.Node, "DatabaseDesignerAgent", s.hldCheck(), s.lldCheck()); err != nil {
		return s, err
	}
	text, err := w.ask(ctx, run, s, RoleDatabase, databasePrompt(s, run.Iteration))
	if err != nil {
		return s, err
	}
	s.DatabaseSchema = text
	run.Artifact(ArtifactDatabase, "text/markdown", s.DatabaseSchema)
	return s, nil
}

func (w *workflow) reviewDoc(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	if err := validate(run.Node, "ReviewerAgent", s.hldCheck(), s.lldCheck(), s.dbCheck()); err != nil {
		return s, err
	}
	resp, err := agent.AskAnswering(ctx, w.p, run, RoleReviewer, reviewerPrompt(s, run.Iteration), s.ProjectBrief, s.feedback())
	if err != nil {
		return s, err
	}
	rev, err := ParseReview(resp.Text)
	if err != nil {
		// Worth another try: a model may well answer in the asked form next time.
		return s, fmt.Errorf("%s: %w", run.Node, err)
	}
	b, _ := json.MarshalIndent(rev, "", "  ")
	run.Artifact(ArtifactReview, "application/json", string(b)+"\n")
	s.ReviewFeedback = &rev
	s.NeedsRevision = rev.NeedsRevision
	s.ForcedContinue = false
	if rev.NeedsRevision {
		s.RevisionCount++
		s.RevisionFeedback = rev.Feedback(s.RevisionCount)
		s.ForcedContinue = s.RevisionCount >= s.MaxRevisions
	} else {
		s.RevisionFeedback = ""
	}
	return s, nil
}

func (w *workflow) formatDoc(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	if err := validate(run.Node, "WriterFormatterAgent", s.hldCheck(), s.lldCheck(), s.dbCheck()); err != nil {
		return s, err
	}
	text, err := w.ask(ctx, run, s, RoleWriter, writerPrompt(s, run.Iteration))
	if err != nil {
		return s, err
	}
	s.FinalDocument = text
	s.DocumentStatus = StatusReview
	return s, nil
}

// humanReview presents the final document for the gate.
func humanReview(_ context.Context, run *graph.NodeRun, s State) (State, error) {
	if strings.TrimSpace(s.FinalDocument) == "" || s.DocumentStatus != StatusReview {
		return s, graph.Permanent(fmt.Errorf("%s: no formatted document to review (document_status %q)", run.Node, s.DocumentStatus))
	}
	run.Artifact(ArtifactSDD, "text/markdown", s.FinalDocument)
	return s, nil
}

// --- the gate ---

func approve(s State) (State, error) {
	yes := true
	s.Approved = &yes
	s.DocumentStatus = StatusFinal
	return s, nil
}

// reject records the human's words; the engine continues at draft_hld.
func reject(s State, feedback string, iteration int) (State, error) {
	no := false
	s.Approved = &no
	s.HumanFeedback = append(slices.Clone(s.HumanFeedback), HumanFeedback{Round: iteration, Feedback: feedback})
	s.RevisionFeedback = fmt.Sprintf("A human reviewer rejected the document (review round %d). Their feedback:\n%s", iteration, feedback)
	s.DocumentStatus = StatusDraft
	s.NeedsRevision = false
	s.ForcedContinue = false
	return s, nil
}

func edit(s State, content string) (State, error) {
	if n := len([]rune(strings.TrimSpace(content))); n < MinDraft {
		return s, graph.Permanent(fmt.Errorf("edit of the design document refused: it must be at least %d characters (got %d)", MinDraft, n))
	}
	s.FinalDocument = content
	return s, nil
}

// feedback is what a drafting call answers, oldest first: every human
// rejection, then the automated reviewer's issues while a revision is
// under way (a human's rejection is already among the first).
func (s State) feedback() []string {
	var out []string
	for _, h := range s.HumanFeedback {
		out = append(out, h.Feedback)
	}
	if s.RevisionFeedback != "" && s.NeedsRevision && s.ReviewFeedback != nil {
		out = append(out, s.ReviewFeedback.Issues...)
	}
	return out
}
