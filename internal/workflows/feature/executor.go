package feature

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
)

// The agent roles of the feature workflow (SPEC §9), one per producer node.
const (
	RoleAnalyze      = "feature.analyze"
	RoleRequirements = "feature.requirements"
	RoleResearch     = "feature.research"
	RolePlan         = "feature.plan"
	RoleImplement    = "feature.implement"
	RoleMerge        = "feature.merge"
)

// Roles lists the agent roles in graph order.
func Roles() []string {
	return []string{RoleAnalyze, RoleRequirements, RoleResearch, RolePlan, RoleImplement, RoleMerge}
}

// Executor runs one agent call. It is the seam an LLM-backed (or scripted,
// or stub) implementation plugs into. Each producer node run makes exactly
// one call; validators make none. Implementations must honour ctx (the node's
// timeout and the task's cancellation) and be safe for concurrent use.
type Executor interface {
	Execute(ctx context.Context, req Request) (Reply, error)
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, req Request) (Reply, error)

// Execute implements Executor.
func (f ExecutorFunc) Execute(ctx context.Context, req Request) (Reply, error) { return f(ctx, req) }

// Request is one agent call.
type Request struct {
	// Role is the agent role, e.g. "feature.requirements".
	Role string
	// Prompt is the full prompt text.
	Prompt string
	// TaskID and Iteration identify the node run making the call (a
	// scripted executor keys its canned replies per task).
	TaskID    string
	Iteration int
	// Subject is the feature request's description: a scripted executor
	// varies its replies by it.
	Subject string
	// Feedback is the review feedback this call must answer, oldest first
	// (the prompt carries it too).
	Feedback []string
}

// Reply is an agent's answer.
type Reply struct {
	Text         string
	Model        string
	PromptTokens int
	ReplyTokens  int
	// Duration of the call; when zero the node measures it.
	Duration time.Duration
}

// MaxEventText is where the prompt and the reply are cut in an llm.call event.
const MaxEventText = agent.MaxEventText

// cut shortens s to at most n bytes without splitting a UTF-8 sequence.
func cut(s string, n int) (string, bool) { return agent.Cut(s, n) }

// call makes the node run's one executor call and records it as an
// llm.call event (also when it fails).
func (w *workflow) call(ctx context.Context, run *graph.NodeRun, s State, role, prompt string) (Reply, error) {
	req := Request{Role: role, Prompt: prompt, TaskID: run.TaskID, Iteration: run.Iteration, Subject: s.Description,
		Feedback: feedbackFor(s, role)}
	start := time.Now()
	rep, err := w.exec.Execute(ctx, req)
	dur := rep.Duration
	if dur <= 0 {
		dur = time.Since(start)
	}
	agent.Record(run, agent.Call{Role: role, Model: rep.Model, Prompt: prompt, Reply: rep.Text, Duration: dur,
		PromptTokens: rep.PromptTokens, ReplyTokens: rep.ReplyTokens, Err: err})
	if err != nil {
		return rep, fmt.Errorf("%s: %s call failed: %w", run.Node, role, err)
	}
	if strings.TrimSpace(rep.Text) == "" {
		// Worth another try: a model's empty answer is usually a hiccup.
		return rep, fmt.Errorf("%s: %s returned an empty reply", run.Node, role)
	}
	return rep, nil
}

// feedbackFor is the rejection feedback role's call answers: the same
// entries its prompt lists (every rejection for requirements, whose
// spec.yaml carries them all; the plan's and the merge's own otherwise).
// The plan answers the requirements the PRD's rejections added too (its
// prompt carries them in spec.yaml): each as "FR-n: feedback", numbered
// as the requirements reply numbers them (FR-4 on, one per rejection).
func feedbackFor(s State, role string) []string {
	var phase string
	switch role {
	case RoleRequirements:
	case RolePlan:
		phase = NodePlan
	case RoleMerge:
		phase = NodeMerge
	default:
		return nil
	}
	var out []string
	for i, f := range s.Feedback {
		switch {
		case phase == "" || f.Phase == phase:
			out = append(out, f.Feedback)
		case role == RolePlan && f.Phase == NodeRequirements:
			out = append(out, fmt.Sprintf("%s%d: %s", requirementPrefix, firstAddedRequirement+i, f.Feedback))
		}
	}
	return out
}

// requirementPrefix and firstAddedRequirement name the requirements a
// PRD's rejections add: FR-4, FR-5, …
const (
	requirementPrefix     = "FR-"
	firstAddedRequirement = 4
)
