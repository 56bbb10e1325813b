// Package textdiff compares texts line by line: the one edit script the
// desk's artifact diff and the notification emails both show.
//
// It imports views (the lines it renders) only.
package textdiff

import (
	"strings"
	"time"

	"github.com/sergi/go-diff/diffmatchpatch"

	"github.com/gatehousehq/gatehouse/views"
)

// Timeout bounds the Myers search: past it the library returns a valid
// but not minimal diff rather than hold the page.
const Timeout = 200 * time.Millisecond

// lines splits s as the diff counts lines: a final newline ends the last
// line rather than starting an empty one.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// Ops is the edit script from a to b (Myers, github.com/sergi/go-diff),
// every line of both in order with its old and new line numbers, each run of
// changes as its removals then its additions.
func Ops(a, b string) []views.DiffLine {
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = Timeout
	// Each line ends with a newline, the last one too, so that a missing
	// final newline does not make the last line differ.
	ra, rb, table := dmp.DiffLinesToRunes(terminated(a), terminated(b))
	diffs := dmp.DiffCharsToLines(dmp.DiffMainRunes(ra, rb, false), table)
	out := make([]views.DiffLine, 0, len(diffs)*2)
	old, cur := 1, 1
	for _, df := range diffs {
		for _, l := range lines(df.Text) {
			switch df.Type {
			case diffmatchpatch.DiffEqual:
				out = append(out, views.DiffLine{Op: "=", Text: l, Old: old, New: cur})
				old++
				cur++
			case diffmatchpatch.DiffDelete:
				out = append(out, views.DiffLine{Op: "-", Text: l, Old: old})
				old++
			case diffmatchpatch.DiffInsert:
				out = append(out, views.DiffLine{Op: "+", Text: l, New: cur})
				cur++
			}
		}
	}
	// Removals read better before the additions they pair with.
	return regroup(out)
}

func terminated(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

// regroup orders each run of changed lines as removals then additions.
func regroup(ops []views.DiffLine) []views.DiffLine {
	out := make([]views.DiffLine, 0, len(ops))
	for i := 0; i < len(ops); {
		if ops[i].Op == "=" {
			out = append(out, ops[i])
			i++
			continue
		}
		j := i
		for j < len(ops) && ops[j].Op != "=" {
			j++
		}
		for _, o := range ops[i:j] {
			if o.Op == "-" {
				out = append(out, o)
			}
		}
		for _, o := range ops[i:j] {
			if o.Op == "+" {
				out = append(out, o)
			}
		}
		i = j
	}
	return out
}
