package llm_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/llm"
)

func TestErrors(t *testing.T) {
	t.Parallel()
	base := errors.New("connection refused")
	cfg := &llm.ConfigError{Provider: "ollama", Setting: "OLLAMA_MODEL_NAME", Message: `model "nope" not found`, Err: base}
	for _, tc := range []struct {
		name              string
		err               error
		config, transient bool
	}{
		{"Nil", nil, false, false},
		{"Plain", base, false, false},
		{"Transient", llm.Transient(base), false, true},
		{"TransientWrapped", fmt.Errorf("call: %w", llm.Transient(base)), false, true},
		{"TransientWithHint", &llm.TransientError{Err: base, RetryAfter: time.Second}, false, true},
		{"Config", cfg, true, false},
		{"ConfigWrapped", fmt.Errorf("call: %w", cfg), true, false},
		{"ConfigMarkedTransient", llm.Transient(cfg), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := llm.IsConfig(tc.err); got != tc.config {
				t.Errorf("IsConfig = %v, want %v", got, tc.config)
			}
			if got := llm.IsTransient(tc.err); got != tc.transient {
				t.Errorf("IsTransient = %v, want %v", got, tc.transient)
			}
		})
	}
	if llm.Transient(nil) != nil {
		t.Error("Transient(nil) != nil")
	}
	if got, want := cfg.Error(), `ollama (OLLAMA_MODEL_NAME): model "nope" not found: connection refused`; got != want {
		t.Errorf("ConfigError = %q, want %q", got, want)
	}
	if !errors.Is(cfg, base) {
		t.Error("ConfigError does not unwrap")
	}
	if got := (&llm.TransientError{Err: base, RetryAfter: 2 * time.Second}).Error(); got != "connection refused (retry after 2s)" {
		t.Errorf("TransientError = %q", got)
	}
}
