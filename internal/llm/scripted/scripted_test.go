package scripted_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/llm/scripted"
)

// defaults knows the roles of a made-up "demo" workflow.
func defaults(role, subject string, feedback []string) (string, bool) {
	switch role {
	case "demo.writer":
		if len(feedback) > 0 {
			return "A slogan about " + subject + ", answering " + strings.Join(feedback, "; "), true
		}
		return "A slogan about " + subject, true
	case "demo.reviewer":
		return "SHIP IT!", true
	}
	return "", false
}

func script(t *testing.T, src string) *scripted.Script {
	t.Helper()
	s, err := scripted.ParseScript(strings.NewReader(src), "script.json")
	if err != nil {
		t.Fatalf("ParseScript: %v", err)
	}
	return s
}

func complete(t *testing.T, p llm.Provider, req llm.Request) llm.Response {
	t.Helper()
	resp, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatalf("Complete(%+v): %v", req, err)
	}
	return resp
}

func TestProviderRepliesPerIteration(t *testing.T) {
	t.Parallel()
	p := scripted.New(defaults, script(t, `{"roles": {"demo.reviewer": ["Too vague.", "Better.", "SHIP IT!"]}}`))
	for _, tc := range []struct {
		name      string
		iteration int
		want      string
	}{
		{"First", 1, "Too vague."},
		{"Second", 2, "Better."},
		{"Third", 3, "SHIP IT!"},
		{"LastRepeats", 4, "SHIP IT!"},
		{"LastRepeatsFarOut", 99, "SHIP IT!"},
		{"ZeroIsFirst", 0, "Too vague."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := complete(t, p, llm.Request{Role: "demo.reviewer", Prompt: "Review it.", TaskID: "t1", Iteration: tc.iteration})
			if resp.Text != tc.want {
				t.Errorf("reply = %q, want %q", resp.Text, tc.want)
			}
		})
	}
}

func TestProviderIsDeterministicAcrossInstances(t *testing.T) {
	t.Parallel()
	src := `{"roles": {"demo.reviewer": ["a", "b"]}}`
	// Two providers stand for two processes: a task resumed elsewhere, in
	// any order of calls, gets the same replies.
	first, second := scripted.New(defaults, script(t, src)), scripted.New(defaults, script(t, src))
	for _, it := range []int{2, 1, 2, 3, 1} {
		req := llm.Request{Role: "demo.reviewer", TaskID: "t1", Iteration: it}
		if a, b := complete(t, first, req).Text, complete(t, second, req).Text; a != b {
			t.Errorf("iteration %d: %q vs %q", it, a, b)
		}
	}
	// Other tasks do not shift a task's replies.
	complete(t, first, llm.Request{Role: "demo.reviewer", TaskID: "t2", Iteration: 1})
	if got := complete(t, first, llm.Request{Role: "demo.reviewer", TaskID: "t1", Iteration: 1}).Text; got != "a" {
		t.Errorf("t1 iteration 1 = %q after another task's call", got)
	}
}

func TestProviderDefaults(t *testing.T) {
	t.Parallel()
	p := scripted.New(defaults, script(t, `{"roles": {"demo.reviewer": ["Too vague."]}}`))
	resp := complete(t, p, llm.Request{Role: "demo.writer", Prompt: "Write a slogan, please.", Iteration: 3, Subject: "tea"})
	if resp.Text != "A slogan about tea" {
		t.Errorf("reply = %q, want the default for the subject", resp.Text)
	}
	if resp.Model != scripted.Model || resp.PromptTokens != 4 || resp.ReplyTokens != 4 {
		t.Errorf("response = %+v, want model %s and 4/4 words", resp, scripted.Model)
	}
	if p.Name() != "scripted" {
		t.Errorf("Name = %q", p.Name())
	}

	// No script at all: defaults only.
	if got := complete(t, scripted.New(defaults, nil), llm.Request{Role: "demo.reviewer"}).Text; got != "SHIP IT!" {
		t.Errorf("without a script: %q", got)
	}
}

