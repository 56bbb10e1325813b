package request

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// PostgreSQL stores no U+0000 and no invalid UTF-8 in text or jsonb: such
// input is refused at the door, 400 naming the field, before anything is
// changed (LESSONS: "found with hostile text"). DecodeJSON checks every
// JSON body; CheckForm every form a page posts.

// badText says what is wrong with s as stored text ("" when nothing).
func badText(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL character (U+0000), which cannot be stored"
	}
	return ""
}

// TextError is the 400 of a field whose text cannot be stored.
func TextError(field, problem string) error {
	if field == "" {
		return response.BadRequest("", "request body %s", problem)
	}
	return response.BadRequest(field, "%s %s", field, problem)
}

// checkJSONText finds the first string (key or value) of a JSON document
// that cannot be stored and names its field ("input.description",
// "items[2]"); ok when there is none. body must be valid JSON.
func checkJSONText(body []byte) error {
	if utf8.Valid(body) && !bytes.Contains(body, []byte(`\u0000`)) {
		return nil // the common case: nothing to look for
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		object bool
		key    string
		index  int
		atKey  bool
	}
	var stack []frame
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			switch {
			case f.object && f.key != "":
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			case !f.object:
				b.WriteString("[" + strconv.Itoa(f.index) + "]")
			}
		}
		return b.String()
	}
	// value marks the end of a value in the container on top.
	value := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].object {
				stack[n-1].atKey = true
			} else {
				stack[n-1].index++
			}
		}
	}
	prev := int64(0)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil // the decoder reports syntax
		}
		raw := body[prev:dec.InputOffset()]
		prev = dec.InputOffset()
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, frame{object: true, atKey: true})
			case '[':
				stack = append(stack, frame{})
			default:
				stack = stack[:len(stack)-1]
				value()
			}
		case string:
			problem := ""
			if !utf8.Valid(raw) {
				problem = "is not valid UTF-8"
			} else {
				problem = badText(t)
			}
			n := len(stack)
			if n > 0 && stack[n-1].object && stack[n-1].atKey {
				stack[n-1].key, stack[n-1].atKey = t, false
				if problem != "" {
					return TextError(path(), "has a key that "+problem)
				}
				continue
			}
			if problem != "" {
				return TextError(path(), problem)
			}
			value()
		default:
			value()
		}
	}
}

// CheckForm refuses a posted URL-encoded form any of whose values or
// names cannot be stored: 400 naming the first such field, in name order.
// Nothing has been read by the handler yet. A multipart form is left to
// its handler, which reads it with its own limit and then calls
// CheckValues.
func CheckForm(c echo.Context) error {
	r := c.Request()
	if r.Method != http.MethodPost || strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
		return nil
	}
	var maxErr *http.MaxBytesError
	if err := r.ParseForm(); errors.As(err, &maxErr) {
		return response.TooLarge()
	}
	return CheckValues(r.PostForm)
}

// CheckValues is CheckForm's check of a form's values, for a handler that
// parsed its form itself.
func CheckValues(values url.Values) error {
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if p := badText(k); p != "" {
			return TextError("", "has a field name that "+p)
		}
		for _, v := range values[k] {
			if p := badText(v); p != "" {
				return TextError(k, p)
			}
		}
	}
	return nil
}
