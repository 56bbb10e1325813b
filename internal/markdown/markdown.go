// Package markdown renders user-written Markdown (an artifact, an approval
// request's description) as HTML safe to put in a page: goldmark with
// GitHub's extensions, raw HTML dropped, the result sanitised by
// bluemonday's user-content policy (links get rel="noreferrer", and open
// in a new tab when they leave the site). The desk and the action links
// share one renderer shape, so a description reads the same everywhere.
//
// It imports nothing of the module.
package markdown

import (
	"bytes"
	"html"
	"strings"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// Renderer renders Markdown to sanitised HTML. It is safe for concurrent
// use.
type Renderer struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
}

// New returns a Renderer.
func New() *Renderer {
	p := bluemonday.UGCPolicy()
	p.RequireNoReferrerOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	return &Renderer{md: goldmark.New(goldmark.WithExtensions(extension.GFM)), policy: p}
}

// HTML renders src and sanitises the result; text goldmark cannot
// convert is shown escaped in a <pre>.
func (r *Renderer) HTML(src string) string {
	var buf bytes.Buffer
	if err := r.md.Convert([]byte(src), &buf); err != nil {
		return `<pre class="plain">` + html.EscapeString(src) + `</pre>`
	}
	return string(r.policy.SanitizeBytes(buf.Bytes()))
}

// Is reports whether a MIME type is Markdown's (text/markdown, and
// text/x-markdown or any type naming it, in any case).
func Is(contentType string) bool {
	return strings.Contains(strings.ToLower(contentType), "markdown")
}

// PlainText is src as one line of plain text, for a preview: the words
// goldmark reads in it, its Markdown syntax gone (emphasis, headings,
// list markers, a link's target; a link or an image keeps its text),
// raw HTML left out as the pages leave it out, code kept as written, and
// white space collapsed to single spaces.
func (r *Renderer) PlainText(src string) string {
	source := []byte(src)
	var b strings.Builder
	gap := func() {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
	}
	write := func(v []byte, code bool) {
		if !code {
			v = util.UnescapePunctuations(v)
			v = []byte(html.UnescapeString(string(v)))
		}
		b.Write(v)
	}
	lines := func(n ast.Node) {
		segs := n.Lines()
		for i := range segs.Len() {
			seg := segs.At(i)
			write(seg.Value(source), true)
			b.WriteByte(' ')
		}
	}
	_ = ast.Walk(r.md.Parser().Parse(text.NewReader(source)), func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			if n.Type() == ast.TypeBlock {
				gap()
			}
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Text:
			write(n.Segment.Value(source), false)
			if n.SoftLineBreak() || n.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			write(n.Value, n.IsCode())
		case *ast.CodeSpan:
			for c := n.FirstChild(); c != nil; c = c.NextSibling() {
				if t, ok := c.(*ast.Text); ok {
					write(t.Segment.Value(source), true)
				}
			}
			return ast.WalkSkipChildren, nil
		case *ast.AutoLink:
			write(n.Label(source), true)
		case *ast.CodeBlock, *ast.FencedCodeBlock:
			gap()
			lines(n)
			return ast.WalkSkipChildren, nil
		case *ast.HTMLBlock, *ast.RawHTML:
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return strings.Join(strings.Fields(b.String()), " ")
}
