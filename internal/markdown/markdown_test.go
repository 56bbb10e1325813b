package markdown_test

import (
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/internal/markdown"
)

// TestPlainText: a preview line keeps the words and drops the syntax;
// hostile text stays text (the page escapes it), a link's target and raw
// HTML are gone.
func TestPlainText(t *testing.T) {
	r := markdown.New()
	cases := []struct{ name, src, want string }{
		{"Empty", "", ""},
		{"Plain", "Run the migration on prod?", "Run the migration on prod?"},
		{"Emphasis", "The agent wants to run **db migrate** on _production_.", "The agent wants to run db migrate on production."},
		{"Heading", "# Why\n\nCleanup of `/tmp/x`.", "Why Cleanup of /tmp/x."},
		{"Lists", "- one\n- two\n\n1. three", "one two three"},
		{"Link", "See [the runbook](https://example.com/runbook) first", "See the runbook first"},
		{"HostileLink", "[x](javascript:alert(1))", "x"},
		{"Image", "![a diagram](https://example.com/d.png)", "a diagram"},
		{"Autolink", "<https://example.com/a>", "https://example.com/a"},
		{"Code", "```sh\nrm -rf /tmp/*\n```", "rm -rf /tmp/*"},
		{"CodeSpanKeepsStars", "`a **b** c`", "a **b** c"},
		{"Escapes", `2 \* 3 \_not\_ emphasis &amp; more`, "2 * 3 _not_ emphasis & more"},
		{"RawHTMLDropped", "before <script>alert(1)</script> after", "before alert(1) after"},
		{"HTMLBlockDropped", "<div onclick=\"x()\">\nhidden\n</div>\n\nshown", "shown"},
		{"Quote", "> quoted *text*\n\nnext", "quoted text next"},
		{"Table", "| a | b |\n| - | - |\n| 1 | 2 |", "a b 1 2"},
		{"Strike", "~~gone~~ kept", "gone kept"},
		{"Breaks", "line one\nline two  \nline three", "line one line two line three"},
	}
	for _, c := range cases {
		if got := r.PlainText(c.src); got != c.want {
			t.Errorf("%s: PlainText(%q) = %q, want %q", c.name, c.src, got, c.want)
		}
	}
}

// TestHTMLHostile: the rendered description runs nothing.
func TestHTMLHostile(t *testing.T) {
	r := markdown.New()
	out := r.HTML("<script>alert(1)</script>\n\n[x](javascript:alert(1)) <img src=x onerror=alert(1)> **ok**")
	for _, bad := range []string{"<script", "javascript:", "onerror", "<img"} {
		if strings.Contains(out, bad) {
			t.Errorf("HTML kept %q: %s", bad, out)
		}
	}
	if !strings.Contains(out, "<strong>ok</strong>") {
		t.Errorf("HTML lost the Markdown: %s", out)
	}
}
