package llm_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/llm/llmtest"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{"1.5", 1500 * time.Millisecond},
		{"0", 0},
		{"-3", 0},
		{"soon", 0},
		{now.Add(2 * time.Minute).Format(http.TimeFormat), 2 * time.Minute},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	} {
		if got := llm.ParseRetryAfter(tc.in, now); got != tc.want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestStatusTransient(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]bool{200: false, 400: false, 401: false, 404: false, 408: true, 429: true,
		500: true, 501: false, 502: true, 503: true, 504: true} {
		if got := llm.StatusTransient(status); got != want {
			t.Errorf("StatusTransient(%d) = %v", status, got)
		}
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	flaky := llm.Transient(errors.New("503"))
	t.Run("BackoffGrowsToItsCap", func(t *testing.T) {
		t.Parallel()
		sl := &llmtest.Sleeper{}
		p := llm.RetryPolicy{Attempts: 6, Backoff: time.Second, MaxBackoff: 4 * time.Second, Jitter: 0.5,
			Rand: func() float64 { return 0 }, Sleep: sl.Sleep}
		tries := 0
		_, err := llm.Retry(context.Background(), p, func(context.Context, int) (int, error) { tries++; return 0, flaky })
		if tries != 6 || !llm.IsTransient(err) || !strings.Contains(err.Error(), "6 attempts") {
			t.Errorf("%d tries, error %v", tries, err)
		}
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
		if got := sl.Waits(); !equal(got, want) {
			t.Errorf("waits %v, want %v", got, want)
		}
	})
	t.Run("Jitter", func(t *testing.T) {
		t.Parallel()
		p := llm.RetryPolicy{Backoff: time.Second, Jitter: 0.2, Rand: func() float64 { return 0.5 }}
		if d, ok := p.Wait(1, flaky); !ok || d != 900*time.Millisecond {
			t.Errorf("wait %v, want 900ms (1s less half of 20%%)", d)
		}
	})
	t.Run("PermanentStopsAtOnce", func(t *testing.T) {
		t.Parallel()
		sl := &llmtest.Sleeper{}
		tries := 0
		cfg := &llm.ConfigError{Provider: "x", Message: "bad"}
		_, err := llm.Retry(context.Background(), llm.RetryPolicy{Sleep: sl.Sleep}, func(context.Context, int) (int, error) {
			tries++
			return 0, cfg
		})
		if tries != 1 || !errors.Is(err, cfg) || len(sl.Waits()) != 0 {
			t.Errorf("%d tries, error %v", tries, err)
		}
	})
	t.Run("SuccessAfterFailures", func(t *testing.T) {
		t.Parallel()
		sl := &llmtest.Sleeper{}
		v, err := llm.Retry(context.Background(), llm.RetryPolicy{Sleep: sl.Sleep}, func(_ context.Context, attempt int) (int, error) {
			if attempt < 3 {
				return 0, flaky
			}
			return attempt, nil
		})
		if v != 3 || err != nil || len(sl.Waits()) != 2 {
			t.Errorf("got %d, %v, waits %v", v, err, sl.Waits())
		}
	})
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
