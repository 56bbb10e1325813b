package slogan_test

import (
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/internal/workflows/agent/agenttest"
	"github.com/gatehousehq/gatehouse/internal/workflows/slogan"
)

// TestBuiltinAnswersFeedback: every built-in reply of the offline demo
// model answers the feedback it is given (agenttest.CheckBuiltinAnswersFeedback).
func TestBuiltinAnswersFeedback(t *testing.T) {
	t.Parallel()
	agenttest.CheckBuiltinAnswersFeedback(t, agenttest.BuiltinFeedback{
		Roles: slogan.Roles(), Subjects: []string{"Organic tea for night owls", "A bicycle repair app"},
		Builtin: slogan.Builtin, Reply: slogan.BuiltinReply, Check: checkReply,
		Shows: func(role, feedback string) string {
			if role == slogan.RoleWriter {
				return "Engineers"
			}
			return feedback
		},
	})
}

// checkReply: a revision is still of the form the workflow reads.
func checkReply(t *testing.T, role, reply string) {
	t.Helper()
	if strings.Contains(reply, "\n") && role == slogan.RoleWriter {
		t.Errorf("a slogan on several lines: %q", reply)
	}
}
