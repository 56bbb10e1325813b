package sdd_test

import (
	"testing"

	"github.com/gatehousehq/gatehouse/internal/workflows/agent/agenttest"
	"github.com/gatehousehq/gatehouse/internal/workflows/sdd"
)

// TestBuiltinAnswersFeedback: every built-in reply of the offline demo
// model answers the feedback it is given (agenttest.CheckBuiltinAnswersFeedback).
func TestBuiltinAnswersFeedback(t *testing.T) {
	t.Parallel()
	agenttest.CheckBuiltinAnswersFeedback(t, agenttest.BuiltinFeedback{
		Roles: sdd.Roles(), Subjects: []string{"Let users export their reports as CSV files.", "An invoice approval service for small teams."},
		Builtin: sdd.Builtin, Reply: sdd.BuiltinReply, Check: checkReply,
	})
}

// checkReply: a revision is still of the form the workflow reads.
func checkReply(t *testing.T, role, reply string) {
	t.Helper()
	if role == sdd.RoleReviewer {
		if _, err := sdd.ParseReview(reply); err != nil {
			t.Errorf("review no longer parses: %v", err)
		}
	}
}
