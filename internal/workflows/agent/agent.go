// Package agent is what Gatehouse's LLM-backed workflows share: one
// provider call made on behalf of a node run and recorded as an llm.call
// event (SPEC §6: role, model, prompt, reply, duration, tokens; each text
// cut at 64 KiB), the way a reply's error is classified for the node's
// retry policy, and small readers of model output (fenced blocks, JSON
// objects).
//
// It imports graph and llm only: no storage, no HTTP.
package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm"
)

// MaxEventText is where the prompt and the reply are cut in an llm.call
// event.
const MaxEventText = 64 << 10

// Call is one LLM call as its llm.call event records it.
type Call struct {
	Role string
	// Provider is the provider's name ("scripted", "ollama", …); empty
	// when the caller does not know it.
	Provider     string
	Model        string
	Prompt       string
	Reply        string
	Duration     time.Duration
	PromptTokens int
	ReplyTokens  int
	// Err is the call's failure, if any.
	Err error
}

// Record adds c to run as an llm.call event: role, provider, model,
// prompt and reply (each cut at MaxEventText, with prompt_truncated /
// reply_truncated set when cut), duration_ms, prompt_tokens, reply_tokens,
// the node run's attempt, and error when the call failed.
func Record(run *graph.NodeRun, c Call) {
	p, pCut := Cut(c.Prompt, MaxEventText)
	r, rCut := Cut(c.Reply, MaxEventText)
	data := map[string]any{
		"role": c.Role, "model": c.Model, "prompt": p, "reply": r,
		"duration_ms": c.Duration.Milliseconds(), "prompt_tokens": c.PromptTokens, "reply_tokens": c.ReplyTokens,
		"attempt": run.Attempt,
	}
	if c.Provider != "" {
		data["provider"] = c.Provider
	}
	if pCut {
		data["prompt_truncated"] = true
	}
	if rCut {
		data["reply_truncated"] = true
	}
	if c.Err != nil {
		data["error"] = c.Err.Error()
	}
	run.Event(graph.EventLLMCall, data)
}

// Ask makes one call of role to p on behalf of run and records it (also
// when it fails). subject is the text the scripted provider varies its
// built-in replies by (the task's main input, or what this call is about).
//
// Errors, all naming the node and the role: a *llm.ConfigError marked
// graph.Permanent (retrying cannot help: the node fails at once); the
// provider's other errors as they are (the node's retry policy decides);
// an empty reply (worth another try: usually a hiccup of the model).
func Ask(ctx context.Context, p llm.Provider, run *graph.NodeRun, role, prompt, subject string) (llm.Response, error) {
	return AskAnswering(ctx, p, run, role, prompt, subject, nil)
}

// AskAnswering is Ask for a call that must answer feedback (a rejection, a
// failed verification, the human's answers; oldest first). The prompt
// carries it for real models; llm.Request.Feedback carries it for the
// scripted provider, whose built-in replies then answer it visibly.
func AskAnswering(ctx context.Context, p llm.Provider, run *graph.NodeRun, role, prompt, subject string, feedback []string) (llm.Response, error) {
	req := llm.Request{Role: role, Prompt: prompt, TaskID: run.TaskID, Iteration: run.Iteration, Subject: subject, Feedback: feedback}
	start := time.Now()
	resp, err := p.Complete(ctx, req)
	if resp.Duration <= 0 {
		resp.Duration = time.Since(start)
	}
	Record(run, Call{Role: role, Provider: p.Name(), Model: resp.Model, Prompt: prompt, Reply: resp.Text,
		Duration: resp.Duration, PromptTokens: resp.PromptTokens, ReplyTokens: resp.ReplyTokens, Err: err})
	if err != nil {
		err = fmt.Errorf("%s: %s call failed: %w", run.Node, role, err)
		if llm.IsConfig(err) {
			err = graph.Permanent(err)
		}
		return resp, err
	}
	if strings.TrimSpace(resp.Text) == "" {
		return resp, fmt.Errorf("%s: %s returned an empty reply", run.Node, role)
	}
	return resp, nil
}

// Cut shortens s to at most n bytes without splitting a UTF-8 sequence; it
// reports whether it cut.
func Cut(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], true
}

// StripFences returns the body of text when text is one fenced code block
// (```lang … ```), else text unchanged.
func StripFences(text string) string {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return text
	}
	nl := strings.IndexByte(t, '\n')
	if nl < 0 {
		return text
	}
	body := t[nl+1 : len(t)-3]
	if strings.Contains(body, "```") {
		return text // several blocks: not one fenced document
	}
	return strings.TrimRight(body, " \t\n") + "\n"
}

// ErrNoJSONObject is returned by JSONObject for a reply with no {…} in it.
var ErrNoJSONObject = errors.New("no JSON object in the reply")

// JSONObject finds the JSON object in a model's reply: the whole reply, the
// body of its one fenced block, or the text from its first '{' to its last
// '}' (models like to add a sentence around it). It returns that text; the
// caller decodes it and reports decoding errors.
func JSONObject(reply string) (string, error) {
	t := strings.TrimSpace(StripFences(reply))
	i, j := strings.IndexByte(t, '{'), strings.LastIndexByte(t, '}')
	if i < 0 || j < i {
		return "", ErrNoJSONObject
	}
	return t[i : j+1], nil
}

// Excerpt is s on one line, cut at n characters with "…" when longer: for
// titles and error messages.
func Excerpt(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n])) + "…"
}
