package desk

import (
	"testing"
	"time"
)

func TestDueIn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "overdue"},
		{0, "overdue"},
		{45 * time.Second, "45 s"},
		{12*time.Minute + 30*time.Second, "12 min"},
		{3 * time.Hour, "3 h"},
		{2*time.Hour + 59*time.Minute + 59*time.Second, "2 h 59 min"},
		{14*time.Hour + 40*time.Minute, "14 h"},
		{50 * time.Hour, "2 d"},
	} {
		if got := dueIn(tc.d); got != tc.want {
			t.Errorf("dueIn(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
