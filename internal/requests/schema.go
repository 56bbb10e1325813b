package requests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Limits of a response_schema (SPEC §17).
const (
	MaxSchemaBytes      = 64 << 10
	MaxSchemaProperties = 50
)

// Field types and the controls the desk draws for them.
const (
	TypeString  = "string"
	TypeInteger = "integer"
	TypeNumber  = "number"
	TypeBoolean = "boolean"
	TypeArray   = "array"

	WidgetText     = "text"
	WidgetTextarea = "textarea"
	WidgetSelect   = "select"
	WidgetNumber   = "number"
	WidgetCheckbox = "checkbox"
	WidgetChoices  = "choices" // several of an enum
)

// SingleField is the name of the one field of a non-object schema.
const SingleField = "value"

// Form is a response_schema in the form the desk renders (SPEC §17): an
// object's properties as labelled controls, or one field named "value".
type Form struct {
	// Single: the schema is not an object; the answer is the value of its
	// one field, SingleField.
	Single bool
	Fields []Field
	schema *jsonschema.Schema
}

// Field is one control of a Form.
type Field struct {
	Name        string
	Type        string // TypeString, …
	Widget      string // WidgetText, …
	Title       string // the label; Name when the schema has none
	Description string // help under the control
	Required    bool
	Enum        []string
	// Default is the schema's default, as JSON (nil: none).
	Default   json.RawMessage
	MinLength *int
	MaxLength *int
	Pattern   string
	Minimum   *float64
	Maximum   *float64
	MinItems  *int
	MaxItems  *int
}

// DefaultText is the default as a control's initial text.
func (f Field) DefaultText() string {
	if len(f.Default) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(f.Default, &s) == nil {
		return s
	}
	return string(f.Default)
}

// DefaultHas reports whether the default is or contains choice (a
// choice's initial state).
func (f Field) DefaultHas(choice string) bool {
	var one string
	if json.Unmarshal(f.Default, &one) == nil {
		return one == choice
	}
	var many []string
	if json.Unmarshal(f.Default, &many) == nil {
		return slices.Contains(many, choice)
	}
	return false
}

// DefaultTrue reports whether a boolean's default is true.
func (f Field) DefaultTrue() bool { return string(f.Default) == "true" }

var propNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)

