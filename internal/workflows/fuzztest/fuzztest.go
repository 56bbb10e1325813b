// Package fuzztest checks workflow inputs against their JSON Schema, for
// the workflows' fuzz tests: whatever a ParseInput accepts must satisfy
// the schema the desk's form and the API document, and whatever it refuses
// must be refused with a *graph.ValidationError naming an input field.
//
// Check understands the subset of JSON Schema the workflows use: type,
// properties, required, additionalProperties false, items, minLength,
// maxLength (in characters), pattern (as a Go regexp), enum, minItems,
// maxItems, minimum, maximum.
// Annotations (title, description, format, default, …) are ignored.
//
// Test support: it imports graph only.
package fuzztest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gatehousehq/gatehouse/graph"
)

type schema struct {
	Type                 any                `json:"type"`
	Properties           map[string]*schema `json:"properties"`
	Required             []string           `json:"required"`
	AdditionalProperties *bool              `json:"additionalProperties"`
	Items                *schema            `json:"items"`
	MinLength            *int               `json:"minLength"`
	MaxLength            *int               `json:"maxLength"`
	MinItems             *int               `json:"minItems"`
	MaxItems             *int               `json:"maxItems"`
	Minimum              *float64           `json:"minimum"`
	Maximum              *float64           `json:"maximum"`
	Enum                 []any              `json:"enum"`
	Pattern              string             `json:"pattern"`
}

// Check reports whether doc satisfies the JSON Schema s (nil: it does).
func Check(s, doc []byte) error {
	var sc schema
	if err := json.Unmarshal(s, &sc); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("document: %w", err)
	}
	return sc.check("input", v)
}

func (s *schema) types() []string {
	switch t := s.Type.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if str, ok := x.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}

func typeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func (s *schema) check(path string, v any) error {
	if ts := s.types(); len(ts) > 0 {
		t := typeOf(v)
		if !slices.Contains(ts, t) && !(t == "integer" && slices.Contains(ts, "number")) {
			return fmt.Errorf("%s: is %s, schema wants %s", path, t, strings.Join(ts, " or "))
		}
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
		return fmt.Errorf("%s: %v is not one of the schema's %v", path, v, s.Enum)
	}
	switch x := v.(type) {
	case string:
		if s.Pattern != "" && !regexp.MustCompile(s.Pattern).MatchString(x) {
			return fmt.Errorf("%s: %q does not match the schema's pattern %s", path, x, s.Pattern)
		}
		n := utf8.RuneCountInString(x)
		if s.MinLength != nil && n < *s.MinLength {
			return fmt.Errorf("%s: %d characters, schema wants at least %d", path, n, *s.MinLength)
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			return fmt.Errorf("%s: %d characters, schema wants at most %d", path, n, *s.MaxLength)
		}
	case json.Number:
		f, _ := x.Float64()
		if s.Minimum != nil && f < *s.Minimum || s.Maximum != nil && f > *s.Maximum {
			return fmt.Errorf("%s: %s is out of the schema's range", path, x)
		}
	case []any:
		if s.MinItems != nil && len(x) < *s.MinItems {
			return fmt.Errorf("%s: %d items, schema wants at least %d", path, len(x), *s.MinItems)
		}
		if s.MaxItems != nil && len(x) > *s.MaxItems {
			return fmt.Errorf("%s: %d items, schema wants at most %d", path, len(x), *s.MaxItems)
		}
		if s.Items != nil {
			for i, item := range x {
				if err := s.Items.check(fmt.Sprintf("%s[%d]", path, i), item); err != nil {
					return err
				}
			}
		}
	case map[string]any:
		for _, r := range s.Required {
			if _, ok := x[r]; !ok {
				return fmt.Errorf("%s.%s: required by the schema, missing", path, r)
			}
		}
		for k, item := range x {
			p, ok := s.Properties[k]
			if !ok {
				if s.AdditionalProperties != nil && !*s.AdditionalProperties {
					return fmt.Errorf("%s.%s: not a property of the schema", path, k)
				}
				continue
			}
			if err := p.check(path+"."+k, item); err != nil {
				return err
			}
		}
	}
	return nil
}

// ParseInput runs one fuzz input through parse and checks it: no panic;
// a refusal is a *graph.ValidationError naming "input" or a field under
// it; an acceptance's parsed value satisfies the schema, and parsing it
// again (as JSON) gives the same value.
func ParseInput[T any](t *testing.T, schemaJSON []byte, parse func(json.RawMessage) (T, error), raw []byte) {
	t.Helper()
	in, err := parse(raw)
	if err != nil {
		var ve *graph.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("ParseInput(%q): %v (%T), want a *graph.ValidationError", raw, err, err)
		}
		if ve.Field != "input" && !strings.HasPrefix(ve.Field, "input.") && !strings.HasPrefix(ve.Field, "input[") {
			t.Fatalf("ParseInput(%q): field %q is not under input", raw, ve.Field)
		}
		if ve.Message == "" {
			t.Fatalf("ParseInput(%q): an error without a message", raw)
		}
		return
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatalf("Marshal(%+v): %v", in, err)
	}
	// What is kept is checked, not what was sent: parsing trims text and
	// drops empty optional fields, which the schema need not allow.
	if err := Check(schemaJSON, b); err != nil {
		t.Fatalf("ParseInput accepted %q as %s, which the schema refuses: %v", raw, b, err)
	}
	again, err := parse(b)
	if err != nil {
		t.Fatalf("ParseInput refuses its own output %s: %v", b, err)
	}
	b2, err := json.Marshal(again)
	if err != nil {
		t.Fatalf("Marshal(%+v): %v", again, err)
	}
	if !bytes.Equal(b, b2) {
		t.Fatalf("round trip changed the input:\n%s\n%s", b, b2)
	}
}
