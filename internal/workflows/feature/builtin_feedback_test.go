package feature_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm/scripted"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"

	"github.com/gatehousehq/gatehouse/internal/workflows/agent/agenttest"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
)

// TestBuiltinAnswersFeedback: every built-in reply of the offline demo
// model answers the feedback it is given (agenttest.CheckBuiltinAnswersFeedback).
func TestBuiltinAnswersFeedback(t *testing.T) {
	t.Parallel()
	agenttest.CheckBuiltinAnswersFeedback(t, agenttest.BuiltinFeedback{
		Roles: feature.Roles(), Subjects: []string{"Let users export their reports as CSV files.", "An invoice approval service for small teams."},
		Builtin: feature.Builtin, Reply: feature.BuiltinReply, Check: checkReply,
	})
}

// checkReply: a YAML reply still parses (the end-to-end test below runs
// the validators on them).
func checkReply(t *testing.T, role, reply string) {
	t.Helper()
	if role == feature.RoleImplement || role == feature.RoleMerge {
		return // Markdown
	}
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(reply), &doc); err != nil || len(doc) == 0 {
		t.Errorf("%s: revision is not a YAML mapping (%v):\n%s", role, err, reply)
	}
}

// TestRejectingChangesTheDocument: with the offline demo model, rejecting
// the PRD, the plan and the merge summary with feedback brings a new
// version that shows the feedback and passes the validators (the issue:
// "the diff says +0 −0 No change").
func TestRejectingChangesTheDocument(t *testing.T) {
	t.Parallel()
	b := setupLLM(t, scripted.New(feature.Builtin, nil))
	in, _ := json.Marshal(feature.Input{Description: featuretest.DefaultDescription})
	task, err := b.eng.Create(context.Background(), graph.NewTask{Workflow: feature.Name, Title: "t", Input: in,
		Options: json.RawMessage(`{"gates": {}}`)})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	for _, tc := range []struct{ node, file, feedback string }{
		{feature.NodeRequirements, feature.SpecFile, "Add a requirement for exports over 10,000 rows"},
		{feature.NodePlan, feature.PlanFile, "Split the UI task into the page and its tests"},
		{feature.NodeMerge, feature.MergeFile, "Say how to roll back the migration step by step"},
	} {
		out, err := b.eng.Run(context.Background(), task.ID, 0)
		if err != nil || out.Interrupt == nil || out.Interrupt.Node != tc.node {
			t.Fatalf("Run = %+v, %v; want waiting at %s", out, err, tc.node)
		}
		if _, err := b.eng.Decide(context.Background(), task.ID, graph.DecisionInput{InterruptID: out.Interrupt.ID,
			Action: "reject", Feedback: tc.feedback, DecidedBy: "tester"}); err != nil {
			t.Fatalf("reject: %v", err)
		}
		out, err = b.eng.Run(context.Background(), task.ID, 0)
		if err != nil || out.Interrupt == nil || out.Interrupt.Node != tc.node || out.Interrupt.Iteration != 2 {
			t.Fatalf("after reject: %+v, %v; want %s again, iteration 2", out, err, tc.node)
		}
		var versions []string
		for _, a := range b.cp.Artifacts(task.ID) {
			if a.Name == tc.file {
				versions = append(versions, a.Content)
			}
		}
		if len(versions) < 2 || versions[len(versions)-1] == versions[len(versions)-2] {
			t.Fatalf("%s: %d versions, the last two equal: the rejection changed nothing", tc.file, len(versions))
		}
		if last := versions[len(versions)-1]; !strings.Contains(last, tc.feedback) {
			t.Errorf("%s v%d does not show the feedback %q:\n%s", tc.file, len(versions), tc.feedback, last)
		}
		if _, err := b.eng.Decide(context.Background(), task.ID, graph.DecisionInput{InterruptID: out.Interrupt.ID,
			Action: "approve", DecidedBy: "tester"}); err != nil {
			t.Fatalf("approve: %v", err)
		}
		if tc.node == feature.NodeRequirements {
			// The plan carries the requirement the PRD's rejection added
			// (issue 27, item 9), as a task of its own.
			out, err := b.eng.Run(context.Background(), task.ID, 0)
			if err != nil || out.Interrupt == nil || out.Interrupt.Node != feature.NodePlan {
				t.Fatalf("Run = %+v, %v; want waiting at the plan", out, err)
			}
			var plan string
			for _, a := range b.cp.Artifacts(task.ID) {
				if a.Name == feature.PlanFile {
					plan = a.Content
				}
			}
			if !strings.Contains(plan, "Meet FR-4: "+tc.feedback) {
				t.Errorf("the first plan does not carry FR-4 (%q):\n%s", tc.feedback, plan)
			}
		}
	}
	if out, err := b.eng.Run(context.Background(), task.ID, 0); err != nil || out.Status != graph.StatusSucceeded {
		t.Fatalf("final Run = %+v, %v; want succeeded", out, err)
	}
}
