package email

import (
	"fmt"
	"testing"
)

// TestLineDiff: the email's diff is the changed lines with one line of
// context around them, removals before additions, cut at max lines.
func TestLineDiff(t *testing.T) {
	t.Parallel()
	a, b := "a\nb\nc\nd\ne\nf\ng", "a\nb\nX\nd\ne\nf\ng\nh"
	want := fmt.Sprint([]string{"=b", "-c", "+X", "=d", "=g", "+h"})
	var ops []string
	for _, l := range LineDiff(a, b, 10) {
		ops = append(ops, l.Op+l.Text)
	}
	if fmt.Sprint(ops) != want {
		t.Fatalf("LineDiff = %v, want %s", ops, want)
	}
	if n := len(LineDiff(a, b, 3)); n != 3 {
		t.Fatalf("LineDiff with max 3 gave %d lines", n)
	}
	if d := LineDiff(a, a, 10); len(d) != 0 {
		t.Fatalf("LineDiff of equal texts = %v", d)
	}
}
