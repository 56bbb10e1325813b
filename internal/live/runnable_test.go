package live

import "testing"

func TestParseRunnable(t *testing.T) {
	for _, c := range []struct {
		in   string
		task string
		seq  int64
	}{
		{"0b6e1f1c-3f0e-4bd7-9a51-5a3f5e4c9d10", "0b6e1f1c-3f0e-4bd7-9a51-5a3f5e4c9d10", 0},
		{"0b6e1f1c-3f0e-4bd7-9a51-5a3f5e4c9d10@17", "0b6e1f1c-3f0e-4bd7-9a51-5a3f5e4c9d10", 17},
		{"0b6e1f1c-3f0e-4bd7-9a51-5a3f5e4c9d10@x", "0b6e1f1c-3f0e-4bd7-9a51-5a3f5e4c9d10", 0},
		{"0b6e1f1c-3f0e-4bd7-9a51-5a3f5e4c9d10@-4", "0b6e1f1c-3f0e-4bd7-9a51-5a3f5e4c9d10", 0},
	} {
		if task, seq := parseRunnable(c.in); task != c.task || seq != c.seq {
			t.Errorf("parseRunnable(%q) = %q, %d; want %q, %d", c.in, task, seq, c.task, c.seq)
		}
	}
}
