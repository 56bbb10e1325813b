// Package slogan is the `slogan` workflow of seed 004 and SPEC §9: a
// writer and a reviewer refine a slogan until the reviewer says SHIP IT or
// the turns run out.
//
//	writer → reviewer → decide → writer (not approved, turns left, with the review as feedback)
//	                           → END    (approved, or max_turns reached)
//
// One turn is one writer call, one review and one decision; every turn is
// recorded in the state (turns: turn_number, slogan, feedback — null when
// approved —, approved, reviewer, timestamp) and in the result.
//
// The SHIP IT rule (IsApproved): a review approves when it matches
// `\bSHIP IT!?\b` case-insensitively (seed 004's is_approved: "SHIP IT!",
// "Ship it", "ship it!!" approve; "relationship", "shipping" do not) —
// unless that match is negated or asked: a negation word among the three
// words before it in the same clause ("don't ship it yet", "I would not
// ship it", "never ship it like this") or a question mark right after it
// ("Ship it? Not yet.") makes that match no approval. This refines the
// seed's rule on purpose: a reviewer that writes "don't ship it yet" is
// asking for another turn, and real models write such sentences. The
// reviewer's prompt also asks it to use the words only to approve.
//
// Completion reasons (CompletionReason): approved (the task succeeds),
// max_turns (the task succeeds with the last slogan), error (a provider
// that still fails after the node's retries fails the task, as seed 004's
// error path "Complete (ERROR) — Failed to complete"; the turns so far stay
// in the last checkpoint), cancelled (the task was cancelled).
//
// Options: max_turns (1–20; default the workflow's, 5, or OLLAMA_MAX_TURNS
// as main passes it) and human_reviewer (true: each review is a `review`
// interrupt a human answers — approve, reject with feedback for the
// writer, or respond with a review the SHIP IT rule reads — instead of the
// LLM reviewer).
package slogan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
)

// Name is the workflow's name.
const Name = "slogan"

// StateVersion is the version of State's shape, part of the workflow's
// definition version: bump it when a change of State would make a stored
// checkpoint mean something else.
const StateVersion = 1

// Node names, in graph order.
const (
	NodeWriter   = "writer"
	NodeReviewer = "reviewer"
	NodeDecide   = "decide"
)

// Nodes lists the node names in graph order.
func Nodes() []string { return []string{NodeWriter, NodeReviewer, NodeDecide} }

// The agent roles (SPEC §9).
const (
	RoleWriter   = "slogan.writer"
	RoleReviewer = "slogan.reviewer"
)

// Roles lists the agent roles.
func Roles() []string { return []string{RoleWriter, RoleReviewer} }

// InterruptReview is the kind of the human reviewer's interrupt.
const InterruptReview = "review"

// Artifacts.
const (
	ArtifactSlogan = "slogan.txt"
	ArtifactReview = "review.txt"
)

// Completion reasons (seed 004's CompletionReason).
const (
	ReasonApproved  = "approved"
	ReasonMaxTurns  = "max_turns"
	ReasonError     = "error"
	ReasonCancelled = "cancelled"
)

// Reviewers of a turn.
const (
	ReviewerLLM   = "llm"
	ReviewerHuman = "human"
)

// Limits and defaults.
const (
	DefaultMaxTurns = 5
	MaxMaxTurns     = 20
	MaxUserInput    = 4 << 10
)

// DefaultRetry is the writer's and reviewer's retry policy, after seed
// 004's run_slogan_generation_with_retry: three tries, waiting 2s then 4s
// (±20%). Configuration errors (unknown model) are not retried.
var DefaultRetry = graph.RetryPolicy{Attempts: 3, Backoff: 2 * time.Second, MaxBackoff: 8 * time.Second, Jitter: 0.2}

// DefaultTimeout bounds each try of an LLM node.
const DefaultTimeout = 2 * time.Minute

// Turn is one writer–reviewer exchange (seed 004's Turn).
type Turn struct {
	TurnNumber int    `json:"turn_number"`
	Slogan     string `json:"slogan"`
	// Feedback is the review, nil when the turn was approved.
	Feedback  *string   `json:"feedback"`
	Approved  bool      `json:"approved"`
	Reviewer  string    `json:"reviewer"`
	Timestamp time.Time `json:"timestamp"`
}

