package desk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/pgtext"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/views"
)

// MaxUpload bounds a new-task form with its files.
const MaxUpload = 4 << 20

// shortText is the longest maxLength a one-line input gets; longer strings
// get a text area.
const shortText = 200

// schemaProp is the part of a JSON Schema property the form understands.
type schemaProp struct {
	Type        json.RawMessage       `json:"type"`
	Title       string                `json:"title"`
	Description string                `json:"description"`
	Enum        []any                 `json:"enum"`
	Default     any                   `json:"default"`
	MaxLength   int                   `json:"maxLength"`
	MinLength   int                   `json:"minLength"`
	Minimum     *float64              `json:"minimum"`
	Maximum     *float64              `json:"maximum"`
	Items       *schemaProp           `json:"items"`
	Properties  map[string]schemaProp `json:"properties"`
	MaxItems    int                   `json:"maxItems"`
	Pattern     string                `json:"pattern"`
	// ErrorMessage says what Pattern wants, in words (an annotation
	// ajv-errors made common).
	ErrorMessage string `json:"errorMessage"`
	// properties in written order (schemaForm fills it).
	order []string
}

// fileObject reports an object of a file's name and text content: the
// form uploads those.
func (p schemaProp) fileObject() bool {
	if p.typ() != "object" {
		return false
	}
	n, okN := p.Properties["name"]
	c, okC := p.Properties["content"]
	return okN && okC && n.typ() == "string" && c.typ() == "string"
}

// typ is the property's type; for a list of types, the first that is not null.
func (p schemaProp) typ() string {
	var one string
	if json.Unmarshal(p.Type, &one) == nil {
		return one
	}
	var many []string
	if json.Unmarshal(p.Type, &many) == nil {
		for _, t := range many {
			if t != "null" {
				return t
			}
		}
	}
	if len(p.Enum) > 0 {
		return "string"
	}
	return ""
}

// formProp is a property in schema order. A property of an object
// property with properties of its own (pm's preferences) is a field of its
// own, Name "parent.sub", with Parent set.
type formProp struct {
	Name     string
	Prop     schemaProp
	Required bool
	Parent   string
	Sub      string
}

// schemaForm reads an object schema's properties in their written order.
func schemaForm(schema json.RawMessage) ([]formProp, error) {
	var top struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if err := json.Unmarshal(schema, &top); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	if len(top.Properties) == 0 {
		return nil, nil
	}
	var props map[string]schemaProp
	if err := json.Unmarshal(top.Properties, &props); err != nil {
		return nil, fmt.Errorf("input schema properties: %w", err)
	}
	order, err := objectKeys(top.Properties)
	if err != nil {
		return nil, err
	}
	req := map[string]bool{}
	for _, r := range top.Required {
		req[r] = true
	}
	out := make([]formProp, 0, len(order))
	for _, k := range order {
		p := props[k]
		if p.typ() == "object" && len(p.Properties) > 0 && !p.fileObject() {
			// An object of known fields: one input per field, not raw JSON.
			var nested struct {
				Properties json.RawMessage `json:"properties"`
			}
			var whole map[string]json.RawMessage
			_ = json.Unmarshal(top.Properties, &whole)
			_ = json.Unmarshal(whole[k], &nested)
			subs, err := objectKeys(nested.Properties)
			if err != nil {
				return nil, err
			}
			for _, s := range subs {
				sp := p.Properties[s]
				if sp.Title == "" {
					sp.Title = humanize(s)
				}
				title := p.Title
				if title == "" {
					title = humanize(k)
				}
				sp.Title = title + ": " + strings.ToLower(sp.Title[:1]) + sp.Title[1:]
				out = append(out, formProp{Name: k + "." + s, Prop: sp, Parent: k, Sub: s})
			}
			continue
		}
		out = append(out, formProp{Name: k, Prop: p, Required: req[k]})
	}
	return out, nil
}

