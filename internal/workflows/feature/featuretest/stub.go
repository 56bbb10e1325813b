// Package featuretest provides a stub feature.Executor for tests of the
// feature workflow (unit tests on the in-memory checkpointer, and the seed
// 002 integration tests on PostgreSQL), and Create, the feature task the
// replica tests start. Test support: only tests import it; it imports
// graph and the feature workflow, nothing of storage or HTTP.
package featuretest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
)

// DefaultDescription is the feature request NewStub("") serves replies for.
const DefaultDescription = "Let users export their reports as CSV files."

// ErrStub is the error a failing role returns when Fail is given none.
var ErrStub = errors.New("stub executor: induced failure")

// StubExecutor is a feature.Executor that returns canned replies, counts
// calls per role and in total, and records every request in order. It can
// be told to fail, or to block until the call's context ends, per role. It
// is safe for concurrent use.
type StubExecutor struct {
	// Model is reported in every reply (default "stub").
	Model string

	mu       sync.Mutex
	defaults map[string]string
	replies  map[string][]string
	served   map[string]int
	fails    map[string]*failure
	blocks   map[string]bool
	calls    map[string]int
	requests []feature.Request
	entered  chan feature.Request
}

type failure struct {
	err       error
	remaining int // <= 0: every call
}

var _ feature.Executor = (*StubExecutor)(nil)

// NewStub returns a stub serving feature.DefaultReplies(description) (of
// DefaultDescription when description is empty).
func NewStub(description string) *StubExecutor {
	if description == "" {
		description = DefaultDescription
	}
	return &StubExecutor{
		Model:    "stub",
		defaults: feature.DefaultReplies(description),
		replies:  map[string][]string{},
		served:   map[string]int{},
		fails:    map[string]*failure{},
		blocks:   map[string]bool{},
		calls:    map[string]int{},
		entered:  make(chan feature.Request, 256),
	}
}

// SetReplies makes role answer with replies in order; the last one
// repeats. With no replies the role answers with its default again.
func (s *StubExecutor) SetReplies(role string, replies ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(replies) == 0 {
		delete(s.replies, role)
	} else {
		s.replies[role] = slices.Clone(replies)
	}
	s.served[role] = 0
}

// Fail makes the next times calls of role return err (ErrStub when nil);
// with times <= 0 every call fails until Recover(role).
func (s *StubExecutor) Fail(role string, err error, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		err = ErrStub
	}
	s.fails[role] = &failure{err: err, remaining: times}
}

// Recover undoes Fail and Block for role.
func (s *StubExecutor) Recover(role string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.fails, role)
	delete(s.blocks, role)
}

// Block makes every call of role wait until its context ends and return
// the context's error. Each blocked call is announced on Entered.
func (s *StubExecutor) Block(role string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blocks[role] = true
}

// Entered receives every call that starts blocking (buffered; calls are
// dropped when nobody reads and the buffer is full).
func (s *StubExecutor) Entered() <-chan feature.Request { return s.entered }

// Execute implements feature.Executor.
func (s *StubExecutor) Execute(ctx context.Context, req feature.Request) (feature.Reply, error) {
	s.mu.Lock()
	s.calls[req.Role]++
	s.requests = append(s.requests, req)
	block := s.blocks[req.Role]
	var ferr error
	if f := s.fails[req.Role]; f != nil && !block {
		ferr = f.err
		if f.remaining > 0 {
			if f.remaining--; f.remaining == 0 {
				delete(s.fails, req.Role)
			}
		}
	}
	var text string
	if !block && ferr == nil {
		if rs := s.replies[req.Role]; len(rs) > 0 {
			text = rs[min(s.served[req.Role], len(rs)-1)]
			s.served[req.Role]++
		} else {
			text = s.defaults[req.Role]
		}
	}
	model := s.Model
	s.mu.Unlock()

	if block {
		select {
		case s.entered <- req:
		default:
		}
		<-ctx.Done()
		return feature.Reply{Model: model}, ctx.Err()
	}
	if ferr != nil {
		return feature.Reply{Model: model}, ferr
	}
	if err := ctx.Err(); err != nil {
		return feature.Reply{Model: model}, err
	}
	return feature.Reply{Text: text, Model: model, PromptTokens: len(req.Prompt) / 4, ReplyTokens: len(text) / 4,
		Duration: time.Millisecond}, nil
}

// Calls returns how many calls role received (failed ones included).
func (s *StubExecutor) Calls(role string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[role]
}

// CallCount returns how many calls the stub received in total.
func (s *StubExecutor) CallCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// CallsByRole returns the call count of every role called.
func (s *StubExecutor) CallsByRole() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.calls))
	for r, n := range s.calls {
		out[r] = n
	}
	return out
}

// Prompts returns every prompt received, in order.
func (s *StubExecutor) Prompts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.requests))
	for i, r := range s.requests {
		out[i] = r.Prompt
	}
	return out
}

// PromptsFor returns the prompts role received, in order.
func (s *StubExecutor) PromptsFor(role string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.requests {
		if r.Role == role {
			out = append(out, r.Prompt)
		}
	}
	return out
}

// Requests returns every request received, in order.
func (s *StubExecutor) Requests() []feature.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Roles returns the role of every call, in order.
func (s *StubExecutor) Roles() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.requests))
	for i, r := range s.requests {
		out[i] = r.Role
	}
	return out
}
