package console

import (
	"encoding/json"
	"testing"
)

// TestRenderResult: long texts print as blocks, the rest as JSON.
func TestRenderResult(t *testing.T) {
	t.Parallel()
	raw, _ := json.Marshal(map[string]any{"final_analysis": "# Analysis\n\nUse a queue.", "turn_count": 2, "approved": true})
	got := RenderResult(raw)
	want := "result:\n  approved: true\n  final_analysis:\n    # Analysis\n\n    Use a queue.\n  turn_count: 2\n"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}
