// Package maintenance runs Gatehouse's periodic chores — pruning ended
// sessions, the checkpoint history and finished notifications, folding the
// approval analytics — as services with one shape: New, Start(ctx), Stop.
// Stop cancels the chore and waits until it has returned, so nothing of it
// is in flight when the caller closes the database pool.
//
// Each chore declares the small store interface it calls (postgres.Store
// and auth.Service implement them); the package uses postgres only for the
// prunes' parameter types and sentinel errors, and never imports the
// server.
package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Service runs one chore every period until it is stopped. Its zero value
// is not usable; make one with New.
type Service struct {
	name       string
	every      time.Duration
	runAtStart bool
	chore      func(ctx context.Context)
	log        *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Config describes a chore.
type Config struct {
	// Name names the chore in logs ("history retention").
	Name string
	// Every is the period between two runs; it must be positive.
	Every time.Duration
	// RunAtStart runs the chore once as soon as the service starts, then
	// every period; otherwise the first run is one period after Start.
	RunAtStart bool
	// Run is one run of the chore. It returns when ctx ends.
	Run func(ctx context.Context)
	// Logger; nil discards.
	Logger *slog.Logger
}

// New returns a stopped service for the chore c.
func New(c Config) *Service {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if c.Every <= 0 {
		panic("maintenance: " + c.Name + ": Every must be positive")
	}
	return &Service{name: c.Name, every: c.Every, runAtStart: c.RunAtStart, chore: c.Run, log: log}
}

// Start runs the chore in its own goroutine until Stop is called or ctx
// ends. Starting a started service does nothing.
func (s *Service) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.loop(ctx, s.done)
}

// Stop ends the chore and waits for a run in progress to return. Stopping
// a stopped service does nothing.
func (s *Service) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel, s.done = nil, nil
	s.mu.Unlock()
	if done == nil {
		return
	}
	cancel()
	<-done
}

func (s *Service) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	if s.runAtStart {
		s.chore(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.chore(ctx)
	}
}

// Group starts and stops several services together.
type Group []*Service

// Start starts every service of g.
func (g Group) Start(ctx context.Context) {
	for _, s := range g {
		s.Start(ctx)
	}
}

// Stop stops every service of g at once and waits for all of them.
func (g Group) Stop() {
	var wg sync.WaitGroup
	for _, s := range g {
		wg.Go(s.Stop)
	}
	wg.Wait()
}
