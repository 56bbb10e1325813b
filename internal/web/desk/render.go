package desk

import (
	"bytes"
	"encoding/json"
	"html"
	"strings"

	"github.com/alecthomas/chroma/v2"
	chromahtml "github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/alecthomas/chroma/v2/styles"
	"gopkg.in/yaml.v3"

	"github.com/gatehousehq/gatehouse/internal/markdown"
	"github.com/gatehousehq/gatehouse/views"
)

// maxHighlight bounds the text given to the highlighter; beyond it the
// text is shown escaped, uncoloured.
const maxHighlight = 256 << 10

// renderer turns artifact content into safe HTML: Markdown rendered and
// sanitised (internal/markdown); YAML and JSON tokenised by chroma, every
// token escaped; anything else escaped.
type renderer struct {
	md        *markdown.Renderer // shared with the action links' pages
	formatter *chromahtml.Formatter
	style     *chroma.Style
}

func newRenderer() *renderer {
	return &renderer{
		md:        markdown.New(),
		formatter: chromahtml.New(chromahtml.WithClasses(true), chromahtml.PreventSurroundingPre(true)),
		style:     styles.Fallback,
	}
}

// document renders an artifact by its content type.
func (r *renderer) document(contentType, content string) views.SafeHTML {
	ct := strings.ToLower(contentType)
	switch {
	case markdown.Is(ct):
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
	return views.SafeHTML(r.md.HTML(src))
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

// state renders a task's state JSON as highlighted YAML, the form people
// read best: keys in their stored order, multi-line text as blocks instead
// of escaped one-liners. JSON that does not convert is shown as JSON.
func (r *renderer) state(raw []byte) views.SafeHTML {
	if len(raw) > maxHighlight {
		return r.json(raw)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return r.json(raw)
	}
	plainScalars(&doc)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return r.json(raw)
	}
	return r.code("yaml", out.String())
}

// plainScalars drops the JSON quoting of strings so that the encoder picks
// the readable style: block text for multi-line strings, plain otherwise
// (it still quotes a string that would read as another type).
func plainScalars(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style = 0 // block, not JSON's flow style
	}
	if n.Kind == yaml.ScalarNode && n.Style == yaml.DoubleQuotedStyle {
		if strings.Contains(n.Value, "\n") {
			n.Style = yaml.LiteralStyle
		} else {
			n.Style = 0
		}
	}
	for _, c := range n.Content {
		plainScalars(c)
	}
}
