package desk

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/views"
)

func TestWordMarks(t *testing.T) {
	t.Parallel()
	d := lineDiff("title\nthe quick brown fox\nkeep\nabc def\n", "title\nthe quick red fox!\nkeep\nxyz\n")
	var got []string
	for _, h := range d.Hunks {
		for _, l := range h.Lines {
			var sb strings.Builder
			for _, s := range l.Segs {
				if s.Changed {
					sb.WriteString("[" + s.Text + "]")
				} else {
					sb.WriteString(s.Text)
				}
			}
			got = append(got, l.Op+sb.String())
		}
	}
	want := []string{"=", "-the quick [brown] fox", "+the quick [red] fox[!]", "=", "-", "+"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("marks %q, want %q", got, want)
	}
	// the segments of a line are the line
	for _, h := range d.Hunks {
		for _, l := range h.Lines {
			if len(l.Segs) == 0 {
				continue
			}
			var sb strings.Builder
			for _, s := range l.Segs {
				sb.WriteString(s.Text)
			}
			if sb.String() != l.Text {
				t.Errorf("segments %q of %q", sb.String(), l.Text)
			}
		}
	}
	// Rendered: marked, escaped, in order.
	d = lineDiff("a <b>old</b> c\n", "a <b>new</b> c\n")
	var out bytes.Buffer
	if err := views.DiffView(d).Render(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	html := out.String()
	for _, w := range []string{`<span class="chg">old</span>`, `<span class="chg">new</span>`, `a &lt;b&gt;`} {
		if !strings.Contains(html, w) {
			t.Errorf("rendered diff lacks %s:\n%s", w, html)
		}
	}
	if strings.Contains(html, "<b>") {
		t.Errorf("rendered diff has unescaped text:\n%s", html)
	}
}

// A missing final newline is not a change, and line numbers count from 1
// on both sides.
func TestLineDiffNumbers(t *testing.T) {
	t.Parallel()
	d := lineDiff("a\nb\nc", "a\nB\nc\nd\n")
	var got []string
	for _, h := range d.Hunks {
		for _, l := range h.Lines {
			got = append(got, fmt.Sprintf("%s%d,%d", l.Op, l.Old, l.New))
		}
	}
	if want := "=1,1 -2,0 +0,2 =3,3 +0,4"; strings.Join(got, " ") != want {
		t.Fatalf("lines %q, want %q", strings.Join(got, " "), want)
	}
}

// diffDoc is a document of n lines and a revision with a word changed in
// one line of a hundred, a line inserted in one of three hundred and one
// deleted in one of five hundred.
func diffDoc(n int) (string, string) {
	r := rand.New(rand.NewPCG(3, 4))
	vocab := strings.Fields("gate task review plan approve reject node state checkpoint lease fence replica event inbox")
	var a, b strings.Builder
	for i := range n {
		words := make([]string, 8+r.IntN(8))
		for j := range words {
			words[j] = vocab[r.IntN(len(vocab))]
		}
		line := fmt.Sprintf("%d. %s", i, strings.Join(words, " "))
		a.WriteString(line + "\n")
		switch {
		case i%500 == 250:
			continue
		case i%100 == 7:
			words[r.IntN(len(words))] = "CHANGED"
			b.WriteString(fmt.Sprintf("%d. %s\n", i, strings.Join(words, " ")))
		default:
			b.WriteString(line + "\n")
		}
		if i%300 == 150 {
			b.WriteString("an inserted line\n")
		}
	}
	return a.String(), b.String()
}

// BenchmarkDeskDiff10kLines diffs and renders a 10,000-line document
// against its revision (target: under 50 ms).
func BenchmarkDeskDiff10kLines(b *testing.B) {
	a, c := diffDoc(10_000)
	for b.Loop() {
		d := lineDiff(a, c)
		if d.Added == 0 || d.Removed == 0 {
			b.Fatalf("+%d -%d", d.Added, d.Removed)
		}
		var out bytes.Buffer
		if err := views.DiffView(d).Render(context.Background(), &out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/diff")
}
