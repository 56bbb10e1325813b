package feature

import (
	"context"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm"
)

// LLMExecutor returns the Executor that asks p: each call becomes one
// llm.Request with the same role, prompt, task and iteration. A
// *llm.ConfigError (unknown model, refused key, a role nothing answers) is
// marked graph.Permanent, so the node fails at once instead of retrying;
// any other error is left to the node's retry policy.
func LLMExecutor(p llm.Provider) Executor { return llmExecutor{p: p} }

type llmExecutor struct{ p llm.Provider }

var _ Executor = llmExecutor{}

// Execute implements Executor.
func (e llmExecutor) Execute(ctx context.Context, req Request) (Reply, error) {
	resp, err := e.p.Complete(ctx, llmRequest(req))
	rep := Reply{Text: resp.Text, Model: resp.Model, PromptTokens: resp.PromptTokens,
		ReplyTokens: resp.ReplyTokens, Duration: resp.Duration}
	if err != nil && llm.IsConfig(err) {
		err = graph.Permanent(err)
	}
	return rep, err
}

// llmRequest maps a feature call to a provider request.
func llmRequest(req Request) llm.Request {
	return llm.Request{Role: req.Role, Prompt: req.Prompt, TaskID: req.TaskID, Iteration: req.Iteration, Subject: req.Subject, Feedback: req.Feedback}
}

// BuiltinReply is DefaultReply with ok false for a role that is not one of
// the workflow's.
func BuiltinReply(role, description string) (reply string, ok bool) {
	return Builtin(role, description, nil)
}

// Builtin is Revision in the shape of the scripted provider's Defaults: ok
// is false for a role that is not one of the workflow's.
func Builtin(role, description string, feedback []string) (reply string, ok bool) {
	reply = Revision(role, description, feedback)
	return reply, reply != ""
}
