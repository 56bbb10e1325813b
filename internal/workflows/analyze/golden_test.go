package analyze_test

// A golden checkpoint of the analyze workflow (LESSONS.md: "Encoding
// changes break old checkpoints"): testdata/analyze_checkpoint_v1.json is
// the state of a task with an attached file waiting on the analyst's second
// question, as version 1 of the state encoding stored it. It must keep
// loading and running to completion. Regenerate only for a new file when
// the encoding changes on purpose, with
//
//	go test ./internal/workflows/analyze/ -run TestGoldenCheckpoint -update

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent/agenttest"
	"github.com/gatehousehq/gatehouse/internal/workflows/analyze"
)

var update = flag.Bool("update", false, "rewrite the golden checkpoint in testdata")

var golden = agenttest.Golden{Path: filepath.Join("testdata", "analyze_checkpoint_v1.json")}

func writeGolden(t *testing.T) {
	e := setup(t, nil)
	id := e.Create(input(t, logFile), "")
	itr := e.Waits(id, analyze.NodeAsk, analyze.InterruptQuestion, 1)
	e.Decide(id, itr.ID, graph.ActionRespond, "", "Since the invoicing batch moved to Mondays.")
	e.Waits(id, analyze.NodeAsk, analyze.InterruptQuestion, 2)
	golden.Write(t, e.RawState(id))
}

func TestGoldenCheckpoint(t *testing.T) {
	if *update {
		writeGolden(t)
	}
	t.Parallel()
	var s analyze.State
	raw := golden.Load(t, &s)
	if s.Query != query || len(s.FileContents) != 1 || s.FileContents[0] != logFile || len(s.AnalysisHistory) != 4 ||
		s.Turns != 2 || s.CurrentAnalysisQuery == "" || s.AnalysisOutput != "" || s.UserInput != "" {
		t.Fatalf("golden state = %+v", s)
	}
	e := setup(t, nil)
	id := e.Create(input(t), "")
	e.Plant(id, raw, analyze.NodePrepare, analyze.NodeAsk, map[string]int{analyze.NodePrepare: 2, analyze.NodeAsk: 1})
	itr := e.Waits(id, analyze.NodeAsk, analyze.InterruptQuestion, 2)
	if itr.Payload.Question != s.CurrentAnalysisQuery {
		t.Errorf("question = %q, want the golden one", itr.Payload.Question)
	}
	e.Decide(id, itr.ID, graph.ActionRespond, "", "solution approved")
	e.Succeeds(id)
	res := agenttest.Result[analyze.Result](e, id)
	if !strings.HasPrefix(res.Analysis, "# Analysis") || res.Turns != 2 || len(res.Files) != 1 {
		t.Errorf("result = %+v", res)
	}
	// The final prompt still has the golden file and conversation.
	p := e.Prompts(id, analyze.RoleAnalyst)
	if len(p) != 1 || !agenttest.Contains(p[0], logFile.Content, "Since the invoicing batch moved to Mondays.") {
		t.Errorf("final prompt = %q", p)
	}
}