// objectKeys lists the keys of a JSON object in document order.
func objectKeys(raw json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// fieldOf is the input of one property, empty.
func fieldOf(p formProp) views.Field {
	return fieldNamed(p, "input.", "f-in-")
}

// fieldNamed is the input of one property, empty, named prefix+name.
func fieldNamed(p formProp, prefix, idPrefix string) views.Field {
	f := views.Field{Name: prefix + p.Name, ID: idPrefix + strings.ReplaceAll(p.Name, ".", "-"), Label: p.Prop.Title,
		Help: p.Prop.Description, Required: p.Required, MaxLength: p.Prop.MaxLength, MinLength: p.Prop.MinLength,
		Pattern: p.Prop.Pattern, PatternMessage: p.Prop.ErrorMessage}
	if f.Pattern != "" && f.PatternMessage == "" {
		f.PatternMessage = "Use the form this field needs: " + p.Prop.Pattern
	}
	if f.Label == "" {
		f.Label = humanize(p.Name)
	}
	switch t := p.Prop.typ(); {
	case len(p.Prop.Enum) > 0:
		f.Kind = views.FieldSelect
		for _, e := range p.Prop.Enum {
			f.Options = append(f.Options, fmt.Sprint(e))
		}
	case t == "string" && p.Prop.MaxLength > 0 && p.Prop.MaxLength <= shortText:
		f.Kind = views.FieldText
	case t == "string":
		f.Kind = views.FieldTextarea
	case t == "boolean":
		f.Kind = views.FieldCheckbox
	case t == "integer" || t == "number":
		f.Kind = views.FieldNumber
		f.Step = "any"
		if t == "integer" {
			f.Step = "1"
		}
		if p.Prop.Minimum != nil {
			f.Min = strconv.FormatFloat(*p.Prop.Minimum, 'f', -1, 64)
		}
		if p.Prop.Maximum != nil {
			f.Max = strconv.FormatFloat(*p.Prop.Maximum, 'f', -1, 64)
		}
	case t == "array" && p.Prop.Items != nil && p.Prop.Items.fileObject():
		f.Kind = views.FieldFiles
	case t == "array" && p.Prop.Items != nil && p.Prop.Items.typ() == "string":
		f.Kind = views.FieldLines
		f.Help = strings.TrimSpace(f.Help + " One per line.")
	default:
		f.Kind = views.FieldTextarea
		f.Help = strings.TrimSpace(f.Help + " JSON.")
	}
	if p.Prop.Default != nil {
		switch v := p.Prop.Default.(type) {
		case bool:
			f.Checked = v
		case string:
			f.Value = v
		default:
			b, _ := json.Marshal(v)
			f.Value = string(b)
		}
	}
	return f
}

func humanize(name string) string {
	var b strings.Builder
	for i, r := range name {
		switch {
		case r == '_' || r == '-':
			b.WriteRune(' ')
		case i > 0 && unicode.IsUpper(r):
			b.WriteRune(' ')
			b.WriteRune(unicode.ToLower(r))
		case i == 0:
			b.WriteRune(unicode.ToUpper(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// optionProps are the task options the start form offers: the workflow's
// options schema without its gates (the approval switches).
func optionProps(desc graph.Description) ([]formProp, error) {
	if len(desc.OptionsSchema) == 0 {
		return nil, nil
	}
	all, err := schemaForm(desc.OptionsSchema)
	if err != nil {
		return nil, err
	}
	var out []formProp
	for _, o := range all {
		if o.Name != "gates" && o.Parent != "gates" {
			out = append(out, o)
		}
	}
	return out, nil
}

// newTaskModel is the form of a workflow, empty: one of the listed
// workflows.
func (d *desk) newTaskModel(c echo.Context, name string) (views.NewTask, graph.Description, []formProp, error) {
	// An unlisted workflow (request: its tasks are made by
	// /api/v1/requests) is not offered, and not found by name.
	var wfs []graph.Workflow
	for _, w := range d.s.engine.Workflows() {
		if !w.Describe().Unlisted {
			wfs = append(wfs, w)
		}
	}
	if len(wfs) == 0 {
		return views.NewTask{}, graph.Description{}, nil, errors.New("no workflow is registered")
	}
	var chosen graph.Workflow
	for _, w := range wfs {
		if w.Name() == name {
			chosen = w
		}
	}
	if chosen == nil {
		if name != "" {
			return views.NewTask{}, graph.Description{}, nil, response.NotFound("workflow " + strconv.Quote(name))
		}
		chosen = wfs[0]
	}
	desc := chosen.Describe()
	m := views.NewTask{Page: d.pageMeta(c.Request().Context(), "Start a task", "new"), Workflow: desc.Name,
		About: desc.Description}
	for _, w := range wfs {
		wd := w.Describe()
		m.Workflows = append(m.Workflows, views.WorkflowChoice{Name: wd.Name, Title: wd.Title, Selected: wd.Name == desc.Name})
	}
	props, err := schemaForm(desc.InputSchema)
	if err != nil {
		return m, desc, nil, err
	}
	for _, p := range props {
		f := fieldOf(p)
		m.Fields = append(m.Fields, f)
		m.Multipart = m.Multipart || f.Kind == views.FieldFiles
	}
	opts, err := optionProps(desc)
	if err != nil {
		return m, desc, props, err
	}
	for _, o := range opts {
		m.Options = append(m.Options, fieldNamed(o, "option.", "f-opt-"))
	}
	seen := map[string]bool{}
	for _, g := range desc.Gates {
		if g.Option == "" || seen[g.Option] {
			continue
		}
		seen[g.Option] = true
		m.Gates = append(m.Gates, views.GateSwitch{Option: g.Option, Kind: g.Kind, Node: g.Node, Human: true})
	}
	return m, desc, props, nil
}

// newTaskForm: GET /tasks/new?workflow= — the form.
func (d *desk) newTaskForm(c echo.Context) error {
	m, _, _, err := d.newTaskModel(c, strings.TrimSpace(c.QueryParam("workflow")))
	if err != nil {
		return err
	}
	return response.Page(c, http.StatusOK, views.NewTaskView(m))
}

// createTaskForm: POST /tasks/new — validates, starts the task and goes to
// its page; on bad input the form comes back with the errors next to their
// fields and everything typed kept (422; 400 when a field's text cannot be
// stored). It reads and checks its form itself, URL-encoded or multipart
// (formRoute): text with U+0000 or invalid UTF-8 is an error beside its
// field, not a page of its own that loses what was typed.
func (d *desk) createTaskForm(c echo.Context) error {
	r := c.Request()
	r.Body = http.MaxBytesReader(c.Response(), r.Body, MaxUpload)
	var err error
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		err = r.ParseMultipartForm(MaxUpload)
	} else {
		err = r.ParseForm()
	}
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return &response.Error{Status: http.StatusRequestEntityTooLarge, Code: response.CodeTooLarge,
				Message: fmt.Sprintf("The form is larger than %d MiB; attach smaller files.", MaxUpload>>20)}
		}
		return response.BadRequest("", "the form could not be read")
	}
	form := r.PostForm
	workflow := strings.TrimSpace(form.Get("workflow"))
	if p := pgtext.Problem(workflow); p != "" {
		return request.TextError("workflow", p)
	}
	m, desc, props, err := d.newTaskModel(c, workflow)
	if err != nil {
		return err
	}
	var got formRead
	m.Title = got.text(form.Get("title"), &m.TitleErr)
	input := map[string]any{}
	got.fields(r, props, m.Fields, input)
	options := map[string]any{}
	opts, err := optionProps(desc)
	if err != nil {
		return err
	}
	got.fields(r, opts, m.Options, options)
	gates := map[string]bool{}
	for i := range m.Gates {
		g := &m.Gates[i]
		g.Human = form.Get("gate."+g.Option) != ""
		gates[g.Option] = !g.Human
	}
	title := strings.Join(strings.Fields(m.Title), " ")
	if m.TitleErr == "" && utf8.RuneCountInString(title) > request.MaxTitle {
		m.TitleErr, got.failed = fmt.Sprintf("Keep the title under %d characters.", request.MaxTitle), true
	}
	if got.failed {
		m.FormError = "Some fields need attention."
		if r.MultipartForm != nil && len(r.MultipartForm.File) > 0 {
			m.FormError += " Browsers do not keep chosen files: attach them again."
		}
		status := http.StatusUnprocessableEntity
		if got.unstorable {
			status = http.StatusBadRequest
		}
		return response.Page(c, status, views.NewTaskView(m))
	}
	rawInput, err := json.Marshal(input)
	if err != nil {
		return err
	}
	var rawOpts json.RawMessage
	if len(desc.Gates) > 0 {
		options["gates"] = gates
	}
	if len(options) > 0 {
		if rawOpts, err = json.Marshal(options); err != nil {
			return err
		}
	}
	t, err := d.s.engine.Create(c.Request().Context(), graph.NewTask{Workflow: desc.Name, Title: title, Input: rawInput,
		Options: rawOpts, CreatedBy: request.Principal(c).Name})
	var ve *graph.ValidationError
	if errors.As(err, &ve) {
		placed := false
		for i := range m.Fields {
			if m.Fields[i].Name == ve.Field {
				m.Fields[i].Error, placed = response.Sentence(ve.Message), true
			}
		}
		for i := range m.Options {
			if m.Options[i].Name == ve.Field {
				m.Options[i].Error, placed = response.Sentence(ve.Message), true
			}
		}
		if ve.Field == "title" {
			m.TitleErr, placed = response.Sentence(ve.Message), true
		}
		if !placed {
			m.FormError = response.Sentence(ve.Error())
		} else {
			m.FormError = "Some fields need attention."
		}
		return response.Page(c, http.StatusUnprocessableEntity, views.NewTaskView(m))
	}
	if err != nil {
		return err
	}
	d.s.wakeRunner()
	return c.Redirect(http.StatusSeeOther, "/tasks/"+t.ID)
}

// formRead is what reading the new-task form found: whether any field
// needs attention, and whether one has text that cannot be stored.
type formRead struct {
	failed, unstorable bool
}

// text is a field's text as the form shows it again, with the error of
// text that cannot be stored (U+0000, invalid UTF-8) in *msg: shown with
// U+FFFD where it cannot be, so that the page is valid UTF-8 and the
// person sees where.
func (g *formRead) text(raw string, msg *string) string {
	p := pgtext.Problem(raw)
	if p == "" {
		return raw
	}
	g.failed, g.unstorable = true, true
	*msg = "This text " + p + "; it is shown as \uFFFD: remove it."
	if p == pgtext.InvalidUTF8 {
		*msg = "This text " + p + "; the bytes that are not are shown as \uFFFD: remove or retype them."
	}
	return pgtext.Shown(raw)
}

// json is text typed as JSON, as the form shows it again, with the error
// of text that cannot be stored in *msg: the text's own (text), or a
// string of the JSON with a \u0000 escape, named by its place in it.
func (g *formRead) json(raw string, msg *string) string {
	shown := g.text(raw, msg)
	if *msg != "" || !json.Valid([]byte(raw)) {
		return shown
	}
	if field, p := pgtext.JSON([]byte(raw)); p != "" {
		g.failed, g.unstorable = true, true
		where := "A string of this JSON"
		if field != "" {
			where = field
		}
		*msg = where + " " + p + " (the escape \\u0000): remove it."
	}
	return shown
}

// fields reads the posted values of the fields of props (fields[i] is
// props[i]'s) into obj, keeping what was typed in each field and its
// error beside it. The input's fields and the options' alike.
func (g *formRead) fields(r *http.Request, props []formProp, fields []views.Field, obj map[string]any) {
	for i, p := range props {
		f := &fields[i]
		raw := r.PostForm.Get(f.Name)
		switch f.Kind {
		case views.FieldCheckbox:
			f.Checked = raw != ""
			setValue(obj, p, f.Checked)
			continue
		case views.FieldFiles:
			files, msg, unstorable := uploadedFiles(r, f.Name, p)
			switch {
			case msg != "":
				f.Error, g.failed, g.unstorable = msg, true, g.unstorable || unstorable
			case len(files) > 0:
				obj[p.Name] = files
			case p.Required:
				f.Error, g.failed = "Attach at least one file.", true
			}
			continue
		}
		read := g.text
		if p.jsonIn(f.Kind) {
			read = g.json
		}
		if f.Value = read(raw, &f.Error); f.Error != "" {
			continue
		}
		v, msg := formValue(p, f.Kind, raw)
		if msg != "" {
			f.Error, g.failed = msg, true
			continue
		}
		if v != nil {
			setValue(obj, p, v)
		}
	}
}

// jsonIn reports a property typed as JSON in a text input of kind (an
// object or array the form has no inputs of its own for).
func (p formProp) jsonIn(kind string) bool {
	t := p.Prop.typ()
	return (kind == views.FieldTextarea || kind == views.FieldText) && t != "string" && t != ""
}

// formValue converts a submitted field to its JSON value (nil: leave it
// out), or says what is wrong.
func formValue(p formProp, kind, raw string) (any, string) {
	trimmed := strings.TrimSpace(raw)
	if trimmed == "" {
		if p.Required {
			return nil, "This field is required."
		}
		return nil, ""
	}
	switch kind {
	case views.FieldNumber:
		n, err := strconv.ParseFloat(trimmed, 64)
		if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
			return nil, "Enter a number."
		}
		if p.Prop.typ() == "integer" && n != math.Trunc(n) {
			return nil, "Enter a whole number."
		}
		if p.Prop.Minimum != nil && n < *p.Prop.Minimum {
			return nil, fmt.Sprintf("Enter %v or more.", *p.Prop.Minimum)
		}
		if p.Prop.Maximum != nil && n > *p.Prop.Maximum {
			return nil, fmt.Sprintf("Enter %v or less.", *p.Prop.Maximum)
		}
		if p.Prop.typ() == "integer" {
			return int64(n), ""
		}
		return n, ""
	case views.FieldLines:
		var lines []string
		for _, l := range strings.Split(raw, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		return lines, ""
	case views.FieldSelect:
		for _, e := range p.Prop.Enum {
			if fmt.Sprint(e) == trimmed {
				return e, ""
			}
		}
		return nil, "Choose one of the options."
	case views.FieldTextarea, views.FieldText:
		if p.jsonIn(kind) {
			var v any
			if err := json.Unmarshal([]byte(trimmed), &v); err != nil {
				return nil, "Enter valid JSON."
			}
			return v, ""
		}
		if n := utf8.RuneCountInString(raw); p.Prop.MaxLength > 0 && n > p.Prop.MaxLength {
			unit := "characters"
			if n-p.Prop.MaxLength == 1 {
				unit = "character"
			}
			return nil, fmt.Sprintf("This is %d %s over the limit of %d (it has %d); shorten it: nothing was cut.",
				n-p.Prop.MaxLength, unit, p.Prop.MaxLength, n)
		}
		if p.Prop.MinLength > 0 && utf8.RuneCountInString(trimmed) < p.Prop.MinLength {
			return nil, fmt.Sprintf("Write at least %d characters.", p.Prop.MinLength)
		}
		if p.Prop.Pattern != "" {
			// JSON Schema patterns are ECMAScript; the ones our schemas use
			// are RE2 too. One that is not is not checked here (the
			// workflow's own validation still is).
			if re, err := regexp.Compile(p.Prop.Pattern); err == nil && !re.MatchString(trimmed) {
				msg := p.Prop.ErrorMessage
				if msg == "" {
					msg = "Use the form this field needs: " + p.Prop.Pattern
				}
				return nil, msg
			}
			return trimmed, ""
		}
		return raw, ""
	}
	return raw, ""
}

// uploadedFiles reads the text files of a file field as {name, content}
// objects, within the item schema's limits; unstorable when what is wrong
// is a file's name that cannot be stored (U+0000, invalid UTF-8).
func uploadedFiles(r *http.Request, field string, p formProp) (_ []map[string]string, msg string, unstorable bool) {
	if r.MultipartForm == nil {
		return nil, "", false
	}
	var out []map[string]string
	for _, fh := range r.MultipartForm.File[field] {
		if fh.Filename == "" {
			continue
		}
		if prob := pgtext.Problem(fh.Filename); prob != "" {
			return nil, "A file's name " + prob + "; rename it and attach it again.", true
		}
		if p.Prop.MaxItems > 0 && len(out) >= p.Prop.MaxItems {
			return nil, fmt.Sprintf("Attach at most %d files.", p.Prop.MaxItems), false
		}
		limit := int64(p.Prop.Items.Properties["content"].MaxLength)
		if limit > 0 && fh.Size > limit {
			return nil, fmt.Sprintf("%s is larger than %d KiB.", fh.Filename, limit>>10), false
		}
		f, err := fh.Open()
		if err != nil {
			return nil, "A file could not be read; attach it again.", false
		}
		b, err := io.ReadAll(f)
		_ = f.Close()
		if err != nil {
			return nil, "A file could not be read; attach it again.", false
		}
		if pgtext.Problem(string(b)) != "" {
			return nil, fmt.Sprintf("%s is not a text file.", fh.Filename), false
		}
		out = append(out, map[string]string{"name": filepath.Base(fh.Filename), "content": string(b)})
	}
	return out, "", false
}

// setValue puts v in the input or options object under p's name, inside
// its parent object for a nested field.
func setValue(obj map[string]any, p formProp, v any) {
	if p.Parent == "" {
		obj[p.Name] = v
		return
	}
	sub, _ := obj[p.Parent].(map[string]any)
	if sub == nil {
		sub = map[string]any{}
		obj[p.Parent] = sub
	}
	sub[p.Sub] = v
}
