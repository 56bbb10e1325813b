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
	"github.com/yuin/goldmark/extension"
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
