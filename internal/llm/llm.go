// Package llm is the language-model seam every workflow calls through: a
// small Provider interface, the request and response it exchanges, and the
// errors providers return so callers can tell a setting that is wrong (do
// not retry) from a hiccup (retry). It imports nothing of the project.
//
// Implementations live in subpackages: scripted (offline, deterministic),
// ollama (/api/chat) and openai (any OpenAI-compatible /chat/completions).
// The HTTP ones share RetryPolicy, Retry and HTTPPost from this package.
//
// It imports nothing of the project.
package llm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Request is one completion a workflow asks for.
type Request struct {
	// Role is the agent role, "<workflow>.<role>" (e.g. "feature.plan").
	Role string
	// Prompt is the full prompt text.
	Prompt string
	// TaskID and Iteration identify the node run making the call;
	// Iteration is 1-based and grows each time the node runs again
	// (not on retries of the same run).
	TaskID    string
	Iteration int
	// Subject is the task's main input text (e.g. the feature
	// description). Real models ignore it (the prompt carries it); the
	// scripted provider varies its built-in replies with it.
	Subject string
	// Feedback is what this call must answer, oldest first: a reviewer's
	// rejections, a failed verification, the human's answers. Real models
	// read it in the prompt; the scripted provider's built-in replies
	// answer it visibly, so a rejection in the demo changes the document.
	Feedback []string
}

// Response is a provider's answer.
type Response struct {
	Text  string
	Model string
	// PromptTokens and ReplyTokens are the provider's counts (or an
	// estimate when it reports none).
	PromptTokens int
	ReplyTokens  int
	// Duration is how long the call took.
	Duration time.Duration
}

// Provider completes prompts. Implementations must honour ctx and be safe
// for concurrent use.
//
// Complete returns *ConfigError when retrying cannot help (unknown model,
// rejected key, a role with no reply), an error marked with Transient when
// it can (timeouts, 429, 5xx, refused connections), and ctx's error (wrapped)
// when ctx ends first.
type Provider interface {
	// Name is the provider's setting value: "scripted", "ollama", "openai".
	Name() string
	Complete(ctx context.Context, req Request) (Response, error)
}

// ConfigError is a failure caused by the configuration, not by chance: a
// model that does not exist, a key the server refuses, a role nothing can
// answer. Retrying does not help; a person must change a setting.
type ConfigError struct {
	// Provider is the provider's Name.
	Provider string
	// Setting names what to change (an environment variable such as
	// "OPENAI_API_KEY"), when known.
	Setting string
	// Message says what is wrong.
	Message string
	// Err is the underlying error, if any.
	Err error
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	if e.Setting != "" {
		b.WriteString(" (" + e.Setting + ")")
	}
	b.WriteString(": " + e.Message)
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *ConfigError) Unwrap() error { return e.Err }

// IsConfig reports whether err is, or wraps, a *ConfigError.
func IsConfig(err error) bool {
	var ce *ConfigError
	return errors.As(err, &ce)
}

// TransientError is a failure worth retrying: the same request may succeed
// later. RetryAfter is the server's hint (0 when it gave none).
type TransientError struct {
	Err        error
	RetryAfter time.Duration
}

func (e *TransientError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("%v (retry after %s)", e.Err, e.RetryAfter)
	}
	return e.Err.Error()
}

func (e *TransientError) Unwrap() error { return e.Err }

// Transient marks err as worth retrying (nil stays nil).
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &TransientError{Err: err}
}

// IsTransient reports whether err was marked with Transient (or is a
// *TransientError). A *ConfigError is never transient, even when wrapped in
// one.
func IsTransient(err error) bool {
	if IsConfig(err) {
		return false
	}
	var te *TransientError
	return errors.As(err, &te)
}