// ParseForm checks a response_schema: only what the desk can render is
// accepted. Errors are *FieldError naming the schema path
// ("response_schema.properties.env.type").
func ParseForm(raw json.RawMessage) (*Form, error) {
	const root = "response_schema"
	if len(raw) > MaxSchemaBytes {
		return nil, &FieldError{Field: root, Problem: fmt.Sprintf("is larger than %d bytes", MaxSchemaBytes)}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, &FieldError{Field: root, Problem: "must be a JSON Schema object"}
	}
	var typ string
	if err := json.Unmarshal(top["type"], &typ); err != nil || typ == "" {
		return nil, &FieldError{Field: root + ".type", Problem: "is required: object, string, integer, number, boolean or array"}
	}
	f := &Form{}
	if typ != "object" {
		field, err := parseField(root, SingleField, top, true)
		if err != nil {
			return nil, err
		}
		field.Required = true
		f.Single, f.Fields = true, []Field{field}
	} else {
		for k := range top {
			switch k {
			case "$schema", "type", "title", "description", "properties", "required", "additionalProperties":
			default:
				return nil, unsupported(root+"."+k, k)
			}
		}
		if ap, ok := top["additionalProperties"]; ok && string(ap) != "true" && string(ap) != "false" {
			return nil, &FieldError{Field: root + ".additionalProperties", Problem: "must be true or false"}
		}
		names, props, err := orderedObject(top["properties"])
		if err != nil {
			return nil, &FieldError{Field: root + ".properties", Problem: "must be an object of properties"}
		}
		if len(names) == 0 {
			return nil, &FieldError{Field: root + ".properties", Problem: "must name at least one property"}
		}
		if len(names) > MaxSchemaProperties {
			return nil, &FieldError{Field: root + ".properties", Problem: fmt.Sprintf("has %d properties; at most %d", len(names), MaxSchemaProperties)}
		}
		for _, name := range names {
			path := root + ".properties." + name
			if !propNameRe.MatchString(name) {
				return nil, &FieldError{Field: path, Problem: "a property name is a letter or '_', then up to 63 letters, digits, '_' or '-'"}
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(props[name], &m); err != nil {
				return nil, &FieldError{Field: path, Problem: "must be a schema object"}
			}
			field, err := parseField(path, name, m, false)
			if err != nil {
				return nil, err
			}
			f.Fields = append(f.Fields, field)
		}
		if r, ok := top["required"]; ok {
			var req []string
			if err := json.Unmarshal(r, &req); err != nil {
				return nil, &FieldError{Field: root + ".required", Problem: "must be a list of property names"}
			}
			for _, name := range req {
				i := slices.IndexFunc(f.Fields, func(x Field) bool { return x.Name == name })
				if i < 0 {
					return nil, &FieldError{Field: root + ".required", Problem: fmt.Sprintf("%q is not a property", name)}
				}
				f.Fields[i].Required = true
			}
		}
	}
	sch, err := compileSchema(raw)
	if err != nil {
		return nil, &FieldError{Field: root, Problem: err.Error()}
	}
	f.schema = sch
	return f, nil
}

func unsupported(path, key string) *FieldError {
	return &FieldError{Field: path, Problem: fmt.Sprintf("%s is not supported: a response_schema holds strings (enum, format textarea, "+
		"minLength, maxLength, pattern), integers and numbers (minimum, maximum), booleans and arrays of string enums "+
		"(minItems, maxItems), each with title, description and default", key)}
}

// parseField checks one property (or a non-object schema, single).
func parseField(path, name string, m map[string]json.RawMessage, single bool) (Field, error) {
	f := Field{Name: name, Title: name}
	var typ string
	var enum []string
	_, typed := m["type"]
	switch {
	case !typed && json.Unmarshal(m["enum"], &enum) == nil && len(enum) > 0:
		// {"enum": ["a", "b"]} is a choice of strings without saying so
		// (JSON Schema needs no type beside an enum): the schema as
		// written still validates the answer.
		typ = TypeString
	case json.Unmarshal(m["type"], &typ) != nil:
		return f, &FieldError{Field: path + ".type", Problem: "is required (or an enum of strings): string, integer, number, boolean or array"}
	}
	f.Type = typ
	allowed := []string{"type", "title", "description", "default"}
	if single {
		allowed = append(allowed, "$schema")
	}
	switch typ {
	case TypeString:
		allowed = append(allowed, "enum", "format", "minLength", "maxLength", "pattern")
		f.Widget = WidgetText
	case TypeInteger, TypeNumber:
		allowed = append(allowed, "minimum", "maximum")
		f.Widget = WidgetNumber
	case TypeBoolean:
		f.Widget = WidgetCheckbox
	case TypeArray:
		allowed = append(allowed, "items", "minItems", "maxItems", "uniqueItems")
		f.Widget = WidgetChoices
	case "object":
		return f, &FieldError{Field: path + ".type", Problem: "nested objects are not supported"}
	default:
		return f, &FieldError{Field: path + ".type", Problem: fmt.Sprintf("%q: want string, integer, number, boolean or array", typ)}
	}
	for k := range m {
		if !slices.Contains(allowed, k) {
			return f, unsupported(path+"."+k, k)
		}
	}
	str := func(k string) (string, error) {
		v, ok := m[k]
		if !ok {
			return "", nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", &FieldError{Field: path + "." + k, Problem: "must be a string"}
		}
		return s, nil
	}
	count := func(k string) (*int, error) {
		v, ok := m[k]
		if !ok {
			return nil, nil
		}
		var n int
		if err := json.Unmarshal(v, &n); err != nil || n < 0 {
			return nil, &FieldError{Field: path + "." + k, Problem: "must be a whole number, 0 or more"}
		}
		return &n, nil
	}
	num := func(k string) (*float64, error) {
		v, ok := m[k]
		if !ok {
			return nil, nil
		}
		var n float64
		if err := json.Unmarshal(v, &n); err != nil {
			return nil, &FieldError{Field: path + "." + k, Problem: "must be a number"}
		}
		return &n, nil
	}
	var err error
	if t, e := str("title"); e != nil {
		return f, e
	} else if t != "" {
		f.Title = t
	}
	if f.Description, err = str("description"); err != nil {
		return f, err
	}
	if d, ok := m["default"]; ok {
		f.Default = d
	}
	switch typ {
	case TypeString:
		if e, ok := m["enum"]; ok {
			if err := json.Unmarshal(e, &f.Enum); err != nil || len(f.Enum) == 0 {
				return f, &FieldError{Field: path + ".enum", Problem: "must be a non-empty list of strings"}
			}
			f.Widget = WidgetSelect
		}
		format, err := str("format")
		if err != nil {
			return f, err
		}
		switch format {
		case "":
		case "textarea":
			if f.Widget == WidgetText {
				f.Widget = WidgetTextarea
			}
		default:
			return f, &FieldError{Field: path + ".format", Problem: fmt.Sprintf("%q is not supported (want textarea)", format)}
		}
		if f.MinLength, err = count("minLength"); err != nil {
			return f, err
		}
		if f.MaxLength, err = count("maxLength"); err != nil {
			return f, err
		}
		if f.Pattern, err = str("pattern"); err != nil {
			return f, err
		}
		if f.Pattern != "" {
			if _, err := regexp.Compile(f.Pattern); err != nil {
				return f, &FieldError{Field: path + ".pattern", Problem: "is not a regular expression: " + err.Error()}
			}
		}
	case TypeInteger, TypeNumber:
		if f.Minimum, err = num("minimum"); err != nil {
			return f, err
		}
		if f.Maximum, err = num("maximum"); err != nil {
			return f, err
		}
	case TypeArray:
		var items map[string]json.RawMessage
		if err := json.Unmarshal(m["items"], &items); err != nil {
			return f, &FieldError{Field: path + ".items", Problem: "is required: {\"type\": \"string\", \"enum\": [...]}"}
		}
		for k := range items {
			if k != "type" && k != "enum" {
				return f, unsupported(path+".items."+k, k)
			}
		}
		if t, ok := items["type"]; ok && string(t) != `"string"` {
			return f, &FieldError{Field: path + ".items.type", Problem: "arrays hold strings of an enum only"}
		}
		if err := json.Unmarshal(items["enum"], &f.Enum); err != nil || len(f.Enum) == 0 {
			return f, &FieldError{Field: path + ".items.enum", Problem: "must be a non-empty list of strings"}
		}
		if f.MinItems, err = count("minItems"); err != nil {
			return f, err
		}
		if f.MaxItems, err = count("maxItems"); err != nil {
			return f, err
		}
	}
	return f, nil
}

// orderedObject reads a JSON object's members in their order.
func orderedObject(raw json.RawMessage) ([]string, map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	t, err := dec.Token()
	if err != nil || t != json.Delim('{') {
		return nil, nil, errors.New("not an object")
	}
	var names []string
	vals := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		if _, dup := vals[k]; dup {
			return nil, nil, fmt.Errorf("%q twice", k)
		}
		names = append(names, k)
		vals[k] = v
	}
	return names, vals, nil
}

