package sdd_test

// A golden checkpoint of the sdd workflow (LESSONS.md: "Encoding changes
// break old checkpoints"). testdata/sdd_checkpoint_v1.json is the state of
// a task waiting at its second human review — after one reviewer revision
// and one human rejection — as version 1 of the state encoding stored it.
// It must keep loading and running to completion. Regenerate only for a
// new file (sdd_checkpoint_v2.json, …) when the encoding changes on
// purpose, with
//
//	go test ./internal/workflows/sdd/ -run TestGoldenCheckpoint -update

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent/agenttest"
	"github.com/gatehousehq/gatehouse/internal/workflows/sdd"
)

var update = flag.Bool("update", false, "rewrite the golden checkpoint in testdata")

var golden = agenttest.Golden{Path: filepath.Join("testdata", "sdd_checkpoint_v1.json")}

const goldenWords = "Add a section on GDPR data deletion."

func goldenRoles() map[string][]string {
	return map[string][]string{sdd.RoleReviewer: {needsRevision("no auth section"), `{"needs_revision": false, "issues": []}`}}
}

func writeGolden(t *testing.T) {
	e := setup(t, goldenRoles())
	id := e.Create(input(t), gatesClosed)
	itr := e.Waits(id, sdd.NodeHumanReview, sdd.GateSDD, 1)
	e.Decide(id, itr.ID, graph.ActionReject, goldenWords, "")
	e.Waits(id, sdd.NodeHumanReview, sdd.GateSDD, 2)
	golden.Write(t, e.RawState(id))
}

func TestGoldenCheckpoint(t *testing.T) {
	if *update {
		writeGolden(t)
	}
	t.Parallel()
	var s sdd.State
	raw := golden.Load(t, &s)
	if s.ProjectBrief != brief || s.RevisionCount != 1 || s.NeedsRevision || s.MaxRevisions != 3 ||
		s.DocumentStatus != sdd.StatusReview || s.Approved != nil || len(s.HumanFeedback) != 1 ||
		s.HumanFeedback[0].Feedback != goldenWords || s.ReviewFeedback == nil || strings.TrimSpace(s.FinalDocument) == "" ||
		s.RevisionFeedback != "" {
		t.Fatalf("golden state = %+v", s)
	}
	iterations := map[string]int{sdd.NodeDraftHLD: 3, sdd.NodeDraftLLD: 3, sdd.NodeDesignDatabase: 3, sdd.NodeReviewDoc: 3,
		sdd.NodeFormatDoc: 2, sdd.NodeHumanReview: 1}

	t.Run("approved at the gate", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		id := e.Create(input(t), gatesClosed)
		e.Plant(id, raw, sdd.NodeFormatDoc, sdd.NodeHumanReview, iterations)
		itr := e.Waits(id, sdd.NodeHumanReview, sdd.GateSDD, 2)
		if itr.Payload.Artifact == nil || itr.Payload.Artifact.Content != s.FinalDocument {
			t.Errorf("the gate does not show the golden document")
		}
		e.Decide(id, itr.ID, graph.ActionApprove, "", "")
		e.Succeeds(id)
		end := agenttest.State[sdd.State](e, id)
		if end.DocumentStatus != sdd.StatusFinal || end.FinalDocument != s.FinalDocument || end.HLDDraft != s.HLDDraft ||
			len(end.HumanFeedback) != 1 || end.RevisionCount != 1 {
			t.Errorf("final state lost the golden one: %+v", end)
		}
		if n := len(e.LLMCalls(id, "")); n != 0 {
			t.Errorf("%d agent calls; the golden state needed none", n)
		}
	})
	t.Run("rejected again", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		id := e.Create(input(t), gatesClosed)
		e.Plant(id, raw, sdd.NodeFormatDoc, sdd.NodeHumanReview, iterations)
		itr := e.Waits(id, sdd.NodeHumanReview, sdd.GateSDD, 2)
		e.Decide(id, itr.ID, graph.ActionReject, "Name the data owner.", "")
		itr = e.Waits(id, sdd.NodeHumanReview, sdd.GateSDD, 3)
		p := e.Prompts(id, sdd.RoleArchitect)
		if len(p) != 1 || !agenttest.Contains(p[0], goldenWords, "Name the data owner.", "revision 4") {
			t.Errorf("architect prompt after the golden state = %q", p)
		}
		e.Decide(id, itr.ID, graph.ActionApprove, "", "")
		e.Succeeds(id)
	})
}
