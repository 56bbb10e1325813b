// Package openai is the llm.Provider for any OpenAI-compatible server
// (OpenAI itself, vLLM, llama.cpp, LM Studio, …): POST
// {OPENAI_BASE_URL}/chat/completions with a bearer key.
//
// Transient failures (refused connection, a request past its timeout, 429,
// 5xx) are retried with exponential backoff and jitter, honouring
// Retry-After; a refused key, an unknown model or an exhausted quota is a
// *llm.ConfigError at once, naming the setting to change.
//
// It imports internal/llm only.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gatehousehq/gatehouse/internal/llm"
)

// Name is the provider's name (the LLM_PROVIDER value).
const Name = "openai"

// Defaults.
const (
	DefaultBaseURL = "https://api.openai.com/v1"
	DefaultModel   = "gpt-4o-mini"
	DefaultTimeout = 120 * time.Second
)

// Config configures a Provider.
type Config struct {
	BaseURL string        // OPENAI_BASE_URL, up to and including /v1
	APIKey  string        // OPENAI_API_KEY; empty sends no Authorization
	Model   string        // OPENAI_MODEL
	Timeout time.Duration // OPENAI_REQUEST_TIMEOUT, per try
	// Temperature, when set, is sent; nil leaves the server's default.
	Temperature *float64
	// MaxTokens caps the reply (max_tokens); 0 leaves it to the server.
	MaxTokens int
	// Retry is the retry policy; zero fields take llm.DefaultRetry's.
	Retry llm.RetryPolicy
	// Client is the HTTP client; nil means llm.NewHTTPClient().
	Client *http.Client
	// Logger hears of retries (a warning each); nil discards.
	Logger *slog.Logger
}

// Provider is the OpenAI-compatible llm.Provider; safe for concurrent use.
type Provider struct {
	cfg Config
	url string
}

var _ llm.Provider = (*Provider)(nil)

// New returns a provider for cfg, filling the defaults.
func New(cfg Config) *Provider {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Client == nil {
		cfg.Client = llm.NewHTTPClient()
	}
	if cfg.Retry.OnRetry == nil {
		cfg.Retry.OnRetry = llm.LogRetries(cfg.Logger, Name, cfg.Model)
	}
	return &Provider{cfg: cfg, url: strings.TrimRight(cfg.BaseURL, "/") + "/chat/completions"}
}

// Name implements llm.Provider.
func (p *Provider) Name() string { return Name }

// Model is the model the provider asks for.
func (p *Provider) Model() string { return p.cfg.Model }

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model       string    `json:"model"`
	Messages    []message `json:"messages"`
	Temperature *float64  `json:"temperature,omitempty"`
	MaxTokens   int       `json:"max_tokens,omitempty"`
	Stream      bool      `json:"stream"`
}

