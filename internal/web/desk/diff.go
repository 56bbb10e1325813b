package desk

import (
	"strings"
	"unicode"

	"github.com/sergi/go-diff/diffmatchpatch"

	"github.com/gatehousehq/gatehouse/internal/textdiff"
	"github.com/gatehousehq/gatehouse/views"
)

// diffContext is the number of unchanged lines shown around a change.
const diffContext = 3

// Word marks: only in change blocks of at most maxWordPairs line pairs and
// lines of at most maxWordLine bytes, so that a rewritten document costs
// no more than its line diff.
const (
	maxWordPairs = 200
	maxWordLine  = 2000
)

// lineDiff compares two texts line by line (Myers, github.com/sergi/go-diff),
// marks the changed words inside changed lines, and groups the changes in
// hunks with diffContext lines of context.
func lineDiff(a, b string) views.Diff {
	ops := textdiff.Ops(a, b)
	var d views.Diff
	for _, op := range ops {
		switch op.Op {
		case "+":
			d.Added++
		case "-":
			d.Removed++
		}
	}
	d.Same = d.Added == 0 && d.Removed == 0
	markWords(ops)
	d.Hunks = hunks(ops, diffContext)
	return d
}

// markWords pairs, in each block of changes, the i-th removed line with the
// i-th added one and marks the words that differ between them.
func markWords(ops []views.DiffLine) {
	for i := 0; i < len(ops); {
		if ops[i].Op != "-" {
			i++
			continue
		}
		del := i
		for i < len(ops) && ops[i].Op == "-" {
			i++
		}
		add := i
		for i < len(ops) && ops[i].Op == "+" {
			i++
		}
		pairs := min(add-del, i-add)
		if pairs > maxWordPairs {
			continue
		}
		for k := range pairs {
			o, n := &ops[del+k], &ops[add+k]
			if len(o.Text) > maxWordLine || len(n.Text) > maxWordLine {
				continue
			}
			o.Segs, n.Segs = wordDiff(o.Text, n.Text)
		}
	}
}

// wordDiff splits two versions of a line into segments, those that
// differ marked. Lines with nothing in common are left unmarked: the
// whole line changed, and marking all of it says nothing more.
func wordDiff(a, b string) (sa, sb []views.DiffSeg) {
	ta, tb := words(a), words(b)
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = textdiff.Timeout
	// One token a "line": tokens hold no newline.
	ra, rb, table := dmp.DiffLinesToRunes(strings.Join(ta, "\n")+"\n", strings.Join(tb, "\n")+"\n")
	diffs := dmp.DiffCharsToLines(dmp.DiffMainRunes(ra, rb, false), table)
	same := false
	for _, df := range diffs {
		text := strings.ReplaceAll(strings.TrimSuffix(df.Text, "\n"), "\n", "")
		if text == "" {
			continue
		}
		switch df.Type {
		case diffmatchpatch.DiffEqual:
			same = same || strings.TrimSpace(text) != ""
			sa = appendSeg(sa, text, false)
			sb = appendSeg(sb, text, false)
		case diffmatchpatch.DiffDelete:
			sa = appendSeg(sa, text, true)
		case diffmatchpatch.DiffInsert:
			sb = appendSeg(sb, text, true)
		}
	}
	if !same {
		return nil, nil
	}
	return sa, sb
}

func appendSeg(segs []views.DiffSeg, text string, changed bool) []views.DiffSeg {
	if n := len(segs); n > 0 && segs[n-1].Changed == changed {
		segs[n-1].Text += text
		return segs
	}
	return append(segs, views.DiffSeg{Text: text, Changed: changed})
}

// words splits a line into words, runs of spaces and single punctuation
// marks; joined, they are the line.
func words(s string) []string {
	var out []string
	start := 0
	kind := func(r rune) int {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_':
			return 1
		case unicode.IsSpace(r):
			return 2
		}
		return 3
	}
	prev := 0
	for i, r := range s {
		k := kind(r)
		if i > start && (k != prev || k == 3) {
			out = append(out, s[start:i])
			start = i
		}
		prev = k
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// hunks keeps the changed lines with ctx lines around them; the unchanged
// lines between are counted in the next hunk's Skipped.
func hunks(ops []views.DiffLine, ctx int) []views.DiffHunk {
	keep := make([]bool, len(ops))
	for i, o := range ops {
		if o.Op == "=" {
			continue
		}
		for k := max(0, i-ctx); k <= min(len(ops)-1, i+ctx); k++ {
			keep[k] = true
		}
	}
	var out []views.DiffHunk
	skipped := 0
	var cur *views.DiffHunk
	for i, o := range ops {
		if !keep[i] {
			skipped++
			cur = nil
			continue
		}
		if cur == nil {
			out = append(out, views.DiffHunk{Skipped: skipped})
			cur = &out[len(out)-1]
			skipped = 0
		}
		cur.Lines = append(cur.Lines, o)
	}
	if skipped > 0 && len(out) > 0 {
		// Trailing unchanged lines: a last, empty hunk says how many.
		out = append(out, views.DiffHunk{Skipped: skipped})
	}
	return out
}
