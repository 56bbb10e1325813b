package agenttest

import (
	"strings"
	"testing"
)

// BuiltinFeedback is what CheckBuiltinAnswersFeedback needs of a
// workflow's offline demo replies.
type BuiltinFeedback struct {
	Roles    []string
	Subjects []string
	// Builtin is the workflow's Builtin(role, subject, feedback).
	Builtin func(role, subject string, feedback []string) (string, bool)
	// Reply is the workflow's BuiltinReply(role, subject): the first-run
	// reply, which Builtin without feedback must equal.
	Reply func(role, subject string) (string, bool)
	// Shows, when set, is what a revision must contain for a role instead
	// of the feedback itself (the slogan writer answers with a key word).
	Shows func(role, feedback string) string
	// Check, when set, checks that a revision is still of the form the
	// workflow reads (YAML that parses, a one-line slogan, …).
	Check func(t *testing.T, role, reply string)
}

// CheckBuiltinAnswersFeedback: every built-in reply changes when it is
// given feedback, shows the feedback, stays the same for the same input,
// changes again with a second round, and without feedback is the
// first-run reply exactly (SPEC §6: realistic enough to demo a rejection).
func CheckBuiltinAnswersFeedback(t *testing.T, b BuiltinFeedback) {
	t.Helper()
	feedback := []string{"Cover offline support for field engineers"}
	for _, role := range b.Roles {
		for _, subject := range b.Subjects {
			t.Run(role, func(t *testing.T) {
				t.Parallel()
				first, ok := b.Builtin(role, subject, nil)
				if !ok {
					t.Fatalf("no built-in reply for %s", role)
				}
				if plain, _ := b.Reply(role, subject); plain != first {
					t.Errorf("Builtin without feedback differs from BuiltinReply:\n%s\n---\n%s", first, plain)
				}
				revised, _ := b.Builtin(role, subject, feedback)
				if revised == first {
					t.Fatalf("%s: the reply did not change with feedback:\n%s", role, revised)
				}
				want := feedback[0]
				if b.Shows != nil {
					want = b.Shows(role, want)
				}
				if !strings.Contains(revised, want) {
					t.Errorf("%s: the revision does not show the feedback %q:\n%s", role, want, revised)
				}
				if again, _ := b.Builtin(role, subject, feedback); again != revised {
					t.Errorf("%s: not deterministic", role)
				}
				twice, _ := b.Builtin(role, subject, append(feedback, "Name the retention period"))
				if twice == revised {
					t.Errorf("%s: a second round of feedback changed nothing", role)
				}
				if b.Check != nil {
					b.Check(t, role, revised)
					b.Check(t, role, twice)
				}
			})
		}
	}
}
