package pm_test

import (
	"testing"

	"github.com/gatehousehq/gatehouse/internal/workflows/agent/agenttest"
	"github.com/gatehousehq/gatehouse/internal/workflows/pm"
)

// TestBuiltinAnswersFeedback: every built-in reply of the offline demo
// model answers the feedback it is given (agenttest.CheckBuiltinAnswersFeedback).
func TestBuiltinAnswersFeedback(t *testing.T) {
	t.Parallel()
	agenttest.CheckBuiltinAnswersFeedback(t, agenttest.BuiltinFeedback{
		Roles: pm.Roles(), Subjects: []string{"Let users export their reports as CSV files.", "An invoice approval service for small teams."},
		Builtin: pm.Builtin, Reply: pm.BuiltinReply, Check: checkReply,
	})
}

// checkReply: a revision is still of the form the workflow reads.
func checkReply(t *testing.T, role, reply string) {
	t.Helper()
	switch role {
	case pm.RolePlanner:
		if _, err := pm.ParsePlan(reply); err != nil {
			t.Errorf("plan no longer parses: %v\n%s", err, reply)
		}
	case pm.RoleVerifier:
		if _, err := pm.ParseVerification(reply); err != nil {
			t.Errorf("verification no longer parses: %v", err)
		}
	}
}
