package llm

import (
	"context"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy is how patiently a provider retries a transient failure
// (refused connection, timeout, 429, 5xx) before giving up. The zero value
// of a field means its default (DefaultRetry).
type RetryPolicy struct {
	// Attempts is the number of tries in all, the first included.
	Attempts int
	// Backoff is the wait before the second try; it doubles for each
	// further one, up to MaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Jitter is the fraction (0…1) of each wait taken off at random, so
	// that many clients failing together do not retry together.
	Jitter float64
	// MaxRetryAfter is the longest server Retry-After hint honoured;
	// a longer one ends the retries at once (the error stays transient, so
	// a retry of the node may try again later).
	MaxRetryAfter time.Duration
	// Sleep waits d, or returns ctx's error when ctx ends first. Tests
	// inject a fake clock here; nil means a real timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1) for the jitter; nil means math/rand.
	Rand func() float64
	// OnRetry, when set, hears of each retry before its wait (for logs).
	OnRetry func(attempt int, wait time.Duration, err error)
}

// DefaultRetry is the providers' policy: 4 tries, waiting about 0.5s, 1s
// and 2s between them (less up to 20%), and at most a minute when the
// server asks for longer with Retry-After.
var DefaultRetry = RetryPolicy{Attempts: 4, Backoff: 500 * time.Millisecond, MaxBackoff: 8 * time.Second,
	Jitter: 0.2, MaxRetryAfter: time.Minute}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetry
	if p.Attempts <= 0 {
		p.Attempts = d.Attempts
	}
	if p.Backoff <= 0 {
		p.Backoff = d.Backoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = d.MaxBackoff
	}
	if p.Jitter < 0 || p.Jitter > 1 {
		p.Jitter = d.Jitter
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = d.MaxRetryAfter
	}
	if p.Sleep == nil {
		p.Sleep = sleep
	}
	if p.Rand == nil {
		p.Rand = mrand.Float64
	}
	return p
}

// Wait is the pause before try attempt+1 after try attempt failed with
// err: the server's Retry-After hint when err carries one, otherwise the
// exponential backoff less its jitter. ok is false when the hint is longer
// than MaxRetryAfter.
func (p RetryPolicy) Wait(attempt int, err error) (d time.Duration, ok bool) {
	p = p.withDefaults()
	if te := transientOf(err); te != nil && te.RetryAfter > 0 {
		return te.RetryAfter, te.RetryAfter <= p.MaxRetryAfter
	}
	d = p.Backoff
	for i := 1; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	if p.Jitter > 0 {
		d -= time.Duration(p.Rand() * p.Jitter * float64(d))
	}
	return d, true
}

// Retry calls try (attempt counts from 1) until it succeeds, returns an
// error that is not transient, ctx ends, or the attempts run out. It
// returns try's last result; after the last attempt the error says how
// many were made and stays transient.
func Retry[T any](ctx context.Context, p RetryPolicy, try func(ctx context.Context, attempt int) (T, error)) (T, error) {
	p = p.withDefaults()
	for attempt := 1; ; attempt++ {
		v, err := try(ctx, attempt)
		if err == nil || !IsTransient(err) {
			return v, err
		}
		if ctx.Err() != nil {
			return v, fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		if attempt >= p.Attempts {
			if p.Attempts == 1 {
				return v, err
			}
			return v, fmt.Errorf("gave up after %d attempts: %w", attempt, err)
		}
		wait, ok := p.Wait(attempt, err)
		if !ok {
			return v, fmt.Errorf("gave up: the server asks to wait %s, longer than %s: %w", wait, p.MaxRetryAfter, err)
		}
		if p.OnRetry != nil {
			p.OnRetry(attempt, wait, err)
		}
		if serr := p.Sleep(ctx, wait); serr != nil {
			return v, fmt.Errorf("%w while waiting to retry (%v)", serr, err)
		}
	}
}

func transientOf(err error) *TransientError {
	for err != nil {
		if te, ok := err.(*TransientError); ok {
			return te
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return nil
		}
		err = u.Unwrap()
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ParseRetryAfter reads a Retry-After header: a number of seconds or an
// HTTP date (then relative to now). It returns 0 for an empty, malformed or
// past value.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if n <= 0 || n > 1e6 {
			return 0
		}
		return time.Duration(n * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// StatusTransient reports whether an HTTP status is worth retrying: 408,
// 425, 429 and every 5xx but 501 and 505 (which will not change).
func StatusTransient(status int) bool {
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusTooEarly, status == http.StatusTooManyRequests:
		return true
	case status == http.StatusNotImplemented, status == http.StatusHTTPVersionNotSupported:
		return false
	default:
		return status >= 500 && status <= 599
	}
}

// LogRetries returns an OnRetry hook that logs each retry of a provider's
// calls as a warning, or nil when log is nil.
func LogRetries(log *slog.Logger, provider, model string) func(attempt int, wait time.Duration, err error) {
	if log == nil {
		return nil
	}
	return func(attempt int, wait time.Duration, err error) {
		log.Warn("LLM call failed; retrying", "provider", provider, "model", model, "attempt", attempt, "wait", wait, "error", err)
	}
}
