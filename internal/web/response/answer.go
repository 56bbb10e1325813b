package response

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/markdown"
	"github.com/gatehousehq/gatehouse/internal/requests"
	"github.com/gatehousehq/gatehouse/internal/workflows/request"
	"github.com/gatehousehq/gatehouse/views"
)

// Asked is an approval request's task as the pages show it (SPEC §16–17):
// who asked and through what, its description, and the form of its typed
// answer (nil without a response_schema).
type Asked struct {
	Info views.RequestInfo
	Form *requests.Form
}

// AskedOf reads the request of a task of the `request` workflow (nil, nil
// for any other task), its description rendered by md.
func AskedOf(t *graph.Task, md *markdown.Renderer) (*Asked, error) {
	if t == nil || t.Workflow != request.Name {
		return nil, nil
	}
	var in request.Input
	if err := json.Unmarshal(t.Input, &in); err != nil {
		return nil, fmt.Errorf("request %s: stored input: %w", t.ID, err)
	}
	a := &Asked{Info: views.RequestInfo{AskedBy: in.RequestedBy, Via: viaLabel(in.Via)}}
	if a.Info.AskedBy == "" {
		a.Info.AskedBy = t.CreatedBy
	}
	a.Info.Description = QuestionHTML(t.Workflow, in.Description, md)
	f, err := formOf(t.ID, in)
	if err != nil {
		return nil, err
	}
	a.Form = f
	return a, nil
}

// QuestionLine is the one-line preview of a question a task of workflow
// asked, at most n characters: an approval request's description
// (Markdown) as plain text, its syntax gone (md.PlainText), any other
// question as written.
func QuestionLine(workflow, question string, n int, md *markdown.Renderer) string {
	if workflow == request.Name {
		question = md.PlainText(markdownHead(question, 16*n))
	}
	return graph.Excerpt(question, n)
}

// markdownHead is enough of the start of Markdown src to show its first n/16
// characters as text: src up to the last line break before n bytes. The
// inbox shows a line of each item, and parsing a whole 64 KiB description
// for it took 11 ms an item.
func markdownHead(src string, n int) string {
	if len(src) <= n {
		return src
	}
	for n > 0 && !utf8.RuneStart(src[n]) {
		n-- // not inside a character
	}
	head := src[:n]
	if i := strings.LastIndexByte(head, '\n'); i > 0 {
		return head[:i]
	}
	return head
}

// QuestionHTML is a question a task of workflow asked as the pages show
// it in full, when it is Markdown: an approval request's description,
// sanitised HTML (the open card's rendering); "" for any other question,
// which pages show as text.
func QuestionHTML(workflow, question string, md *markdown.Renderer) views.SafeHTML {
	if workflow != request.Name || strings.TrimSpace(question) == "" {
		return ""
	}
	return views.SafeHTML(md.HTML(question))
}

// FormOf is the typed answer's form of a request's task, its fields in
// the order the request wrote them (nil, nil for a task that is not a
// request, or a request without a response_schema).
func FormOf(t *graph.Task) (*requests.Form, error) {
	if t == nil || t.Workflow != request.Name {
		return nil, nil
	}
	var in request.Input
	if err := json.Unmarshal(t.Input, &in); err != nil {
		return nil, fmt.Errorf("request %s: stored input: %w", t.ID, err)
	}
	return formOf(t.ID, in)
}

func formOf(id string, in request.Input) (*requests.Form, error) {
	if len(in.ResponseSchema) == 0 {
		return nil, nil
	}
	f, err := requests.ParseForm(in.ResponseSchema)
	if err != nil {
		return nil, fmt.Errorf("request %s: stored response_schema: %w", id, err)
	}
	f.Order(in.FieldOrder)
	return f, nil
}

