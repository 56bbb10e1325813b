package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gatehousehq/gatehouse/graph"
)

// Decode reads the JSON object raw into v strictly: unknown fields, wrong
// types and trailing data are refused. Errors are *graph.ValidationError
// naming the field as prefix.field ("input.query", "options.max_turns");
// what says what the object is, for messages ("the slogan input"), and
// fields lists its fields for the unknown-field message. An empty raw is
// an empty object.
func Decode(raw json.RawMessage, v any, prefix, what string, fields ...string) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && te.Field != "":
			return &graph.ValidationError{Field: prefix + "." + te.Field, Message: "must be " + jsonKind(te.Type.Kind().String())}
		case errors.As(err, &te):
			return &graph.ValidationError{Field: prefix, Message: "must be a JSON object"}
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return &graph.ValidationError{Field: prefix + "." + f,
				Message: fmt.Sprintf("is not a field of %s (%s)", what, strings.Join(fields, ", "))}
		default:
			return &graph.ValidationError{Field: prefix, Message: "is not a JSON object: " + err.Error()}
		}
	}
	if trailing(dec) {
		return &graph.ValidationError{Field: prefix, Message: "has data after the object"}
	}
	if err := ExactNames(raw, v, prefix, what, fields...); err != nil {
		return err
	}
	if prefix == "input" || strings.HasPrefix(prefix, "input.") || strings.HasPrefix(prefix, "input[") {
		// A task's input is stored as given and must satisfy its schema,
		// where no field is nullable. (Options keep reading null as absent.)
		return NoNulls(raw, prefix)
	}
	return nil
}

// trailing reports anything but white space after the value dec read.
// (dec.More is no test of it: it is false before a stray ']' or '}'.)
func trailing(dec *json.Decoder) bool {
	_, err := dec.Token()
	return !errors.Is(err, io.EOF)
}

// ExactNames refuses an object whose keys match v's fields only when case
// is ignored (encoding/json's matching): {"Description": …} would be read
// as description, yet the schema, the stored input and every reader by
// key see another name. Call it after decoding raw into the struct v.
func ExactNames(raw json.RawMessage, v any, prefix, what string, fields ...string) error {
	names := jsonNames(reflect.TypeOf(v))
	if names == nil {
		return nil
	}
	for _, k := range objectKeys(raw) {
		if !slices.Contains(names, k) {
			return &graph.ValidationError{Field: prefix + "." + k,
				Message: fmt.Sprintf("is not a field of %s (%s; names are case-sensitive)", what, strings.Join(fields, ", "))}
		}
	}
	return nil
}

// NoNulls refuses an object with a null value, which encoding/json reads
// as an absent field but a JSON Schema without a null type refuses.
func NoNulls(raw json.RawMessage, prefix string) error {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	for _, k := range objectKeys(raw) {
		if string(bytes.TrimSpace(obj[k])) == "null" {
			return &graph.ValidationError{Field: prefix + "." + k, Message: "must not be null (leave it out instead)"}
		}
	}
	return nil
}

// objectKeys lists the keys of a JSON object, sorted (none for anything
// else).
func objectKeys(raw json.RawMessage) []string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// jsonNames lists the JSON names of a struct type's fields (nil for
// anything but a struct or a pointer to one).
func jsonNames(t reflect.Type) []string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	names := []string{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "a list"
	case "bool":
		return "true or false"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "a whole number"
	case "float32", "float64":
		return "a number"
	default:
		return "a " + goKind
	}
}

// Text checks a required or optional text field: trimmed, valid UTF-8, at
// most maxBytes long, not empty when required. It returns the trimmed text.
func Text(field, value string, required bool, maxBytes int) (string, error) {
	v := strings.TrimSpace(value)
	switch {
	case required && v == "":
		return v, &graph.ValidationError{Field: field, Message: "is required and must not be empty"}
	case len(v) > maxBytes:
		return v, &graph.ValidationError{Field: field, Message: fmt.Sprintf("is longer than %d bytes", maxBytes)}
	case !utf8.ValidString(v):
		return v, &graph.ValidationError{Field: field, Message: "is not valid UTF-8"}
	}
	return v, nil
}

// Gates checks that the task's gate options name only gates of the
// workflow (allowed: their options, e.g. "allowSdd"; none when the
// workflow has no gates).
func Gates(workflow string, opts graph.Options, allowed ...string) error {
	for k := range opts.Gates {
		if slices.Contains(allowed, k) {
			continue
		}
		msg := "is not a gate of the " + workflow + " workflow"
		if len(allowed) > 0 {
			msg += " (" + strings.Join(allowed, ", ") + ")"
		} else {
			msg += " (it has none)"
		}
		return &graph.ValidationError{Field: "options.gates." + k, Message: msg}
	}
	return nil
}

// IntOption checks an optional whole-number option: def when absent, else
// within [lo, hi].
func IntOption(field string, v *int, def, lo, hi int) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v < lo || *v > hi {
		return 0, &graph.ValidationError{Field: field, Message: fmt.Sprintf("must be between %d and %d", lo, hi)}
	}
	return *v, nil
}