// State is the slogan workflow's state (seed 004's IterationSession).
type State struct {
	UserInput     string `json:"user_input"`
	ModelName     string `json:"model_name,omitempty"`
	MaxTurns      int    `json:"max_turns"`
	HumanReviewer bool   `json:"human_reviewer,omitempty"`
	Turns         []Turn `json:"turns"`
	TurnCount     int    `json:"turn_count"`
	// The turn in progress: the writer's slogan, the review and whether
	// it approves.
	CurrentSlogan   string `json:"current_slogan,omitempty"`
	CurrentReview   string `json:"current_review,omitempty"`
	CurrentApproved bool   `json:"current_approved,omitempty"`
	CurrentReviewer string `json:"current_reviewer,omitempty"`
	// Feedback is the last review, for the writer's next turn.
	Feedback         string     `json:"feedback,omitempty"`
	FinalSlogan      string     `json:"final_slogan,omitempty"`
	CompletionReason string     `json:"completion_reason,omitempty"`
	CompletedAt      *time.Time `json:"completed_at,omitempty"`
}

// Input is the workflow's input: the product or service to write for.
type Input struct {
	UserInput string `json:"user_input"`
}

// InputSchema is the JSON Schema of Input.
var InputSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "title": "Slogan",
  "additionalProperties": false,
  "required": ["user_input"],
  "properties": {
    "user_input": {"type": "string", "minLength": 1, "maxLength": 4096, "title": "Product or service",
      "description": "What the slogan is for, e.g. \"eco-friendly water bottles\"."}
  }
}`)

// OptionsSchema is the JSON Schema of the task options the workflow reads.
var OptionsSchema = json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "max_turns": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5, "title": "Turns at most"},
    "human_reviewer": {"type": "boolean", "default": false, "title": "A human reviews each slogan"}
  }
}`)

// ParseInput decodes and checks a task's input. Errors:
// *graph.ValidationError naming the field (input.user_input, …).
func ParseInput(raw json.RawMessage) (Input, error) {
	var in Input
	if err := agent.Decode(raw, &in, "input", "the slogan input", "user_input"); err != nil {
		return in, err
	}
	var err error
	in.UserInput, err = agent.Text("input.user_input", in.UserInput, true, MaxUserInput)
	return in, err
}

// Options are the task options the workflow reads.
type Options struct {
	Gates         json.RawMessage `json:"gates,omitempty"`
	MaxTurns      *int            `json:"max_turns,omitempty"`
	HumanReviewer *bool           `json:"human_reviewer,omitempty"`
}

// Option configures the workflow.
type Option func(*config)

type config struct {
	retry    graph.RetryPolicy
	timeout  time.Duration
	maxTurns int
	now      func() time.Time
}

// WithRetry sets the LLM nodes' retry policy (default DefaultRetry).
func WithRetry(p graph.RetryPolicy) Option { return func(c *config) { c.retry = p } }