func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("response_schema.json", doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile("response_schema.json")
	if err != nil {
		return nil, errors.New(strings.TrimSpace(strings.ReplaceAll(err.Error(), "\n", " ")))
	}
	return sch, nil
}

// Validate checks an answer against the schema with the JSON Schema
// library and returns it as canonical typed JSON. Errors: *AnswerError
// naming the field ("value.env"; "value" for a non-object schema).
func (f *Form) Validate(value json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(value)) == 0 || string(bytes.TrimSpace(value)) == "null" {
		return nil, &AnswerError{Field: "value", Problem: "is required: an answer valid against the request's response_schema"}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return nil, &AnswerError{Field: "value", Problem: "is not JSON"}
	}
	if err := f.schema.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return nil, f.first(answerError(ve))
		}
		return nil, &AnswerError{Field: "value", Problem: err.Error()}
	}
	var v any
	if err := json.Unmarshal(value, &v); err != nil {
		return nil, &AnswerError{Field: "value", Problem: "is not JSON"}
	}
	return json.Marshal(v)
}

// answerError names the failing fields of a validation error: the first
// as Field, every one in Fields.
func answerError(ve *jsonschema.ValidationError) *AnswerError {
	var ae *AnswerError
	add := func(field, problem string) {
		if ae == nil {
			ae = &AnswerError{Field: field, Problem: problem, Fields: map[string]string{}}
		}
		if _, seen := ae.Fields[field]; !seen {
			ae.Fields[field] = problem
		}
	}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		field := "value"
		for _, p := range e.InstanceLocation {
			field += "." + p
		}
		if r, ok := e.ErrorKind.(*kind.Required); ok && len(r.Missing) > 0 {
			for _, m := range r.Missing {
				add(field+"."+m, "is required")
			}
			return
		}
		add(field, problemOf(e))
	}
	walk(ve)
	if ae == nil {
		return &AnswerError{Field: "value", Problem: ve.Error()}
	}
	return ae
}

