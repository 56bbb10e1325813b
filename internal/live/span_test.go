package live

import "testing"

func TestCovered(t *testing.T) {
	var spans []span
	for _, sp := range []span{{1, 3}, {4, 6}, {9, 9}, {10, 12}} {
		spans = appendSpan(spans, sp)
	}
	if len(spans) != 2 {
		t.Fatalf("adjacent spans not merged: %v", spans)
	}
	cases := []struct {
		first, last int64
		want        bool
	}{
		{1, 6, true}, {2, 5, true}, {9, 12, true}, {6, 9, false}, {7, 8, false}, {12, 13, false}, {13, 13, false},
	}
	for _, c := range cases {
		if got := covered(spans, c.first, c.last); got != c.want {
			t.Errorf("covered(%d, %d) = %v, want %v", c.first, c.last, got, c.want)
		}
	}
	for i := int64(0); i < 100; i++ {
		spans = appendSpan(spans, span{100 + 2*i, 100 + 2*i})
	}
	if len(spans) != 32 {
		t.Fatalf("%d spans kept, want 32", len(spans))
	}
}

func TestParsePayload(t *testing.T) {
	const id = "0b5e7d9c-2a34-4f7e-9d4b-1c2d3e4f5a6b"
	task, first, last, err := parsePayload(id + ":3:7")
	if err != nil || task != id || first != 3 || last != 7 {
		t.Fatalf("got %q %d %d %v", task, first, last, err)
	}
	for _, bad := range []string{id, id + ":3", id + ":3:7:9", "nope:1:2", id + ":x:2", id + ":1:y", id + ":0:2", id + ":5:4", ""} {
		if _, _, _, err := parsePayload(bad); err == nil {
			t.Errorf("parsePayload(%q): no error", bad)
		}
	}
}