// WithTimeout bounds each try of an LLM node (default DefaultTimeout; 0
// or less: none).
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithMaxTurns sets max_turns for tasks that do not set it (default
// DefaultMaxTurns; main passes OLLAMA_MAX_TURNS).
func WithMaxTurns(n int) Option { return func(c *config) { c.maxTurns = n } }

// WithClock sets the clock of the turn timestamps (tests).
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

type workflow struct {
	p   llm.Provider
	cfg config
}

// New compiles the slogan workflow; writer and reviewer ask p.
func New(p llm.Provider, opts ...Option) (*graph.Graph[State], error) {
	if p == nil {
		return nil, errors.New("slogan: nil llm.Provider")
	}
	w := &workflow{p: p, cfg: config{retry: DefaultRetry, timeout: DefaultTimeout, maxTurns: DefaultMaxTurns, now: time.Now}}
	for _, o := range opts {
		o(&w.cfg)
	}
	if w.cfg.maxTurns < 1 || w.cfg.maxTurns > MaxMaxTurns {
		return nil, fmt.Errorf("slogan: max turns %d is not between 1 and %d", w.cfg.maxTurns, MaxMaxTurns)
	}
	llmNode := func(desc string) []graph.NodeOption {
		o := []graph.NodeOption{graph.WithRetry(w.cfg.retry), graph.WithDescription(desc)}
		if w.cfg.timeout > 0 {
			o = append(o, graph.WithTimeout(w.cfg.timeout))
		}
		return o
	}
	return graph.New[State](Name).
		StateVersion(StateVersion).
		Describe("Slogan", "A writer and a reviewer refine a slogan until the reviewer says SHIP IT! or the turns run out.").
		Deliverable(ArtifactSlogan).
		Raises(InterruptReview).
		Node(NodeWriter, w.writer, llmNode("The writer proposes a slogan (slogan.txt), using the last review as feedback.")...).
		Node(NodeReviewer, w.reviewer, llmNode("The reviewer (an LLM, or a human with human_reviewer) reviews it (review.txt).")...).
		Node(NodeDecide, w.decide, graph.WithDescription("Records the turn; approved when the review says SHIP IT!, else another turn until max_turns.")).
		Edge(NodeWriter, NodeReviewer).
		Edge(NodeReviewer, NodeDecide).
		Route(NodeDecide, next, NodeWriter+"=another turn", graph.END+"=approved or max_turns").
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
	if err := agent.Gates(Name, opts); err != nil {
		return State{}, err
	}
	var o Options
	if err := agent.Decode(opts.Raw, &o, "options", "the slogan options", "max_turns", "human_reviewer"); err != nil {
		return State{}, err
	}
	maxTurns, err := agent.IntOption("options.max_turns", o.MaxTurns, w.cfg.maxTurns, 1, MaxMaxTurns)
	if err != nil {
		return State{}, err
	}
	return State{UserInput: in.UserInput, MaxTurns: maxTurns, HumanReviewer: o.HumanReviewer != nil && *o.HumanReviewer,
		Turns: []Turn{}}, nil
}

func next(s State) string {
	if s.CompletionReason != "" {
		return graph.END
	}
	return NodeWriter
}

// Result is what a succeeded slogan task reports.
type Result struct {
	FinalSlogan      string `json:"final_slogan"`
	CompletionReason string `json:"completion_reason"`
	TurnCount        int    `json:"turn_count"`
	MaxTurns         int    `json:"max_turns"`
	ModelName        string `json:"model_name,omitempty"`
	Turns            []Turn `json:"turns"`
}

func result(s State) any {
	return Result{FinalSlogan: s.FinalSlogan, CompletionReason: s.CompletionReason, TurnCount: s.TurnCount,
		MaxTurns: s.MaxTurns, ModelName: s.ModelName, Turns: s.Turns}
}

// CompletionReason is the completion reason of a slogan task in status
// with result: the result's for a succeeded task (approved, max_turns),
// error for a failed one, cancelled for a cancelled one, "" while it runs.
func CompletionReason(status graph.TaskStatus, result json.RawMessage) string {
	switch status {
	case graph.StatusSucceeded:
		var r struct {
			Reason string `json:"completion_reason"`
		}
		_ = json.Unmarshal(result, &r)
		return r.Reason
	case graph.StatusFailed:
		return ReasonError
	case graph.StatusCancelled:
		return ReasonCancelled
	}
	return ""
}

// shipIt is seed 004's approval signal.
var shipIt = regexp.MustCompile(`(?i)\bSHIP IT!?\b`)

// negations are the words that negate a "ship it" among the three words
// before it ("not ready to ship it"). "no" is not one: "no notes, so ship
// it" approves.
var negations = []string{"not", "never", "nor", "don't", "dont", "doesn't", "didn't", "can't", "cannot",
	"cant", "won't", "wont", "wouldn't", "shouldn't", "couldn't", "mustn't", "isn't", "aren't", "shan't"}

// IsApproved is the SHIP IT rule (see the package comment): true when the
// review has a match of `\bSHIP IT!?\b` (case-insensitive) that is neither
// negated within its clause nor a question.
func IsApproved(review string) bool {
	for _, loc := range shipIt.FindAllStringIndex(review, -1) {
		if !negated(review[:loc[0]]) && !asked(review[loc[1]:]) {
			return true
		}
	}
	return false
}

// negated reports whether one of the last three words of the clause that
// before ends with is a negation.
func negated(before string) bool {
	before = strings.NewReplacer("’", "'", "‘", "'").Replace(strings.ToLower(before))
	if i := strings.LastIndexAny(before, ".!?;:,()\n—–\""); i >= 0 {
		before = before[i+1:]
	}
	words := strings.Fields(before)
	if len(words) > 3 {
		words = words[len(words)-3:]
	}
	for _, w := range words {
		if slices.Contains(negations, strings.Trim(w, "*_'")) {
			return true
		}
	}
	return false
}

// asked reports whether after starts with a question mark.
func asked(after string) bool {
	return strings.HasPrefix(strings.TrimLeft(after, " !"), "?")
}

// --- nodes ---

func (w *workflow) writer(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	turn := len(s.Turns) + 1
	var fb []string
	if s.Feedback != "" {
		fb = []string{s.Feedback}
	}
	resp, err := agent.AskAnswering(ctx, w.p, run, RoleWriter, writerPrompt(s.UserInput, s.Feedback), s.UserInput, fb)
	if err != nil {
		return s, fmt.Errorf("turn %d: %w", turn, err)
	}
	s.CurrentSlogan = cleanSlogan(resp.Text)
	if s.CurrentSlogan == "" {
		return s, fmt.Errorf("turn %d: %s: the writer's reply holds no slogan", turn, run.Node)
	}
	if resp.Model != "" {
		s.ModelName = resp.Model
	}
	s.CurrentReview, s.CurrentApproved, s.CurrentReviewer = "", false, ""
	run.Artifact(ArtifactSlogan, "text/plain", s.CurrentSlogan)
	return s, nil
}

func (w *workflow) reviewer(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	turn := len(s.Turns) + 1
	if s.HumanReviewer {
		ans, err := run.Ask(graph.Question{
			Kind:     InterruptReview,
			Title:    fmt.Sprintf("Review the slogan for %s (turn %d of %d)", agent.Excerpt(s.UserInput, 60), turn, s.MaxTurns),
			Text:     "Approve to ship this slogan, or reject it with feedback: the writer answers it on the next turn.",
			Artifact: &graph.ArtifactRef{Name: ArtifactSlogan, ContentType: "text/plain", Content: s.CurrentSlogan},
			Actions:  []string{graph.ActionApprove, graph.ActionReject, graph.ActionRespond},
		})
		if err != nil {
			return s, err
		}
		text := strings.TrimSpace(ans.Text)
		switch ans.Action {
		case graph.ActionApprove:
			if text == "" {
				text = "SHIP IT!"
			}
			s.CurrentApproved = true
		case graph.ActionReject:
			s.CurrentApproved = false
		default:
			s.CurrentApproved = IsApproved(text)
		}
		s.CurrentReview, s.CurrentReviewer = text, ReviewerHuman
	} else {
		resp, err := agent.Ask(ctx, w.p, run, RoleReviewer, reviewerPrompt(s.UserInput, s.CurrentSlogan), s.UserInput)
		if err != nil {
			return s, fmt.Errorf("turn %d: %w", turn, err)
		}
		s.CurrentReview = strings.TrimSpace(resp.Text)
		s.CurrentApproved, s.CurrentReviewer = IsApproved(s.CurrentReview), ReviewerLLM
	}
	run.Artifact(ArtifactReview, "text/plain", s.CurrentReview)
	return s, nil
}

func (w *workflow) decide(_ context.Context, _ *graph.NodeRun, s State) (State, error) {
	turn := len(s.Turns) + 1
	t := Turn{TurnNumber: turn, Slogan: s.CurrentSlogan, Approved: s.CurrentApproved, Reviewer: s.CurrentReviewer,
		Timestamp: w.cfg.now().UTC()}
	if !t.Approved {
		fb := s.CurrentReview
		t.Feedback = &fb
	}
	s.Turns = append(slices.Clone(s.Turns), t)
	s.TurnCount = turn
	switch {
	case t.Approved:
		s.CompletionReason = ReasonApproved
	case turn >= s.MaxTurns:
		s.CompletionReason = ReasonMaxTurns
	default:
		s.Feedback = s.CurrentReview
	}
	if s.CompletionReason != "" {
		s.FinalSlogan = s.CurrentSlogan
		done := t.Timestamp
		s.CompletedAt = &done
		s.Feedback = ""
	}
	s.CurrentSlogan, s.CurrentReview, s.CurrentApproved, s.CurrentReviewer = "", "", false, ""
	return s, nil
}

// cleanSlogan trims a writer's reply to the slogan: no code fence, no
// surrounding quotes, no "Slogan:" label.
func cleanSlogan(reply string) string {
	s := strings.TrimSpace(agent.StripFences(reply))
	if label, rest, ok := strings.Cut(s, ":"); ok && strings.EqualFold(strings.TrimSpace(label), "slogan") {
		s = strings.TrimSpace(rest)
	}
	for _, q := range [][2]string{{`"`, `"`}, {"“", "”"}, {"'", "'"}, {"*", "*"}} {
		if len(s) > len(q[0])+len(q[1]) && strings.HasPrefix(s, q[0]) && strings.HasSuffix(s, q[1]) {
			s = strings.TrimSpace(s[len(q[0]) : len(s)-len(q[1])])
		}
	}
	return s
}

// writerPrompt is seed 004's _create_writer_prompt with its instructions.
func writerPrompt(userInput, feedback string) string {
	var sb strings.Builder
	sb.WriteString("You are a copywriter (role " + RoleWriter + "). Write one short, memorable slogan. " +
		"Reply with the slogan only: no quotes, no explanation.\n\n")
	if feedback == "" {
		fmt.Fprintf(&sb, "Create a slogan for: %s\n", userInput)
	} else {
		fmt.Fprintf(&sb, "Create a slogan for: %s\n\nPrevious feedback:\n%s\n\nPlease improve based on the feedback.\n", userInput, feedback)
	}
	return sb.String()
}

// reviewerPrompt is seed 004's _create_reviewer_prompt with its instructions.
func reviewerPrompt(userInput, slogan string) string {
	return "You are a demanding marketing reviewer (role " + RoleReviewer + "). If the slogan is ready to use, " +
		"reply with exactly: SHIP IT!\nOtherwise reply with short, specific feedback for the writer, and do not " +
		"use the words \"ship it\" at all.\n\n" +
		"The slogan is for: " + userInput + "\n\n" +
		"Please review this slogan: " + slogan + "\n"
}