// AnswerText is a typed answer as a line people read: "Environment: prod
// · Replicas: 3 · Regions: eu, ap" (labels from the form, in its order;
// booleans as yes or no). A value that does not read as the form's is
// its JSON text.
func AnswerText(f *requests.Form, value json.RawMessage) string {
	text := func(v any) string {
		switch x := v.(type) {
		case string:
			return x
		case bool:
			if x {
				return "yes"
			}
			return "no"
		case []any:
			parts := make([]string, len(x))
			for i, e := range x {
				parts[i] = fmt.Sprint(e)
			}
			return strings.Join(parts, ", ")
		case json.Number:
			return x.String()
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	dec := json.NewDecoder(strings.NewReader(string(value)))
	dec.UseNumber()
	var v any
	if f == nil || dec.Decode(&v) != nil {
		return string(value)
	}
	if f.Single {
		return text(v)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return string(value)
	}
	var parts []string
	for _, fd := range f.Fields {
		if x, ok := obj[fd.Name]; ok {
			parts = append(parts, fd.Title+": "+text(x))
		}
	}
	return strings.Join(parts, " · ")
}

// Via is the channel an approval request's task came through, as pages
// show it ("API", "MCP"); "" for any other task.
func Via(t *graph.Task) string {
	if t == nil || t.Workflow != request.Name {
		return ""
	}
	var in struct {
		Via string `json:"via"`
	}
	if json.Unmarshal(t.Input, &in) != nil {
		return ""
	}
	return viaLabel(in.Via)
}

func viaLabel(via string) string { return strings.ToUpper(via) }

// AnswerFields shapes a typed answer's controls: with the schema's
// defaults when kept is nil (a fresh form), else with the input kept from
// a refused submit, and each field's problem beside it.
func AnswerFields(f *requests.Form, kept url.Values, problems map[string]string) []views.AnswerField {
	if f == nil {
		return nil
	}
	out := make([]views.AnswerField, 0, len(f.Fields))
	for _, fd := range f.Fields {
		v := views.AnswerField{Name: fd.Name, Label: fd.Title, Help: fd.Description, Widget: fd.Widget, Required: fd.Required,
			Error: problems[fd.Name], Attrs: templAttrs(fd)}
		if f.Single && fd.Title == fd.Name {
			v.Label = "Your answer"
		}
		input := kept["answer."+fd.Name]
		has := func(choice string) bool {
			if kept == nil {
				return fd.DefaultHas(choice)
			}
			return slices.Contains(input, choice)
		}
		switch fd.Widget {
		case requests.WidgetCheckbox:
			v.Checked = fd.DefaultTrue()
			if kept != nil {
				v.Checked = slices.Contains(input, "true") || slices.Contains(input, "on")
			}
		case requests.WidgetSelect, requests.WidgetChoices:
			for _, o := range fd.Enum {
				v.Options = append(v.Options, views.AnswerOption{Value: o, Selected: has(o)})
			}
		default:
			v.Value = fd.DefaultText()
			if kept != nil {
				v.Value = strings.Join(input, "")
			}
		}
		out = append(out, v)
	}
	return out
}

// templAttrs are a field's checks for the browser (the server checks
// again with the schema).
func templAttrs(fd requests.Field) map[string]any {
	a := map[string]any{}
	if fd.Required && fd.Widget != requests.WidgetCheckbox && fd.Widget != requests.WidgetChoices {
		a["required"] = true
	}
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	count := func(n int) string { return strconv.Itoa(n) }
	switch fd.Type {
	case requests.TypeString:
		if fd.MinLength != nil {
			a["minlength"] = count(*fd.MinLength)
		}
		if fd.MaxLength != nil {
			a["maxlength"] = count(*fd.MaxLength)
		}
		if fd.Pattern != "" && fd.Widget == requests.WidgetText {
			// HTML anchors a pattern to the whole value; JSON Schema
			// looks for a match anywhere.
			a["pattern"] = ".*(?:" + fd.Pattern + ").*"
		}
	case requests.TypeInteger, requests.TypeNumber:
		a["step"], a["inputmode"] = "any", "decimal"
		if fd.Type == requests.TypeInteger {
			a["step"] = "1"
			a["inputmode"] = "numeric"
		}
		if fd.Minimum != nil {
			a["min"] = num(*fd.Minimum)
		}
		if fd.Maximum != nil {
			a["max"] = num(*fd.Maximum)
		}
	}
	return a
}

// AnswerNotRecorded heads a form whose typed answer was refused.
const AnswerNotRecorded = "Not recorded: the answer does not fit the form; see the fields marked below."

// AnswerProblems turns a refused answer into a message per control: the
// Decider's *auth.AnswerError (every failing field of the schema), and
// what the form could not type (conv, by field name, which wins). A
// problem no control owns is under "".
func AnswerProblems(f *requests.Form, err error, conv map[string]string) map[string]string {
	out := map[string]string{}
	var ae *auth.AnswerError
	if errors.As(err, &ae) {
		all := ae.Fields
		if len(all) == 0 {
			all = map[string]string{ae.Field: ae.Problem}
		}
		for path, problem := range all {
			name := f.FieldOf(path)
			if _, seen := out[name]; !seen || path == ae.Field {
				out[name] = Sentence(problem)
			}
		}
	}
	for name, problem := range conv {
		out[name] = Sentence(problem)
	}
	if msg, ok := out[""]; ok {
		out[""] = "The answer does not fit the form: " + msg
	}
	return out
}
