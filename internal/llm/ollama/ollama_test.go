package ollama_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/llm/llmtest"
	"github.com/gatehousehq/gatehouse/internal/llm/ollama"
)

// server is an httptest Ollama answering with the given handler and
// counting requests.
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

func provider(url string, sl *llmtest.Sleeper, mod ...func(*ollama.Config)) *ollama.Provider {
	cfg := ollama.Config{BaseURL: url, Model: "mistral:latest", Temperature: 0.3, Timeout: 5 * time.Second,
		Retry: llm.RetryPolicy{Attempts: 4, Backoff: 100 * time.Millisecond, Jitter: 0.0001, Sleep: sl.Sleep}}
	for _, m := range mod {
		m(&cfg)
	}
	return ollama.New(cfg)
}

var req = llm.Request{Role: "slogan.writer", Prompt: "Create a slogan for: eco-friendly water bottles", TaskID: "t", Iteration: 1}

func reply(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"model": "mistral:latest", "created_at": time.Now(),
		"message": map[string]string{"role": "assistant", "content": text}, "done": true, "done_reason": "stop",
		"prompt_eval_count": 26, "eval_count": 9})
}

func TestSuccess(t *testing.T) {
	t.Parallel()
	var got map[string]any
	var path string
	srv, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		path = r.Method + " " + r.URL.Path
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Error(err)
		}
		reply(w, "Hydrate Green, Live Clean")
	})
	sl := &llmtest.Sleeper{}
	resp, err := provider(srv.URL+"/", sl).Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hydrate Green, Live Clean" || resp.Model != "mistral:latest" || resp.PromptTokens != 26 || resp.ReplyTokens != 9 {
		t.Errorf("response = %+v", resp)
	}
	if resp.Duration <= 0 {
		t.Errorf("duration = %v", resp.Duration)
	}
	if path != "POST /api/chat" || n.Load() != 1 || len(sl.Waits()) != 0 {
		t.Errorf("path %q, %d requests, waits %v", path, n.Load(), sl.Waits())
	}
	if got["model"] != "mistral:latest" || got["stream"] != false {
		t.Errorf("request = %v", got)
	}
	msgs, _ := got["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["content"] != req.Prompt || msgs[0].(map[string]any)["role"] != "user" {
		t.Errorf("messages = %v", got["messages"])
	}
	if opts, _ := got["options"].(map[string]any); opts["temperature"] != 0.3 {
		t.Errorf("options = %v", got["options"])
	}
}

func TestRateLimitedThenSuccess(t *testing.T) {
	t.Parallel()
	var tries atomic.Int32
	srv, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		if tries.Add(1) == 1 {
			w.Header().Set("Retry-After", "7")
			http.Error(w, `{"error":"too many requests"}`, http.StatusTooManyRequests)
			return
		}
		reply(w, "ok")
	})
	sl := &llmtest.Sleeper{}
	resp, err := provider(srv.URL, sl).Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "ok" || n.Load() != 2 {
		t.Errorf("text %q after %d requests", resp.Text, n.Load())
	}
	if w := sl.Waits(); len(w) != 1 || w[0] != 7*time.Second {
		t.Errorf("waits = %v, want [7s] (Retry-After)", w)
	}
}