// problemOf words a validation error for the person who answered:
// "must be at most 10" rather than "maximum: got 11, want 10".
func problemOf(e *jsonschema.ValidationError) string {
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		switch {
		case slices.Contains(k.Want, "integer"):
			return "must be a whole number"
		case slices.Contains(k.Want, "number"):
			return "must be a number"
		case slices.Contains(k.Want, "string"):
			return "must be text"
		case slices.Contains(k.Want, "boolean"):
			return "must be true or false"
		case slices.Contains(k.Want, "array"):
			return "must be a list of choices"
		case slices.Contains(k.Want, "object"):
			return "must be an object of fields"
		}
	case *kind.Enum:
		opts := make([]string, len(k.Want))
		for i, w := range k.Want {
			opts[i] = fmt.Sprint(w)
		}
		return "must be one of " + strings.Join(opts, ", ")
	case *kind.Minimum:
		return "must be at least " + ratText(k.Want)
	case *kind.Maximum:
		return "must be at most " + ratText(k.Want)
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %d characters (is %d)", k.Want, k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters (is %d)", k.Want, k.Got)
	case *kind.Pattern:
		return "must match the pattern " + k.Want
	case *kind.MinItems:
		return fmt.Sprintf("pick at least %d", k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("pick at most %d", k.Want)
	case *kind.UniqueItems:
		return "must not pick the same choice twice"
	}
	msg := e.Error()
	if out := e.BasicOutput(); out != nil && out.Error != nil {
		msg = out.Error.String()
	} else if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	return msg
}

// ratText is a schema bound as written: 10, 0.5.
func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return strings.TrimRight(strings.TrimRight(r.FloatString(6), "0"), ".")
}

// Collect reads an answer from a form's controls ("answer.<name>"),
// typed by the schema: numbers as numbers, a checkbox as a boolean,
// several choices as an array; an empty control is left out. It does not
// validate (the Decider does, through CheckDecision): problems holds only
// what cannot be typed ("must be a whole number"), by field name, and such
// a field keeps its text, which the schema then refuses.
func (f *Form) Collect(vals url.Values) (value json.RawMessage, problems map[string]string) {
	problems = map[string]string{}
	obj := map[string]any{}
	for _, fd := range f.Fields {
		raw := vals["answer."+fd.Name]
		text := strings.TrimSpace(strings.Join(raw, ""))
		switch fd.Type {
		case TypeBoolean:
			obj[fd.Name] = text == "on" || text == "true"
			continue
		case TypeArray:
			picked := []string{}
			for _, v := range raw {
				if v = strings.TrimSpace(v); v != "" {
					picked = append(picked, v)
				}
			}
			if len(picked) > 0 || fd.Required {
				obj[fd.Name] = picked
			}
			continue
		}
		if text == "" {
			continue
		}
		switch fd.Type {
		case TypeInteger:
			n, err := strconv.ParseInt(text, 10, 64)
			if err != nil {
				problems[fd.Name], obj[fd.Name] = "must be a whole number", text
				continue
			}
			obj[fd.Name] = n
		case TypeNumber:
			n, err := strconv.ParseFloat(text, 64)
			if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
				problems[fd.Name], obj[fd.Name] = "must be a number", text
				continue
			}
			obj[fd.Name] = n
		default:
			obj[fd.Name] = strings.Join(raw, "")
		}
	}
	var v any = obj
	if f.Single {
		v = obj[SingleField]
	}
	b, err := json.Marshal(v)
	if err != nil { // not reached: strings, numbers and booleans only
		return nil, problems
	}
	return b, problems
}

// first makes Field the failing field that comes first in the form, so
// that the same answer is always refused naming the same field.
func (f *Form) first(ae *AnswerError) *AnswerError {
	best := -1
	for path, problem := range ae.Fields {
		name := f.FieldOf(path)
		i := slices.IndexFunc(f.Fields, func(x Field) bool { return x.Name == name })
		if i < 0 {
			i = len(f.Fields)
		}
		if best < 0 || i < best || i == best && path < ae.Field {
			best, ae.Field, ae.Problem = i, path, problem
		}
	}
	return ae
}

// Order puts the fields in the order names gives (a request's
// FieldOrder: the order its schema was written in); fields it does not
// name keep their place after those it does.
func (f *Form) Order(names []string) {
	rank := func(name string) int {
		if i := slices.Index(names, name); i >= 0 {
			return i
		}
		return len(names)
	}
	slices.SortStableFunc(f.Fields, func(a, b Field) int { return rank(a.Name) - rank(b.Name) })
}

// FieldOf is the control an answer's error path names: "value.env.0" →
// "env"; "value" → the one field of a non-object schema (or "" when the
// answer as a whole is wrong).
func (f *Form) FieldOf(path string) string {
	name := strings.TrimPrefix(strings.TrimPrefix(path, "value"), ".")
	if f.Single {
		return f.Fields[0].Name
	}
	if i := strings.IndexByte(name, '.'); i >= 0 {
		name = name[:i]
	}
	if !slices.ContainsFunc(f.Fields, func(x Field) bool { return x.Name == name }) {
		return ""
	}
	return name
}
