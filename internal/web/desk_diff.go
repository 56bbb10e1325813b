package web

import (
	"strings"

	"github.com/gatehousehq/gatehouse/views"
)

// Diff limits: the table of the longest common subsequence holds at most
// maxDiffCells entries; a bigger middle (after the common head and tail are
// set aside) is shown as replaced whole.
const (
	maxDiffCells = 4 << 20
	diffContext  = 3
)

// lineDiff compares two texts line by line (longest common subsequence)
// and groups the changes in hunks with diffContext lines of context.
func lineDiff(a, b string) views.Diff {
	al, bl := splitLines(a), splitLines(b)
	ops := diffOps(al, bl)
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
	d.Hunks = hunks(ops, diffContext)
	return d
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	s = strings.TrimSuffix(s, "\n")
	return strings.Split(s, "\n")
}

// diffOps is the edit script from a to b, every line of both in order.
func diffOps(a, b []string) []views.DiffLine {
	// Common head and tail first: most revisions change little.
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	out := make([]views.DiffLine, 0, len(a)+len(b))
	for i := 0; i < head; i++ {
		out = append(out, views.DiffLine{Op: "=", Text: a[i], Old: i + 1, New: i + 1})
	}
	ma, mb := a[head:len(a)-tail], b[head:len(b)-tail]
	out = append(out, middleOps(ma, mb, head)...)
	for i := 0; i < tail; i++ {
		ia, ib := len(a)-tail+i, len(b)-tail+i
		out = append(out, views.DiffLine{Op: "=", Text: a[ia], Old: ia + 1, New: ib + 1})
	}
	return out
}

// middleOps diffs the differing middle; off is the number of lines before it.
func middleOps(a, b []string, off int) []views.DiffLine {
	n, m := len(a), len(b)
	var out []views.DiffLine
	if n*m > maxDiffCells {
		for i, l := range a {
			out = append(out, views.DiffLine{Op: "-", Text: l, Old: off + i + 1})
		}
		for j, l := range b {
			out = append(out, views.DiffLine{Op: "+", Text: l, New: off + j + 1})
		}
		return out
	}
	// lcs[i][j] is the LCS length of a[i:] and b[j:], in one flat slice.
	w := m + 1
	lcs := make([]int32, (n+1)*w)
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			out = append(out, views.DiffLine{Op: "=", Text: a[i], Old: off + i + 1, New: off + j + 1})
			i++
			j++
		case j < m && (i == n || lcs[i*w+j+1] >= lcs[(i+1)*w+j]):
			out = append(out, views.DiffLine{Op: "+", Text: b[j], New: off + j + 1})
			j++
		default:
			out = append(out, views.DiffLine{Op: "-", Text: a[i], Old: off + i + 1})
			i++
		}
	}
	// Removals read better before the additions they pair with.
	return regroup(out)
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