func TestProviderPassesFeedbackToDefaults(t *testing.T) {
	t.Parallel()
	p := scripted.New(defaults, nil)
	got := complete(t, p, llm.Request{Role: "demo.writer", Subject: "tea", Iteration: 2, Feedback: []string{"mention mornings"}}).Text
	if got != "A slogan about tea, answering mention mornings" {
		t.Errorf("reply = %q, want the default answering the feedback", got)
	}
	// A scripted reply wins over feedback: the script is what the user asked for.
	p = scripted.New(defaults, script(t, `{"roles": {"demo.writer": ["fixed"]}}`))
	if got := complete(t, p, llm.Request{Role: "demo.writer", Feedback: []string{"x"}}).Text; got != "fixed" {
		t.Errorf("scripted reply = %q, want fixed", got)
	}
}

func TestProviderChain(t *testing.T) {
	t.Parallel()
	other := func(role, subject string, _ []string) (string, bool) {
		return "other " + role, role == "pm.planner" || role == "demo.writer"
	}
	p := scripted.New(scripted.Chain(nil, defaults, other), nil)
	if got := complete(t, p, llm.Request{Role: "pm.planner"}).Text; got != "other pm.planner" {
		t.Errorf("pm.planner = %q", got)
	}
	if got := complete(t, p, llm.Request{Role: "demo.writer", Subject: "x"}).Text; got != "A slogan about x" {
		t.Errorf("demo.writer = %q, want the first Defaults that knows it", got)
	}
}

func TestProviderUnknownRole(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		defaults scripted.Defaults
	}{
		{"UnknownToDefaults", defaults},
		{"NoDefaults", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := scripted.New(tc.defaults, script(t, `{"roles": {"demo.reviewer": ["x"]}}`))
			_, err := p.Complete(context.Background(), llm.Request{Role: "sdd.architect", Iteration: 1})
			var ce *llm.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v (%T), want *llm.ConfigError", err, err)
			}
			if !strings.Contains(err.Error(), `"sdd.architect"`) || ce.Setting != "LLM_SCRIPT_FILE" {
				t.Errorf("err = %q, want it to name the role and the setting", err)
			}
			if llm.IsTransient(err) {
				t.Error("an unknown role is reported transient")
			}
		})
	}
}

func TestProviderUnknownRoles(t *testing.T) {
	t.Parallel()
	p := scripted.New(defaults, script(t, `{"roles": {"demo.reviewer": ["x"], "demo.reveiwer": ["y"]}}`))
	if got := p.UnknownRoles(); len(got) != 1 || got[0] != "demo.reveiwer" {
		t.Errorf("UnknownRoles = %q", got)
	}
}

func TestProviderDelay(t *testing.T) {
	t.Parallel()
	p := scripted.New(defaults, script(t, `{"delay": "30ms", "delays": {"demo.writer": "1h", "demo.reviewer": "0s"}}`))

	t.Run("WaitsAndMeasures", func(t *testing.T) {
		t.Parallel()
		p := scripted.New(func(string, string, []string) (string, bool) { return "ok", true }, script(t, `{"delay": "30ms"}`))
		start := time.Now()
		resp := complete(t, p, llm.Request{Role: "any.role"})
		if el := time.Since(start); el < 30*time.Millisecond || resp.Duration < 30*time.Millisecond {
			t.Errorf("call took %s (reported %s), want ≥ 30ms", el, resp.Duration)
		}
	})
	t.Run("PerRoleOverride", func(t *testing.T) {
		t.Parallel()
		if _, err := p.Complete(context.Background(), llm.Request{Role: "demo.reviewer"}); err != nil {
			t.Errorf("zero-delay role: %v", err)
		}
	})
	t.Run("HonoursCancellation", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		start := time.Now()
		resp, err := p.Complete(ctx, llm.Request{Role: "demo.writer", Subject: "x"})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the context's deadline", err)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("returned after %s, want soon after the deadline", el)
		}
		if resp.Text != "" || !strings.Contains(err.Error(), "demo.writer") {
			t.Errorf("resp = %+v, err = %v", resp, err)
		}
	})
	t.Run("CancelledBeforehand", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := p.Complete(ctx, llm.Request{Role: "demo.reviewer"}); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
}
