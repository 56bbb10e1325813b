package slogan_test

// A golden checkpoint of the slogan workflow (LESSONS.md: "Encoding
// changes break old checkpoints"): testdata/slogan_checkpoint_v1.json is
// the state of a task with a human reviewer waiting on the review of turn
// 2, as version 1 of the state encoding stored it. It must keep loading and
// running to completion. Regenerate only for a new file when the encoding
// changes on purpose, with
//
//	go test ./internal/workflows/slogan/ -run TestGoldenCheckpoint -update

import (
	"flag"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent/agenttest"
	"github.com/gatehousehq/gatehouse/internal/workflows/slogan"
)

var update = flag.Bool("update", false, "rewrite the golden checkpoint in testdata")

var golden = agenttest.Golden{Path: filepath.Join("testdata", "slogan_checkpoint_v1.json")}

func writeGolden(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
	e := setup(t, map[string][]string{slogan.RoleWriter: {"Hydrate Green, Live Clean", "Hydrate Green, Save Our Seas"}},
		slogan.WithClock(clock))
	id := e.Create(input(t), `{"human_reviewer": true, "max_turns": 3}`)
	itr := e.Waits(id, slogan.NodeReviewer, slogan.InterruptReview, 1)
	e.Decide(id, itr.ID, graph.ActionReject, "Good rhythm but vague. Be specific about impact.", "")
	e.Waits(id, slogan.NodeReviewer, slogan.InterruptReview, 2)
	golden.Write(t, e.RawState(id))
}

func TestGoldenCheckpoint(t *testing.T) {
	if *update {
		writeGolden(t)
	}
	t.Parallel()
	var s slogan.State
	raw := golden.Load(t, &s)
	if s.UserInput != product || s.MaxTurns != 3 || !s.HumanReviewer || len(s.Turns) != 1 || s.TurnCount != 1 ||
		s.CurrentSlogan != "Hydrate Green, Save Our Seas" || s.Feedback == "" || s.ModelName == "" ||
		s.Turns[0].Feedback == nil || s.Turns[0].Timestamp != time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC) {
		t.Fatalf("golden state = %+v", s)
	}
	iterations := map[string]int{slogan.NodeWriter: 2, slogan.NodeReviewer: 1, slogan.NodeDecide: 1}
	plant := func(t *testing.T) (*agenttest.Env, string, graph.Interrupt) {
		e := setup(t, nil)
		id := e.Create(input(t), `{"human_reviewer": true}`)
		e.Plant(id, raw, slogan.NodeWriter, slogan.NodeReviewer, iterations)
		itr := e.Waits(id, slogan.NodeReviewer, slogan.InterruptReview, 2)
		if itr.Payload.Artifact == nil || itr.Payload.Artifact.Content != s.CurrentSlogan {
			t.Fatalf("the review does not show the golden slogan: %+v", itr.Payload.Artifact)
		}
		return e, id, itr
	}

	t.Run("approved", func(t *testing.T) {
		t.Parallel()
		e, id, itr := plant(t)
		e.Decide(id, itr.ID, graph.ActionRespond, "", "SHIP IT!")
		e.Succeeds(id)
		res := agenttest.Result[slogan.Result](e, id)
		if res.CompletionReason != slogan.ReasonApproved || res.TurnCount != 2 || res.FinalSlogan != s.CurrentSlogan ||
			res.Turns[0].Slogan != s.Turns[0].Slogan || *res.Turns[0].Feedback != *s.Turns[0].Feedback ||
			!res.Turns[0].Timestamp.Equal(s.Turns[0].Timestamp) {
			t.Errorf("result = %+v", res)
		}
		if n := len(e.LLMCalls(id, "")); n != 0 {
			t.Errorf("%d LLM calls, want none", n)
		}
	})
	t.Run("runs to max_turns", func(t *testing.T) {
		t.Parallel()
		e, id, itr := plant(t)
		e.Decide(id, itr.ID, graph.ActionReject, "Still vague.", "")
		itr = e.Waits(id, slogan.NodeReviewer, slogan.InterruptReview, 3)
		e.Decide(id, itr.ID, graph.ActionReject, "No.", "")
		e.Succeeds(id)
		if res := agenttest.Result[slogan.Result](e, id); res.CompletionReason != slogan.ReasonMaxTurns || res.TurnCount != 3 {
			t.Errorf("result = %+v", res)
		}
	})
}
