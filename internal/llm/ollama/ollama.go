// Package ollama is the llm.Provider that talks to an Ollama server's
// /api/chat endpoint (seed 004's settings: OLLAMA_BASE_URL,
// OLLAMA_MODEL_NAME, OLLAMA_TEMPERATURE, OLLAMA_REQUEST_TIMEOUT).
//
// Transient failures (refused connection, a request past its timeout, 429,
// 5xx) are retried with exponential backoff and jitter, honouring
// Retry-After; a model the server does not have is a *llm.ConfigError at
// once, naming OLLAMA_MODEL_NAME.
//
// It imports internal/llm only.
package ollama

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
const Name = "ollama"

// Defaults of seed 004.
const (
	DefaultBaseURL     = "http://localhost:11434"
	DefaultModel       = "mistral:latest"
	DefaultTemperature = 0.7
	DefaultTimeout     = 30 * time.Second
)

// Config configures a Provider.
type Config struct {
	BaseURL     string        // OLLAMA_BASE_URL
	Model       string        // OLLAMA_MODEL_NAME
	Temperature float64       // OLLAMA_TEMPERATURE
	Timeout     time.Duration // OLLAMA_REQUEST_TIMEOUT, per try
	// MaxTokens caps the reply (options.num_predict); 0 leaves it to the
	// model.
	MaxTokens int
	// Retry is the retry policy; zero fields take llm.DefaultRetry's.
	Retry llm.RetryPolicy
	// Client is the HTTP client; nil means llm.NewHTTPClient().
	Client *http.Client
	// Logger hears of retries (a warning each); nil discards.
	Logger *slog.Logger
}

// Provider is the Ollama llm.Provider; safe for concurrent use.
type Provider struct {
	cfg Config
	url string
}

var _ llm.Provider = (*Provider)(nil)

// New returns a provider for cfg, filling seed 004's defaults.
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
	return &Provider{cfg: cfg, url: strings.TrimRight(cfg.BaseURL, "/") + "/api/chat"}
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
	Model    string         `json:"model"`
	Messages []message      `json:"messages"`
	Stream   bool           `json:"stream"`
	Options  map[string]any `json:"options,omitempty"`
}

type chatResponse struct {
	Model           string  `json:"model"`
	Message         message `json:"message"`
	Done            bool    `json:"done"`
	DoneReason      string  `json:"done_reason"`
	PromptEvalCount int     `json:"prompt_eval_count"`
	EvalCount       int     `json:"eval_count"`
	Error           string  `json:"error"`
}

// Complete implements llm.Provider: one chat message with the prompt, not
// streamed. Errors: *llm.ConfigError (model not found, wrong address);
// a transient error after the retries; ctx's error (wrapped).
func (p *Provider) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	start := time.Now()
	body := chatRequest{Model: p.cfg.Model, Messages: []message{{Role: "user", Content: req.Prompt}},
		Options: map[string]any{"temperature": p.cfg.Temperature}}
	if p.cfg.MaxTokens > 0 {
		body.Options["num_predict"] = p.cfg.MaxTokens
	}
	b, err := json.Marshal(body)
	if err != nil {
		return llm.Response{Model: p.cfg.Model}, fmt.Errorf("ollama: encode request: %w", err)
	}
	post := llm.HTTPPost{Provider: Name, Client: p.cfg.Client, URL: p.url, Body: b, Timeout: p.cfg.Timeout,
		TimeoutSetting: "OLLAMA_REQUEST_TIMEOUT", BaseURLSetting: "OLLAMA_BASE_URL"}
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
	var cr chatResponse
	jerr := json.Unmarshal(r.Body, &cr)
	if r.Status != http.StatusOK {
		return out, p.statusError(r, cr.Error, jerr == nil)
	}
	if jerr != nil {
		return out, fmt.Errorf("ollama: %s answered with something other than a chat response (%v): %s", p.url, jerr, llm.Snippet(r.Body))
	}
	if cr.Error != "" {
		return out, fmt.Errorf("ollama: %s", cr.Error)
	}
	if cr.Model != "" {
		out.Model = cr.Model
	}
	out.Text = cr.Message.Content
	out.PromptTokens, out.ReplyTokens = cr.PromptEvalCount, cr.EvalCount
	if out.PromptTokens == 0 {
		out.PromptTokens = llm.EstimateTokens(prompt)
	}
	if out.ReplyTokens == 0 {
		out.ReplyTokens = llm.EstimateTokens(out.Text)
	}
	return out, nil
}

// statusError classifies an answer other than 200.
func (p *Provider) statusError(r *llm.HTTPReply, msg string, isJSON bool) error {
	if msg == "" {
		msg = llm.Snippet(r.Body)
	}
	base := fmt.Errorf("ollama: %s: HTTP %d: %s", p.url, r.Status, msg)
	switch {
	case r.Status == http.StatusNotFound && isJSON && strings.Contains(strings.ToLower(msg), "model"):
		return &llm.ConfigError{Provider: Name, Setting: "OLLAMA_MODEL_NAME",
			Message: fmt.Sprintf("the server has no model %q (pull it with `ollama pull %s`, or set OLLAMA_MODEL_NAME to one `ollama list` shows)", p.cfg.Model, p.cfg.Model),
			Err:     errors.New(msg)}
	case r.Status == http.StatusNotFound:
		return &llm.ConfigError{Provider: Name, Setting: "OLLAMA_BASE_URL",
			Message: fmt.Sprintf("%s is not an Ollama chat endpoint (HTTP 404)", p.url)}
	case r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden:
		return &llm.ConfigError{Provider: Name, Setting: "OLLAMA_BASE_URL",
			Message: fmt.Sprintf("the server at %s refuses access (HTTP %d)", p.url, r.Status), Err: errors.New(msg)}
	case llm.StatusTransient(r.Status):
		return &llm.TransientError{Err: base, RetryAfter: llm.ParseRetryAfter(r.Header.Get("Retry-After"), time.Now())}
	default:
		return base
	}
}
