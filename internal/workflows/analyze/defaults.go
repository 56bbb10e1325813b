package analyze

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
)

// BuiltinReply is the scripted provider's reply of the analyst for an
// analyst call's Subject (scripted.Defaults): a clarifying question on
// the first turns, a proposed solution from the third, and a Markdown
// analysis for the final call — each naming the query's own subject. ok
// is false for a role that is not the workflow's.
func BuiltinReply(role, subject string) (reply string, ok bool) {
	if role != RoleAnalyst {
		return "", false
	}
	final, turn, query := parseSubject(subject)
	topic := agent.FirstSentence(query, 80)
	if topic == "" {
		topic = "this request"
	}
	focus := agent.Keyword(query, 0, "the system")
	if final {
		return fmt.Sprintf(`# Analysis: %[1]s

## Summary of the request
%[2]s

## Findings
- The current behaviour around %[3]s is the main source of the problem described.
- The attached material and the answers given agree on the scope; nothing outside it needs to change.

## The agreed solution
1. Reproduce the problem with a test that fails today.
2. Change the handling of %[3]s as proposed, behind a feature flag.
3. Roll out to a small group first, watch the error rate and latency, then to everyone.

## Decisions and assumptions
- The fix stays backwards compatible; no data migration is needed.
- Monitoring already in place is enough to judge the rollout.

## Next steps
- Write the failing test and the fix; review; release behind the flag.
- Remove the flag one week after a clean rollout.
`, topic, agent.Excerpt(query, 600), focus), true
	}
	switch {
	case turn <= 1:
		return fmt.Sprintf("I have read your request (%q) and the attached files. Before I propose anything: "+
			"who runs into this problem, and how often does it happen?", topic), true
	case turn == 2:
		return fmt.Sprintf("Thanks, that helps. Which constraints must a solution for %s respect — deadlines, "+
			"compatibility with existing clients, or technologies you already use?", focus), true
	default:
		return fmt.Sprintf(`Here is what I propose for %[1]q:

1. Reproduce the problem with a failing test around %[2]s.
2. Fix the handling of %[2]s, behind a feature flag, keeping existing clients working.
3. Roll out gradually while watching errors and latency.

If this works for you, reply %[3]s; otherwise tell me what to change.`, topic, focus, ApprovalPhrase), true
	}
}

// parseSubject reads Subject's prefixes back.
func parseSubject(subject string) (final bool, turn int, query string) {
	if rest, ok := strings.CutPrefix(subject, finalPrefix); ok {
		return true, 0, rest
	}
	if rest, ok := strings.CutPrefix(subject, "[turn "); ok {
		if n, q, ok := strings.Cut(rest, "] "); ok {
			if t, err := strconv.Atoi(n); err == nil {
				return false, t, q
			}
		}
	}
	return false, 1, subject
}