type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message      message `json:"message"`
		FinishReason string  `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// apiError is the error body: {"error": {"message", "type", "code"}}.
type apiError struct {
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	} `json:"error"`
}

// Complete implements llm.Provider: one user message with the prompt, not
// streamed. Errors: *llm.ConfigError (key refused, unknown model, quota
// exhausted, wrong address); a transient error after the retries; ctx's
// error (wrapped).
func (p *Provider) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	start := time.Now()
	b, err := json.Marshal(chatRequest{Model: p.cfg.Model, Messages: []message{{Role: "user", Content: req.Prompt}},
		Temperature: p.cfg.Temperature, MaxTokens: p.cfg.MaxTokens})
	if err != nil {
		return llm.Response{Model: p.cfg.Model}, fmt.Errorf("openai: encode request: %w", err)
	}
	h := http.Header{}
	if p.cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+p.cfg.APIKey)
	}
	post := llm.HTTPPost{Provider: Name, Client: p.cfg.Client, URL: p.url, Header: h, Body: b, Timeout: p.cfg.Timeout,
		TimeoutSetting: "OPENAI_REQUEST_TIMEOUT", BaseURLSetting: "OPENAI_BASE_URL"}
	resp, err := llm.Retry(ctx, p.cfg.Retry, func(ctx context.Context, _ int) (llm.Response, error) {
		return p.try(ctx, post, req.Prompt)
	})
	resp.Duration = time.Since(start)
	if resp.Model == "" {
		resp.Model = p.cfg.Model
	}
	return resp, err
}

func (p *Provider) try(ctx context.Context, post llm.HTTPPost, prompt string) (llm.Response, error) {
	out := llm.Response{Model: p.cfg.Model}
	r, err := post.Do(ctx)
	if err != nil {
		return out, err
	}
	if r.Status != http.StatusOK {
		return out, p.statusError(r)
	}
	var cr chatResponse
	if err := json.Unmarshal(r.Body, &cr); err != nil {
		return out, fmt.Errorf("openai: %s answered with something other than a chat completion (%v): %s", p.url, err, llm.Snippet(r.Body))
	}
	if len(cr.Choices) == 0 {
		return out, llm.Transient(fmt.Errorf("openai: %s answered with no choices: %s", p.url, llm.Snippet(r.Body)))
	}
	if cr.Model != "" {
		out.Model = cr.Model
	}
	out.Text = cr.Choices[0].Message.Content
	if cr.Usage != nil {
		out.PromptTokens, out.ReplyTokens = cr.Usage.PromptTokens, cr.Usage.CompletionTokens
	}
	if out.PromptTokens == 0 {
		out.PromptTokens = llm.EstimateTokens(prompt)
	}
	if out.ReplyTokens == 0 {
		out.ReplyTokens = llm.EstimateTokens(out.Text)
	}
	return out, nil
}

// statusError classifies an answer other than 200.
func (p *Provider) statusError(r *llm.HTTPReply) error {
	var ae apiError
	msg, code := llm.Snippet(r.Body), ""
	if json.Unmarshal(r.Body, &ae) == nil && ae.Error != nil {
		msg = ae.Error.Message
		if s, ok := ae.Error.Code.(string); ok {
			code = s
		}
		if code == "" {
			code = ae.Error.Type
		}
	}
	base := fmt.Errorf("openai: %s: HTTP %d: %s", p.url, r.Status, msg)
	lower := strings.ToLower(msg + " " + code)
	switch {
	case r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden && !strings.Contains(lower, "model"):
		what := "the server refuses the API key"
		if p.cfg.APIKey == "" {
			what = "the server wants an API key and none is set"
		}
		return &llm.ConfigError{Provider: Name, Setting: "OPENAI_API_KEY",
			Message: fmt.Sprintf("%s (HTTP %d)", what, r.Status), Err: errors.New(msg)}
	case r.Status == http.StatusNotFound && strings.Contains(lower, "model") ||
		r.Status == http.StatusForbidden || code == "model_not_found":
		return &llm.ConfigError{Provider: Name, Setting: "OPENAI_MODEL",
			Message: fmt.Sprintf("model %q does not exist or this key may not use it", p.cfg.Model), Err: errors.New(msg)}
	case r.Status == http.StatusNotFound:
		return &llm.ConfigError{Provider: Name, Setting: "OPENAI_BASE_URL",
			Message: fmt.Sprintf("%s is not a chat completions endpoint (HTTP 404; does OPENAI_BASE_URL end in /v1?)", p.url)}
	case r.Status == http.StatusTooManyRequests && (code == "insufficient_quota" || strings.Contains(lower, "quota")):
		return &llm.ConfigError{Provider: Name, Setting: "OPENAI_API_KEY",
			Message: "the key's quota is exhausted (check the plan and billing)", Err: errors.New(msg)}
	case llm.StatusTransient(r.Status):
		return &llm.TransientError{Err: base, RetryAfter: llm.ParseRetryAfter(r.Header.Get("Retry-After"), time.Now())}
	default:
		return base
	}
}
