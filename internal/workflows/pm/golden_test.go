package pm_test

// A golden checkpoint of the pm workflow (LESSONS.md: "Encoding changes
// break old checkpoints"): testdata/pm_checkpoint_v1.json is the state
// right after the first attempt of step-1 failed verification — job,
// ticket, result, verification, history, attempts — as version 1 of the
// state encoding stored it. It must keep loading and running to
// completion. Regenerate only for a new file when the encoding changes on
// purpose, with
//
//	go test ./internal/workflows/pm/ -run TestGoldenCheckpoint -update

import (
	"flag"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent/agenttest"
	"github.com/gatehousehq/gatehouse/internal/workflows/pm"
)

var update = flag.Bool("update", false, "rewrite the golden checkpoint in testdata")

var golden = agenttest.Golden{Path: filepath.Join("testdata", "pm_checkpoint_v1.json")}

const goldenFinding = "the CSV header is missing"

func writeGolden(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
	e := setup(t, map[string][]string{pm.RoleVerifier: {verdict("fail", []string{goldenFinding}, []string{"write a header row"}),
		verdict("pass", nil, nil)}}, pm.WithClock(clock))
	id := e.Create(agenttest.JSON(t, pm.Input{Description: description, AcceptanceCriteria: criteria,
		Preferences: map[string]any{"language": "Go"}}), "")
	e.Succeeds(id)
	ctx := agenttest.Ctx(t)
	hist, err := e.Store().History(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hist {
		if h.Reason == "node" && h.LastNode == pm.NodeVerifyStepResult {
			cp, err := e.Store().CheckpointAt(ctx, id, h.Step)
			if err != nil {
				t.Fatal(err)
			}
			golden.Write(t, cp.State)
			return
		}
	}
	t.Fatal("no checkpoint after verify_step_result")
}

func TestGoldenCheckpoint(t *testing.T) {
	if *update {
		writeGolden(t)
	}
	t.Parallel()
	var s pm.State
	raw := golden.Load(t, &s)
	if s.Description != description || len(s.AcceptanceCriteria) != 2 || s.PreferencesEffective["language"] != "Go" ||
		len(s.Plan.Steps) != 3 || s.CurrentStepIndex != 0 || s.AttemptsByStep["step-1"] != 1 || s.MaxAttempts != 3 ||
		s.CurrentJob == nil || s.Ticket == nil || s.LastResult == nil || s.Verification == nil ||
		s.Verification.Status != pm.VerifyFail || len(s.History) != 1 || s.Status != pm.StatusRunning ||
		s.Ticket.DispatchedAt != time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC) {
		t.Fatalf("golden state = %+v", s)
	}
	e := setup(t, nil)
	id := e.Create(input(t), "")
	e.Plant(id, raw, pm.NodeVerifyStepResult, pm.NodeDispatchStep, map[string]int{pm.NodeLoadTaskContext: 1,
		pm.NodePlanSteps: 1, pm.NodeHasNextStep: 1, pm.NodeDispatchStep: 1, pm.NodeCollectResult: 1, pm.NodeVerifyStepResult: 1})
	e.Succeeds(id)
	end := agenttest.State[pm.State](e, id)
	if end.AttemptsByStep["step-1"] != 2 || len(end.History) != 4 || end.Status != pm.StatusSucceeded || end.TaskID != s.TaskID {
		t.Errorf("final state = %+v", end)
	}
	// The next dispatch remediated the golden finding.
	p := e.Prompts(id, pm.RoleWorker)
	if len(p) != 3 || !agenttest.Contains(p[0], "attempt 2", goldenFinding) || strings.Contains(p[1], goldenFinding) {
		t.Errorf("worker prompts after the golden state = %d", len(p))
	}
	if n := len(e.LLMCalls(id, pm.RolePlanner)); n != 0 {
		t.Errorf("planned again %d times", n)
	}
	if got := e.Phases(id, graph.EventNodeStarted, pm.NodeDispatchStep); len(got) != 3 || got[0] != "dispatch_step:2" {
		t.Errorf("dispatches = %v", got)
	}
}
