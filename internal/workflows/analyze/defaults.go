package analyze

import (
	"encoding/json"
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
	return Builtin(role, subject, nil)
}

// Builtin is BuiltinReply answering feedback (the human's answers so far,
// oldest first): each message quotes the last answer it builds on, and the
// final analysis lists everything the human said.
func Builtin(role, subject string, feedback []string) (reply string, ok bool) {
	fb := agent.Points(feedback)
	if role != RoleAnalyst {
		return "", false
	}
	final, turn, files, query := parseSubject(subject)
	topic := agent.FirstSentence(query, 80)
	if topic == "" {
		topic = "this request"
	}
	focus := agent.Noun(query, 0, "the system")
	if final {
		return fmt.Sprintf(`# Analysis: %[1]s

## Summary of the request
%[2]s

## Findings
- The current behaviour around %[3]s is the main source of the problem described.
- %[5]s

## The agreed solution
1. Reproduce the problem with a test that fails today.
2. Change the handling of %[3]s as proposed, behind a feature flag.
3. Roll out to a small group first, watch the error rate and latency, then to everyone.

%[4]s## Decisions and assumptions
- The fix stays backwards compatible; no data migration is needed.
- Monitoring already in place is enough to judge the rollout.

## Next steps
- Write the failing test and the fix; review; release behind the flag.
- Remove the flag one week after a clean rollout.
`, topic, agent.Excerpt(query, 600), focus, told(fb), scope(files, fb)), true
	}
	said := ""
	if len(fb) > 0 {
		said = fmt.Sprintf("You said: %q. ", fb[len(fb)-1])
	}
	switch {
	case turn <= 1:
		return fmt.Sprintf("%sI have read your request (%q)%s. Before I suggest a fix: "+
			"who runs into this problem, and how often does it happen?", said, topic, andFiles(files)), true
	case turn == 2:
		return fmt.Sprintf("%sThanks, that helps. Which constraints must a solution for %s respect — deadlines, "+
			"compatibility with existing clients, or technologies you already use?", said, focus), true
	default:
		return fmt.Sprintf(`%[4]sHere is what I propose for %[1]q:

1. Reproduce the problem with a failing test around %[2]s.
2. Fix the handling of %[2]s, behind a feature flag, keeping existing clients working.
3. Roll out gradually while watching errors and latency.

If this works for you, reply %[3]s; otherwise tell me what to change.`, topic, focus, ApprovalPhrase, said), true
	}
}

// parseSubject reads Subject's prefixes back.
func parseSubject(subject string) (final bool, turn int, files []string, query string) {
	turn = 1
	if rest, ok := strings.CutPrefix(subject, finalPrefix); ok {
		final, turn, subject = true, 0, rest
	} else if rest, ok := strings.CutPrefix(subject, "[turn "); ok {
		if n, q, ok := strings.Cut(rest, "] "); ok {
			if t, err := strconv.Atoi(n); err == nil {
				turn, subject = t, q
			}
		}
	}
	if rest, ok := strings.CutPrefix(subject, filesPrefix); ok {
		dec := json.NewDecoder(strings.NewReader(rest))
		var names []string
		if dec.Decode(&names) == nil {
			if q, ok := strings.CutPrefix(rest[dec.InputOffset():], "] "); ok {
				files, subject = names, q
			}
		}
	}
	return final, turn, files, subject
}

// andFiles is " and the attached files (a.log, b.txt)", "" for none.
func andFiles(files []string) string {
	switch len(files) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf(" and the attached file %s", files[0])
	}
	return fmt.Sprintf(" and the %d attached files (%s)", len(files), strings.Join(files, ", "))
}

// scope is the final analysis's finding about what agrees on the scope.
func scope(files, fb []string) string {
	var what string
	switch {
	case len(files) > 0 && len(fb) > 0:
		what = "The attached files (" + strings.Join(files, ", ") + ") and the answers given agree on the scope"
	case len(files) > 0:
		what = "The attached files (" + strings.Join(files, ", ") + ") confirm the scope"
	case len(fb) > 0:
		what = "The answers given settle the scope"
	default:
		what = "The request itself sets the scope"
	}
	return what + "; nothing outside it needs to change."
}

// told is the final analysis's section listing the human's answers ("" for
// none).
func told(fb []string) string {
	if len(fb) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString("## What you told me\n")
	for _, f := range fb {
		sb.WriteString("- " + f + "\n")
	}
	return sb.String() + "\n"
}
