// Package scripted is the offline, deterministic llm.Provider (SPEC §6,
// "The scripted LLM"). Each role answers with the script's replies when
// LLM_SCRIPT_FILE lists it, in order per task (the n-th node run of the
// role gets the n-th reply, the last one repeating), else with the built-in
// reply its workflow supplies. Replies derive from the request alone (role,
// iteration, subject), never from counters in memory, so a task resumed by
// another process or replica gets the same answers.
package scripted

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gatehousehq/gatehouse/internal/llm"
)

const (
	// Name is the provider's name (the LLM_PROVIDER value).
	Name = "scripted"
	// Model is reported in every response.
	Model = "scripted-v1"
)

// Defaults returns the built-in reply of role for a task whose main input
// is subject, answering feedback (oldest first; none on a first run); ok is
// false when it does not know role. Each workflow supplies its own
// (feature.Builtin, …); Chain combines them.
type Defaults func(role, subject string, feedback []string) (reply string, ok bool)

// Chain returns Defaults asking each of ds in turn; the first that knows
// the role answers. Nil entries are skipped.
func Chain(ds ...Defaults) Defaults {
	return func(role, subject string, feedback []string) (string, bool) {
		for _, d := range ds {
			if d == nil {
				continue
			}
			if text, ok := d(role, subject, feedback); ok {
				return text, true
			}
		}
		return "", false
	}
}

// Provider is the scripted llm.Provider. It holds no mutable state and is
// safe for concurrent use.
type Provider struct {
	defaults Defaults
	script   *Script
}

var _ llm.Provider = (*Provider)(nil)

// New returns a provider answering from script (nil: none) and, for roles
// the script does not list, from defaults (nil: none).
func New(defaults Defaults, script *Script) *Provider {
	if script == nil {
		script = &Script{}
	}
	return &Provider{defaults: defaults, script: script}
}

// Name implements llm.Provider.
func (p *Provider) Name() string { return Name }

// UnknownRoles lists the roles the script names that have no built-in
// reply: usually a typo (a misspelt role is never asked for, so its replies
// would silently go unused). Main logs them as a warning.
func (p *Provider) UnknownRoles() []string {
	var out []string
	for _, r := range p.script.Roles() {
		if p.defaults == nil {
			out = append(out, r)
			continue
		}
		if _, ok := p.defaults(r, "", nil); !ok {
			out = append(out, r)
		}
	}
	return out
}

// Complete implements llm.Provider. It waits the script's delay for the
// role (returning ctx's error, wrapped, if ctx ends first), then answers.
// Errors: *llm.ConfigError for a role with neither a scripted nor a
// built-in reply; ctx's error.
func (p *Provider) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	start := time.Now()
	resp := llm.Response{Model: Model, PromptTokens: words(req.Prompt)}
	text, ok := p.script.Reply(req.Role, req.Iteration)
	if !ok && p.defaults != nil {
		text, ok = p.defaults(req.Role, req.Subject, req.Feedback)
	}
	if !ok {
		return resp, &llm.ConfigError{Provider: Name, Setting: "LLM_SCRIPT_FILE",
			Message: fmt.Sprintf("no reply for role %q: it has no built-in reply and the script does not list it", req.Role)}
	}
	if d := p.script.Delay(req.Role); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			resp.Duration = time.Since(start)
			return resp, fmt.Errorf("scripted %s: cancelled during its %s delay: %w", req.Role, d, ctx.Err())
		case <-t.C:
		}
	}
	if err := ctx.Err(); err != nil {
		resp.Duration = time.Since(start)
		return resp, fmt.Errorf("scripted %s: %w", req.Role, err)
	}
	resp.Text = text
	resp.ReplyTokens = words(text)
	resp.Duration = time.Since(start)
	return resp, nil
}

// words counts whitespace-separated words: the token count it reports.
func words(s string) int { return len(strings.Fields(s)) }
