package analyze_test

import (
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/internal/workflows/agent/agenttest"
	"github.com/gatehousehq/gatehouse/internal/workflows/analyze"
)

// TestBuiltinAnswersFeedback: every built-in reply of the offline demo
// model answers the feedback it is given (agenttest.CheckBuiltinAnswersFeedback).
func TestBuiltinAnswersFeedback(t *testing.T) {
	t.Parallel()
	agenttest.CheckBuiltinAnswersFeedback(t, agenttest.BuiltinFeedback{
		Roles: analyze.Roles(), Subjects: []string{analyze.Subject("Why do checkout requests time out?", 1, false), analyze.Subject("Why do checkout requests time out?", 2, false), analyze.Subject("Why do checkout requests time out?", 3, false), analyze.Subject("Why do checkout requests time out?", 3, true)},
		Builtin: analyze.Builtin, Reply: analyze.BuiltinReply, Check: checkReply,
	})
}

// checkReply: a revision is still of the form the workflow reads.
func checkReply(t *testing.T, role, reply string) {
	t.Helper()
	if strings.TrimSpace(reply) == "" {
		t.Errorf("%s: empty reply", role)
	}
}
