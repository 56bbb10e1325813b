package request

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// DecodeJSON reads the request body, one JSON object, into v: unknown
// fields, wrong types, trailing data and an empty body are 400s naming what
// is wrong; a body over the limit is 413.
//
// Text that PostgreSQL cannot store — U+0000 (a \u0000 escape) or invalid
// UTF-8 in any string — is a 400 naming the field (checkJSONText), before
// anything is decoded into v.
func DecodeJSON(c echo.Context, v any) error {
	r := c.Request()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return bodyError(err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if json.Valid(body) {
		if err := checkJSONText(body); err != nil {
			return err
		}
	}
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	// Exactly one value: anything but white space after it is refused.
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil:
		return response.BadRequest("", "request body has data after the JSON object")
	default:
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return response.TooLarge()
		}
		return response.BadRequest("", "request body has data after the JSON object")
	}
}

func bodyError(err error) error {
	var (
		maxErr    *http.MaxBytesError
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &maxErr):
		return response.TooLarge()
	case errors.Is(err, io.EOF):
		return response.BadRequest("", "request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return response.BadRequest("", "request body is truncated JSON")
	case errors.As(err, &syntaxErr):
		return response.BadRequest("", "request body is not valid JSON: %s (at byte %d)", syntaxErr.Error(), syntaxErr.Offset)
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return response.BadRequest("", "request body must be a JSON object")
		}
		return response.BadRequest(typeErr.Field, "%s must be %s, not %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return response.BadRequest(f, "%s is not a field of this request", f)
	default:
		return response.BadRequest("", "request body is not valid JSON: %v", err)
	}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	case "bool":
		return "a boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	default:
		return "a " + goKind
	}
}

// IsNull reports whether a raw JSON value is absent or null.
func IsNull(b json.RawMessage) bool {
	return len(bytes.TrimSpace(b)) == 0 || string(bytes.TrimSpace(b)) == "null"
}
