package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/llm/llmtest"
	"github.com/gatehousehq/gatehouse/internal/llm/openai"
)

func server(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func provider(url string, sl *llmtest.Sleeper, mod ...func(*openai.Config)) *openai.Provider {
	cfg := openai.Config{BaseURL: url + "/v1", APIKey: "sk-test", Model: "gpt-4o-mini", Timeout: 5 * time.Second,
		Retry: llm.RetryPolicy{Attempts: 3, Backoff: 100 * time.Millisecond, Jitter: 0.0001, Sleep: sl.Sleep}}
	for _, m := range mod {
		m(&cfg)
	}
	return openai.New(cfg)
}

var req = llm.Request{Role: "sdd.architect", Prompt: "Draft the HLD.", TaskID: "t", Iteration: 1}

func completion(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion",
		"model": "gpt-4o-mini-2024-07-18",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]string{"role": "assistant", "content": text}}},
		"usage": map[string]int{"prompt_tokens": 12, "completion_tokens": 34, "total_tokens": 46}})
}

func apiError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": code}})
}

func TestSuccess(t *testing.T) {
	t.Parallel()
	var got map[string]any
	var path, auth string
	srv, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		path, auth = r.Method+" "+r.URL.Path, r.Header.Get("Authorization")
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Error(err)
		}
		completion(w, "# HLD\n\nComponents …")
	})
	resp, err := provider(srv.URL, &llmtest.Sleeper{}).Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "# HLD\n\nComponents …" || resp.Model != "gpt-4o-mini-2024-07-18" || resp.PromptTokens != 12 || resp.ReplyTokens != 34 {
		t.Errorf("response = %+v", resp)
	}
	if path != "POST /v1/chat/completions" || auth != "Bearer sk-test" || n.Load() != 1 {
		t.Errorf("path %q, auth %q, %d requests", path, auth, n.Load())
	}
	msgs, _ := got["messages"].([]any)
	if got["model"] != "gpt-4o-mini" || len(msgs) != 1 || msgs[0].(map[string]any)["content"] != req.Prompt {
		t.Errorf("request = %v", got)
	}
}

func TestNoKeyNoAuthorization(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			t.Errorf("Authorization %q sent without a key", a)
		}
		completion(w, "ok")
	})
	if _, err := provider(srv.URL, &llmtest.Sleeper{}, func(c *openai.Config) { c.APIKey = "" }).Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

func TestRateLimitedThenSuccess(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, header string
		min, max     time.Duration
	}{
		{"Seconds", "3", 3 * time.Second, 3 * time.Second},
		{"HTTPDate", time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat), 80 * time.Second, 91 * time.Second},
		{"NoHint", "", 90 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var tries atomic.Int32
			srv, n := server(t, func(w http.ResponseWriter, r *http.Request) {
				if tries.Add(1) == 1 {
					if tc.header != "" {
						w.Header().Set("Retry-After", tc.header)
					}
					apiError(w, http.StatusTooManyRequests, "rate_limit_exceeded", "Rate limit reached for requests")
					return
				}
				completion(w, "ok")
			})
			sl := &llmtest.Sleeper{}
			p := provider(srv.URL, sl, func(c *openai.Config) { c.Retry.MaxRetryAfter = 2 * time.Minute })
			resp, err := p.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			w := sl.Waits()
			if resp.Text != "ok" || n.Load() != 2 || len(w) != 1 || w[0] < tc.min || w[0] > tc.max {
				t.Errorf("text %q after %d requests, waits %v; want one wait in [%v, %v]", resp.Text, n.Load(), w, tc.min, tc.max)
			}
		})
	}
}

func TestRetryAfterTooLong(t *testing.T) {
	t.Parallel()
	srv, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		apiError(w, http.StatusTooManyRequests, "rate_limit_exceeded", "slow down")
	})
	sl := &llmtest.Sleeper{}
	_, err := provider(srv.URL, sl).Complete(context.Background(), req)
	if err == nil || !llm.IsTransient(err) || !strings.Contains(err.Error(), "1h0m0s") || n.Load() != 1 || len(sl.Waits()) != 0 {
		t.Errorf("error %v after %d requests, waits %v", err, n.Load(), sl.Waits())
	}
}

func TestServerErrorsThenFailure(t *testing.T) {
	t.Parallel()
	srv, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusBadGateway, "", "upstream connect error")
	})
	sl := &llmtest.Sleeper{}
	_, err := provider(srv.URL, sl).Complete(context.Background(), req)
	if err == nil || !llm.IsTransient(err) || n.Load() != 3 || len(sl.Waits()) != 2 || !strings.Contains(err.Error(), "upstream connect error") {
		t.Errorf("error %v after %d requests, waits %v", err, n.Load(), sl.Waits())
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		status  int
		code    string
		setting string
		key     string
	}{
		{"ModelNotFound", http.StatusNotFound, "model_not_found", "OPENAI_MODEL", "sk-test"},
		{"BadKey", http.StatusUnauthorized, "invalid_api_key", "OPENAI_API_KEY", "sk-test"},
		{"NoKey", http.StatusUnauthorized, "", "OPENAI_API_KEY", ""},
		{"QuotaExhausted", http.StatusTooManyRequests, "insufficient_quota", "OPENAI_API_KEY", "sk-test"},
		{"WrongPath", http.StatusNotFound, "", "OPENAI_BASE_URL", "sk-test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, n := server(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.name == "WrongPath" {
					http.NotFound(w, r)
					return
				}
				apiError(w, tc.status, tc.code, "The model `gpt-9` does not exist, or the key is wrong")
			})
			sl := &llmtest.Sleeper{}
			_, err := provider(srv.URL, sl, func(c *openai.Config) { c.Model, c.APIKey = "gpt-9", tc.key }).Complete(context.Background(), req)
			var ce *llm.ConfigError
			if !errors.As(err, &ce) || ce.Setting != tc.setting {
				t.Fatalf("error %v (%T), want a ConfigError naming %s", err, err, tc.setting)
			}
			if n.Load() != 1 || len(sl.Waits()) != 0 {
				t.Errorf("%d requests, waits %v: no retry on a configuration error", n.Load(), sl.Waits())
			}
			if tc.setting == "OPENAI_MODEL" && !strings.Contains(err.Error(), `"gpt-9"`) {
				t.Errorf("error %v does not name the model", err)
			}
		})
	}
}

func TestSlowServerPastTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) })
	sl := &llmtest.Sleeper{}
	_, err := provider(srv.URL, sl, func(c *openai.Config) { c.Timeout = 50 * time.Millisecond }).Complete(context.Background(), req)
	if err == nil || !llm.IsTransient(err) || !strings.Contains(err.Error(), "OPENAI_REQUEST_TIMEOUT") {
		t.Fatalf("error = %v", err)
	}
	if n.Load() != 3 || len(sl.Waits()) != 2 {
		t.Errorf("%d requests, waits %v", n.Load(), sl.Waits())
	}
}

func TestBadRequestNotRetried(t *testing.T) {
	t.Parallel()
	srv, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusBadRequest, "context_length_exceeded", "This model's maximum context length is 8192 tokens")
	})
	_, err := provider(srv.URL, &llmtest.Sleeper{}).Complete(context.Background(), req)
	if err == nil || llm.IsTransient(err) || llm.IsConfig(err) || n.Load() != 1 || !strings.Contains(err.Error(), "maximum context length") {
		t.Errorf("error %v after %d requests", err, n.Load())
	}
}