func TestServerErrorsThenFailure(t *testing.T) {
	t.Parallel()
	srv, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"llama runner process has terminated"}`, http.StatusInternalServerError)
	})
	sl := &llmtest.Sleeper{}
	_, err := provider(srv.URL, sl).Complete(context.Background(), req)
	if err == nil {
		t.Fatal("no error")
	}
	if !llm.IsTransient(err) || llm.IsConfig(err) {
		t.Errorf("error %v: transient %v config %v", err, llm.IsTransient(err), llm.IsConfig(err))
	}
	if n.Load() != 4 || !strings.Contains(err.Error(), "4 attempts") || !strings.Contains(err.Error(), "llama runner") {
		t.Errorf("%d requests; error %v", n.Load(), err)
	}
	w := sl.Waits()
	if len(w) != 3 || !(w[0] < w[1] && w[1] < w[2]) || w[0] < 90*time.Millisecond || w[2] > 400*time.Millisecond {
		t.Errorf("waits = %v, want three growing about 100ms, 200ms, 400ms", w)
	}
}

func TestModelNotFound(t *testing.T) {
	t.Parallel()
	srv, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"model \"nope:7b\" not found, try pulling it first"}`))
	})
	sl := &llmtest.Sleeper{}
	resp, err := provider(srv.URL, sl, func(c *ollama.Config) { c.Model = "nope:7b" }).Complete(context.Background(), req)
	var ce *llm.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T), want *llm.ConfigError", err, err)
	}
	if ce.Setting != "OLLAMA_MODEL_NAME" || !strings.Contains(err.Error(), `"nope:7b"`) || llm.IsTransient(err) {
		t.Errorf("error = %v", err)
	}
	if n.Load() != 1 || len(sl.Waits()) != 0 {
		t.Errorf("%d requests, waits %v: a configuration error must not be retried", n.Load(), sl.Waits())
	}
	if resp.Model != "nope:7b" {
		t.Errorf("response model %q", resp.Model)
	}
}

func TestNotAnOllamaServer(t *testing.T) {
	t.Parallel()
	srv, n := server(t, http.NotFound)
	_, err := provider(srv.URL, &llmtest.Sleeper{}).Complete(context.Background(), req)
	var ce *llm.ConfigError
	if !errors.As(err, &ce) || ce.Setting != "OLLAMA_BASE_URL" || n.Load() != 1 {
		t.Errorf("error %v after %d requests, want a ConfigError naming OLLAMA_BASE_URL", err, n.Load())
	}
}

func TestSlowServerPastTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		// Read the body, so the server notices the client leaving.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // before srv.Close, which waits for handlers
	sl := &llmtest.Sleeper{}
	p := provider(srv.URL, sl, func(c *ollama.Config) {
		c.Timeout = 50 * time.Millisecond
		c.Retry.Attempts = 2
	})
	start := time.Now()
	_, err := p.Complete(context.Background(), req)
	if err == nil {
		t.Fatal("no error")
	}
	if !llm.IsTransient(err) || !strings.Contains(err.Error(), "OLLAMA_REQUEST_TIMEOUT") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v", err)
	}
	if n.Load() != 2 || len(sl.Waits()) != 1 {
		t.Errorf("%d requests, waits %v", n.Load(), sl.Waits())
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v; the timeout is 50ms a try", d)
	}
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	sl := &llmtest.Sleeper{}
	_, err = provider("http://"+addr, sl, func(c *ollama.Config) { c.Retry.Attempts = 3 }).Complete(context.Background(), req)
	if err == nil || !llm.IsTransient(err) {
		t.Fatalf("error = %v, want transient", err)
	}
	if len(sl.Waits()) != 2 {
		t.Errorf("waits = %v, want 2 (3 attempts)", sl.Waits())
	}
}

func TestContextEndsWhileWaiting(t *testing.T) {
	t.Parallel()
	srv, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "busy", http.StatusServiceUnavailable)
	})
	ctx, cancel := context.WithCancel(context.Background())
	sl := &llmtest.Sleeper{OnSleep: func(time.Duration) { cancel() }}
	_, err := provider(srv.URL, sl).Complete(ctx, req)
	if !errors.Is(err, context.Canceled) || n.Load() != 1 {
		t.Errorf("error %v after %d requests, want context.Canceled after 1", err, n.Load())
	}
}

func TestRetriesAreLogged(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "busy", http.StatusServiceUnavailable)
	})
	var buf strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
	_, _ = provider(srv.URL, &llmtest.Sleeper{}, func(c *ollama.Config) {
		c.Retry.Attempts = 2
		c.Logger = log
	}).Complete(context.Background(), req)
	mu.Lock()
	defer mu.Unlock()
	if got := buf.String(); strings.Count(got, "retrying") != 1 || !strings.Contains(got, "HTTP 503") || !strings.Contains(got, "mistral:latest") {
		t.Errorf("log:\n%s", got)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
