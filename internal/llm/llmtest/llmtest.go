// Package llmtest helps test providers: a fake sleeper that records the
// waits of a retry policy instead of sleeping them.
//
// Test support: it imports nothing of the module.
package llmtest

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Sleeper is an llm.RetryPolicy.Sleep that returns at once (or with ctx's
// error when ctx has ended) and records each wait. Safe for concurrent use.
type Sleeper struct {
	// OnSleep, when set, is called with each wait before it "passes".
	OnSleep func(d time.Duration)

	mu    sync.Mutex
	waits []time.Duration
}

// Sleep implements llm.RetryPolicy.Sleep.
func (s *Sleeper) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	if s.OnSleep != nil {
		s.OnSleep(d)
	}
	return ctx.Err()
}

// Waits returns the waits so far.
func (s *Sleeper) Waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.waits)
}

// Total is the sum of the waits so far: the time a real clock would have
// taken.
func (s *Sleeper) Total() time.Duration {
	var t time.Duration
	for _, d := range s.Waits() {
		t += d
	}
	return t
}
