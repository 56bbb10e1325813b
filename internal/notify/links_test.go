package notify

import "testing"

// TestKindLabel: a kind reads as words in a subject or a page's title.
func TestKindLabel(t *testing.T) {
	t.Parallel()
	for kind, want := range map[string]string{"prd": "PRD", "sdd": "SDD", "": "Decision", "merge": "Merge",
		"deploy_check": "Deploy check", "tool_call_v2": "Tool call v2"} {
		if got := KindLabel(kind); got != want {
			t.Errorf("KindLabel(%q) = %q, want %q", kind, got, want)
		}
	}
}
