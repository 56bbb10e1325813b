package analyze_test

import (
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent/agenttest"
	"github.com/gatehousehq/gatehouse/internal/workflows/analyze"
)

// TestAnalystMentionsFilesOnlyWhenAttached (issue 27, item 9): the
// offline analyst speaks of attached files only when the task has some —
// then by name — in its questions and in the final analysis, and the
// prompt asks to study files only when there are files.
func TestAnalystMentionsFilesOnlyWhenAttached(t *testing.T) {
	t.Parallel()
	walk := func(t *testing.T, e *agenttest.Env, in string) (first, final, prompt string) {
		t.Helper()
		id := e.Create(in, "")
		itr := e.Waits(id, analyze.NodeAsk, analyze.InterruptQuestion, 1)
		first = itr.Payload.Question
		e.Decide(id, itr.ID, graph.ActionRespond, "", "Every Monday, all customers.")
		itr = e.Waits(id, analyze.NodeAsk, analyze.InterruptQuestion, 2)
		e.Decide(id, itr.ID, graph.ActionRespond, "", analyze.ApprovalPhrase)
		e.Succeeds(id)
		return first, agenttest.Result[analyze.Result](e, id).Analysis, e.Prompts(id, analyze.RoleAnalyst)[0]
	}
	t.Run("None", func(t *testing.T) {
		t.Parallel()
		first, final, prompt := walk(t, setup(t, nil), input(t))
		for what, text := range map[string]string{"first question": first, "final analysis": final, "first prompt": prompt} {
			if strings.Contains(strings.ToLower(text), "attached files") || strings.Contains(strings.ToLower(text), "attached material") ||
				strings.Contains(text, "Study the attached") {
				t.Errorf("%s speaks of attached files, none are:\n%s", what, text)
			}
		}
	})
	t.Run("Two", func(t *testing.T) {
		t.Parallel()
		notes := analyze.File{Name: "notes.md", Content: "Mondays: invoicing batch."}
		first, final, prompt := walk(t, setup(t, nil), input(t, logFile, notes))
		if !strings.Contains(first, "attached files (checkout.log, notes.md)") {
			t.Errorf("first question does not name the files: %q", first)
		}
		if !strings.Contains(final, "attached files (checkout.log, notes.md)") {
			t.Errorf("final analysis does not name the files:\n%s", final)
		}
		if !strings.Contains(prompt, "Study the attached files.") {
			t.Errorf("first prompt does not ask to study the files:\n%s", prompt)
		}
	})
	// The query itself may look like a prefix: it stays the query.
	if got, _ := analyze.BuiltinReply(analyze.RoleAnalyst, analyze.Subject(`[files ["x"]] odd`, 1, false)); !strings.Contains(got, `[files [\"x\"]] odd`) ||
		strings.Contains(got, "attached") {
		t.Errorf("a query that looks like the files prefix: %q", got)
	}
}
