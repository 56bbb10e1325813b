package graph_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
)

// rejectToGraph is draft → check → review (gated; a rejection continues at
// draft) → END: the revision loop of seed 000.
func rejectToGraph(t *testing.T) *graph.Graph[st] {
	t.Helper()
	step := func(name string) graph.NodeFunc[st] {
		return func(_ context.Context, run *graph.NodeRun, s st) (st, error) {
			s.Log = append(s.Log, run.Phase)
			if name == "review" {
				run.Artifact("doc.md", "text/markdown", fmt.Sprintf("doc %d", run.Iteration))
			}
			return s, nil
		}
	}
	return compile(t, graph.New[st]("rejectto").
		Node("draft", step("draft")).Node("check", step("check")).Node("review", step("review")).
		Gate("review", graph.Gate[st]{Kind: "doc", Option: "allowDoc", Artifact: "doc.md", OnReject: rejectSt, RejectTo: "draft"}).
		Edge("draft", "check").Edge("check", "review").Edge("review", graph.END))
}

func TestGateRejectTo(t *testing.T) {
	t.Parallel()
	g := rejectToGraph(t)
	e := newEnv(t, g)
	id := e.create("rejectto", `{"gates": {}}`)
	for i := 1; i <= 2; i++ {
		itr := e.waiting(id)
		if itr.Node != "review" || itr.Iteration != i || itr.Payload.Artifact.Content != fmt.Sprintf("doc %d", i) {
			t.Fatalf("interrupt %d = %+v", i, itr)
		}
		e.decide(id, graph.DecisionInput{InterruptID: itr.ID, Action: "reject", Feedback: fmt.Sprintf("redo %d", i)})
	}
	itr := e.waiting(id)
	e.decide(id, graph.DecisionInput{InterruptID: itr.ID, Action: "approve"})
	if out := e.run(id); out.Status != graph.StatusSucceeded {
		t.Fatalf("outcome = %+v", out)
	}
	want := []string{"draft", "check", "review", "rejected 1: redo 1", "draft:2", "check:2", "review:2",
		"rejected 2: redo 2", "draft:3", "check:3", "review:3"}
	if got := e.result(id).Log; !slices.Equal(got, want) {
		t.Errorf("log = %v, want %v", got, want)
	}

	d := g.Describe()
	if !slices.Contains(d.Edges, graph.EdgeInfo{From: "review", To: "draft", Condition: "rejected"}) {
		t.Errorf("edges = %+v, want review → draft on rejection", d.Edges)
	}
	if !strings.Contains(d.Mermaid, "review -.->|rejected| draft") {
		t.Errorf("mermaid lacks the rejection edge:\n%s", d.Mermaid)
	}

	_, err := graph.New[st]("bad").Node("a", g2node).
		Gate("a", graph.Gate[st]{Kind: "k", OnReject: rejectSt, RejectTo: "nowhere"}).
		Edge("a", graph.END).Init(initSt).Compile()
	if err == nil || !strings.Contains(err.Error(), `rejects to unknown node "nowhere"`) {
		t.Errorf("compile error = %v", err)
	}
}

func g2node(_ context.Context, _ *graph.NodeRun, s st) (st, error) { return s, nil }
