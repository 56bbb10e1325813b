package web

import (
	"bytes"
	"encoding/json"
	"html"
	"strings"

	"github.com/alecthomas/chroma/v2"
	chromahtml "github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/alecthomas/chroma/v2/styles"
	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/gatehousehq/gatehouse/views"
)

// maxHighlight bounds the text given to the highlighter; beyond it the
// text is shown escaped, uncoloured.
const maxHighlight = 256 << 10

// renderer turns artifact content into safe HTML: Markdown rendered by
// goldmark (raw HTML dropped) and sanitised by bluemonday; YAML and JSON
// tokenised by chroma, every token escaped; anything else escaped.
type renderer struct {
	md        goldmark.Markdown
	policy    *bluemonday.Policy
	formatter *chromahtml.Formatter
	style     *chroma.Style
}

func newRenderer() *renderer {
	p := bluemonday.UGCPolicy()
	p.RequireNoReferrerOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	return &renderer{
		md:        goldmark.New(goldmark.WithExtensions(extension.GFM)),
		policy:    p,
		formatter: chromahtml.New(chromahtml.WithClasses(true), chromahtml.PreventSurroundingPre(true)),
		style:     styles.Fallback,
	}
}

// document renders an artifact by its content type.
func (r *renderer) document(contentType, content string) views.SafeHTML {
	ct := strings.ToLower(contentType)
	switch {
	case strings.Contains(ct, "markdown"):
		return r.markdown(content)
	case strings.Contains(ct, "yaml"):
		return `<pre class="code">` + r.code("yaml", content) + `</pre>`
	case strings.Contains(ct, "json"):
		return `<pre class="code">` + r.code("json", prettyJSON(content)) + `</pre>`
	default:
		return views.SafeHTML(`<pre class="plain">` + html.EscapeString(content) + `</pre>`)
	}
}

// markdown renders Markdown and sanitises the result.
func (r *renderer) markdown(src string) views.SafeHTML {
	var buf bytes.Buffer
	if err := r.md.Convert([]byte(src), &buf); err != nil {
		return views.SafeHTML(`<pre class="plain">` + html.EscapeString(src) + `</pre>`)
	}
	return views.SafeHTML(r.policy.SanitizeBytes(buf.Bytes()))
}

// code highlights src in language lang ("yaml", "json"); the result goes
// inside a <pre>.
func (r *renderer) code(lang, src string) views.SafeHTML {
	if len(src) > maxHighlight {
		return views.SafeHTML(html.EscapeString(src))
	}
	lexer := lexers.Get(lang)
	if lexer == nil {
		return views.SafeHTML(html.EscapeString(src))
	}
	it, err := chroma.Coalesce(lexer).Tokenise(nil, src)
	if err != nil {
		return views.SafeHTML(html.EscapeString(src))
	}
	var buf bytes.Buffer
	if err := r.formatter.Format(&buf, r.style, it); err != nil {
		return views.SafeHTML(html.EscapeString(src))
	}
	return views.SafeHTML(buf.String())
}

// json highlights a JSON value, indented.
func (r *renderer) json(raw []byte) views.SafeHTML {
	return r.code("json", prettyJSON(string(raw)))
}

// prettyJSON indents JSON; text that is not JSON comes back as it was.
func prettyJSON(s string) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(s), "", "  "); err != nil {
		return s
	}
	return buf.String()
}
