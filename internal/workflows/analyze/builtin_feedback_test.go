package analyze_test

import (
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/internal/workflows/analyze"
)

// TestBuiltinAnswersFeedback: every built-in reply of the offline demo
// model changes when it is given feedback, shows the feedback (the
// slogan: its key word), and stays the same for the same input; without
// feedback it is the first-run reply exactly.
func TestBuiltinAnswersFeedback(t *testing.T) {
	t.Parallel()
	feedback := []string{"Cover offline support for field engineers"}
	for _, role := range analyze.Roles() {
		for _, subject := range []string{analyze.Subject("Why do checkout requests time out?", 1, false), analyze.Subject("Why do checkout requests time out?", 2, false), analyze.Subject("Why do checkout requests time out?", 3, false), analyze.Subject("Why do checkout requests time out?", 3, true)} {
			t.Run(role, func(t *testing.T) {
				t.Parallel()
				first, ok := analyze.Builtin(role, subject, nil)
				if !ok {
					t.Fatalf("no built-in reply for %s", role)
				}
				if plain, _ := analyze.BuiltinReply(role, subject); plain != first {
					t.Errorf("Builtin without feedback differs from BuiltinReply:\n%s\n---\n%s", first, plain)
				}
				revised, _ := analyze.Builtin(role, subject, feedback)
				if revised == first {
					t.Fatalf("%s: the reply did not change with feedback:\n%s", role, revised)
				}
				want := feedback[0]
				if role == "slogan.writer" {
					want = "Engineers"
				}
				if !strings.Contains(revised, want) {
					t.Errorf("%s: the revision does not show the feedback %q:\n%s", role, want, revised)
				}
				if again, _ := analyze.Builtin(role, subject, feedback); again != revised {
					t.Errorf("%s: not deterministic", role)
				}
				twice, _ := analyze.Builtin(role, subject, append(feedback, "Name the retention period"))
				if twice == revised {
					t.Errorf("%s: a second round of feedback changed nothing", role)
				}
				checkReply(t, role, revised)
				checkReply(t, role, twice)
			})
		}
	}
}

// checkReply: a revision is still of the form the workflow reads.
func checkReply(t *testing.T, role, reply string) {
	t.Helper()
	if strings.TrimSpace(reply) == "" {
		t.Errorf("%s: empty reply", role)
	}
}
