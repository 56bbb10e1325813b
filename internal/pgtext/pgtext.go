// Package pgtext finds text PostgreSQL cannot store: U+0000 and invalid
// UTF-8 are refused by text and jsonb columns alike, so such input reaches
// the database as a 500 unless every door checks it first and names the
// field. The API, the desk, the action links, Slack, the LangGraph API and
// MCP all check with this package and word the refusal their own way.
//
// It imports the standard library only.
package pgtext

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Problems, as the end of a sentence whose subject is the field.
const (
	InvalidUTF8 = "is not valid UTF-8"
	NUL         = "contains a NUL character (U+0000), which cannot be stored"
)

// Problem says what is wrong with s as stored text ("" when nothing).
func Problem(s string) string {
	switch {
	case !utf8.ValidString(s):
		return InvalidUTF8
	case strings.IndexByte(s, 0) >= 0:
		return NUL
	}
	return ""
}

// Shown is s as a form shows it again after refusing it: valid UTF-8,
// with U+FFFD in place of each NUL and each run of bytes that is not
// UTF-8, so that the person sees where the text was refused.
func Shown(s string) string {
	if Problem(s) == "" {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// JSON finds the first string (key or value) of a JSON document that
// cannot be stored — invalid UTF-8 in the raw bytes (which encoding/json
// would silently turn into U+FFFD) or a \u0000 escape — and returns its
// field as a path ("input.description", "items[2]", "" for the document
// itself) and the problem; problem is "" when there is none. For a key,
// field is the object holding it and the problem begins "has a key that".
// A document that is not valid JSON is left to the decoder: it reports
// syntax.
func JSON(body []byte) (field, problem string) {
	if utf8.Valid(body) && !bytes.Contains(body, []byte(`\u0000`)) {
		return "", "" // the common case: nothing to look for
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
		if errors.Is(err, io.EOF) || err != nil {
			return "", "" // the end, or syntax the decoder reports
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
			p := Problem(t)
			if !utf8.Valid(raw) {
				p = InvalidUTF8
			}
			n := len(stack)
			if n > 0 && stack[n-1].object && stack[n-1].atKey {
				if p != "" {
					return path(), "has a key that " + p
				}
				stack[n-1].key, stack[n-1].atKey = t, false
				continue
			}
			if p != "" {
				return path(), p
			}
			value()
		default:
			value()
		}
	}
}

// Values finds the first name or value of a form or query that cannot be
// stored, in name order: its name and the problem ("" when none). A bad
// name is reported with name "" and a problem beginning "has a name that".
func Values(values url.Values) (name, problem string) {
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if p := Problem(k); p != "" {
			return "", "has a name that " + p
		}
		for _, v := range values[k] {
			if p := Problem(v); p != "" {
				return k, p
			}
		}
	}
	return "", ""
}
