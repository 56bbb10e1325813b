package maintenance

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestStopWaitsForTheRun: Stop returns only after a run in progress has
// returned, and no run starts after it.
func TestStopWaitsForTheRun(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	var finished, runs atomic.Int32
	s := New(Config{Name: "slow", Every: time.Hour, RunAtStart: true, Run: func(ctx context.Context) {
		runs.Add(1)
		close(started)
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // a last statement after the cancel
		finished.Add(1)
	}})
	s.Start(context.Background())
	<-started
	s.Stop()
	if finished.Load() != 1 {
		t.Fatalf("Stop returned before the run did")
	}
	s.Stop() // a second Stop is a no-op
	if runs.Load() != 1 {
		t.Errorf("runs = %d, want 1", runs.Load())
	}
}

// TestRunsEveryPeriod: without RunAtStart the first run waits a period;
// then one run per period until the parent context ends.
func TestRunsEveryPeriod(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	s := New(Config{Name: "tick", Every: 10 * time.Millisecond, Run: func(context.Context) { runs.Add(1) }})
	start := time.Now()
	s.Start(ctx)
	for runs.Load() < 3 {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("3 runs did not happen in 5s (runs %d)", runs.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Errorf("3 runs after %s: the first must wait a period", el)
	}
	cancel()
	s.Stop()
	n := runs.Load()
	time.Sleep(30 * time.Millisecond)
	if runs.Load() != n {
		t.Errorf("ran after Stop: %d then %d", n, runs.Load())
	}
}

// TestGroupStopsAll: a group's Stop waits for every service.
func TestGroupStopsAll(t *testing.T) {
	t.Parallel()
	var done atomic.Int32
	mk := func() *Service {
		return New(Config{Name: "g", Every: time.Hour, RunAtStart: true, Run: func(ctx context.Context) {
			<-ctx.Done()
			done.Add(1)
		}})
	}
	g := Group{mk(), mk(), mk()}
	g.Start(context.Background())
	time.Sleep(10 * time.Millisecond)
	g.Stop()
	if done.Load() != 3 {
		t.Errorf("%d of 3 runs returned when Stop did", done.Load())
	}
}
