package featuretest_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
)

func call(t *testing.T, s *featuretest.StubExecutor, role, prompt string) (feature.Reply, error) {
	t.Helper()
	return s.Execute(context.Background(), feature.Request{Role: role, Prompt: prompt})
}

func TestStubReplies(t *testing.T) {
	t.Parallel()
	s := featuretest.NewStub("")
	r, err := call(t, s, feature.RoleAnalyze, "p1")
	if err != nil || r.Text != feature.DefaultReply(feature.RoleAnalyze, featuretest.DefaultDescription) || r.Model != "stub" {
		t.Fatalf("default reply = %+v, %v", r, err)
	}
	s.SetReplies(feature.RolePlan, "one", "two")
	var got []string
	for i := range 4 {
		r, _ := call(t, s, feature.RolePlan, string(rune('a'+i)))
		got = append(got, r.Text)
	}
	if !slices.Equal(got, []string{"one", "two", "two", "two"}) {
		t.Errorf("replies = %v, want in order with the last repeating", got)
	}
	s.SetReplies(feature.RolePlan)
	if r, _ := call(t, s, feature.RolePlan, "x"); r.Text != feature.DefaultReply(feature.RolePlan, featuretest.DefaultDescription) {
		t.Errorf("after reset: %q", r.Text)
	}
	if s.Calls(feature.RolePlan) != 5 || s.Calls(feature.RoleAnalyze) != 1 || s.CallCount() != 6 {
		t.Errorf("calls = %v, total %d", s.CallsByRole(), s.CallCount())
	}
	if p := s.Prompts(); !slices.Equal(p, []string{"p1", "a", "b", "c", "d", "x"}) {
		t.Errorf("prompts = %v", p)
	}
	if p := s.PromptsFor(feature.RoleAnalyze); !slices.Equal(p, []string{"p1"}) {
		t.Errorf("analyze prompts = %v", p)
	}
	if r := s.Roles(); len(r) != 6 || r[0] != feature.RoleAnalyze {
		t.Errorf("roles = %v", r)
	}
}

func TestStubFailures(t *testing.T) {
	t.Parallel()
	s := featuretest.NewStub("")
	boom := errors.New("boom")
	s.Fail(feature.RoleResearch, boom, 2)
	for i, want := range []error{boom, boom, nil} {
		if _, err := call(t, s, feature.RoleResearch, ""); !errors.Is(err, want) {
			t.Errorf("call %d: %v, want %v", i, err, want)
		}
	}
	s.Fail(feature.RoleMerge, nil, 0)
	for range 3 {
		if _, err := call(t, s, feature.RoleMerge, ""); !errors.Is(err, featuretest.ErrStub) {
			t.Fatalf("always failing role: %v", err)
		}
	}
	s.Recover(feature.RoleMerge)
	if _, err := call(t, s, feature.RoleMerge, ""); err != nil {
		t.Errorf("after Recover: %v", err)
	}
	if s.Calls(feature.RoleResearch) != 3 || s.Calls(feature.RoleMerge) != 4 {
		t.Errorf("failed calls are not counted: %v", s.CallsByRole())
	}
}

func TestStubBlocks(t *testing.T) {
	t.Parallel()
	s := featuretest.NewStub("")
	s.Block(feature.RoleImplement)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Execute(ctx, feature.Request{Role: feature.RoleImplement, TaskID: "t"})
		done <- err
	}()
	select {
	case req := <-s.Entered():
		if req.TaskID != "t" {
			t.Errorf("entered = %+v", req)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("blocked call not announced")
	}
	select {
	case err := <-done:
		t.Fatalf("returned before cancellation: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("blocked call = %v, want context.Canceled", err)
	}
	// Other roles are not blocked.
	if _, err := call(t, s, feature.RoleMerge, ""); err != nil {
		t.Error(err)
	}
}

func TestStubConcurrent(t *testing.T) {
	t.Parallel()
	s := featuretest.NewStub("")
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, r := range feature.Roles() {
				_, _ = s.Execute(context.Background(), feature.Request{Role: r})
			}
		}()
	}
	wg.Wait()
	if s.CallCount() != 16*6 || s.Calls(feature.RoleMerge) != 16 {
		t.Errorf("calls = %d / %v", s.CallCount(), s.CallsByRole())
	}
}
