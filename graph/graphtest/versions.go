package graphtest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gatehousehq/gatehouse/graph"
)

// ReviewName is the workflow both Review definitions are called by.
const ReviewName = "review"

// Review returns one of two definitions of the workflow "review", to
// simulate a deployment that changed a workflow under waiting tasks:
// version 1 is draft → review (gated: kind "review", option
// "allowReview") → publish → END; version 2 drops the review node
// (draft → publish → END). Anything else panics.
func Review(version int) *graph.Graph[LinearState] {
	work := func(_ context.Context, run *graph.NodeRun, s LinearState) (LinearState, error) {
		s.Count++
		s.Path = append(s.Path, run.Phase)
		run.Artifact(run.Node+".md", "text/markdown", fmt.Sprintf("%s, step %d", run.Phase, s.Count))
		return s, nil
	}
	b := graph.New[LinearState](ReviewName).StateVersion(1).
		Node("draft", work).Node("publish", work).Edge("publish", graph.END)
	switch version {
	case 1:
		b.Node("review", work).
			Gate("review", graph.Gate[LinearState]{Kind: "review", Option: "allowReview", Artifact: "review.md",
				OnReject: func(s LinearState, fb string, _ int) (LinearState, error) {
					s.Notes["feedback"] = fb
					return s, nil
				}}).
			Edge("draft", "review").Edge("review", "publish")
	case 2:
		b.Edge("draft", "publish")
	default:
		panic(fmt.Sprintf("graphtest.Review: no version %d", version))
	}
	g, err := b.Entry("draft").Init(func(json.RawMessage, graph.Options) (LinearState, error) {
		return LinearState{Path: []string{}, Notes: map[string]string{}}, nil
	}).Compile()
	if err != nil {
		panic(err)
	}
	return g
}
