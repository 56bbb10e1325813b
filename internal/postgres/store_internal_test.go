package postgres

import (
	"encoding/json"
	"testing"
)

// TestIterationsJSON: the hand-written encoding of a checkpoint's
// iteration counters is json.Marshal's, byte for byte, whatever the keys.
func TestIterationsJSON(t *testing.T) {
	for _, m := range []map[string]int{
		nil,
		{},
		{"draft": 1},
		{"review": 3, "draft": 12, "a": 0, "z_9": -4},
		{`quo"te`: 1, `back\slash`: 2, "tab\t": 3, "<html>&": 4, "é": 5, "\xff": 6, "\u2028": 7},
	} {
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if m == nil {
			want = []byte(`{}`)
		}
		if got := iterationsJSON(m); string(got) != string(want) {
			t.Errorf("iterationsJSON(%v) = %s, want %s", m, got, want)
		}
	}
}
