package mcp

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// anyJSON is the schema of a field that holds any JSON value. It is never
// the empty schema, which marshals as the boolean true: the official
// TypeScript client refuses a whole tool list when a property's schema is
// a boolean.
func anyJSON(desc string) *jsonschema.Schema {
	return &jsonschema.Schema{Types: []string{"object", "array", "string", "number", "boolean", "null"}, Description: desc}
}

// objectOrNull is the schema of an optional JSON object.
func objectOrNull(desc string) *jsonschema.Schema {
	return &jsonschema.Schema{Types: []string{"object", "null"}, Description: desc}
}

// SchemaFor infers the JSON Schema of T as the SDK does, with
// json.RawMessage and interface fields as any JSON value (not a byte
// array, not the boolean true), then applies overrides by dotted property
// path ("decision.value"); an override's empty description keeps the
// inferred one. It panics on a path that does not exist: schemas are built
// at start-up, and a wrong path is a programming error.
func SchemaFor[T any](overrides map[string]*jsonschema.Schema) *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): anyJSON(""),
		reflect.TypeFor[any]():             anyJSON(""),
	}})
	if err != nil {
		panic(fmt.Sprintf("mcp: schema of %v: %v", reflect.TypeFor[T](), err))
	}
	for path, o := range overrides {
		parent := s
		names := strings.Split(path, ".")
		for _, n := range names[:len(names)-1] {
			parent = parent.Properties[n]
			if parent == nil {
				panic(fmt.Sprintf("mcp: schema of %v has no property %q", reflect.TypeFor[T](), path))
			}
		}
		last := names[len(names)-1]
		old, ok := parent.Properties[last]
		if !ok {
			panic(fmt.Sprintf("mcp: schema of %v has no property %q", reflect.TypeFor[T](), path))
		}
		o = o.CloneSchemas()
		if o.Description == "" && old != nil {
			o.Description = old.Description
		}
		parent.Properties[last] = o
	}
	return s
}
