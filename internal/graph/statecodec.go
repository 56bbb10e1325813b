package graph

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/gatehousehq/gatehouse/internal/jsonobj"
)

// Large states. The engine encodes the whole state after every node run
// and decodes it at the start of every run. A state that holds a large
// document no node changes paid for the document each time: ~4 ms to
// encode and ~12 ms to decode a 1 MB string with encoding/json, against
// well under a millisecond for the rest of a step. So a state whose type
// is a struct treats its large top-level string fields apart: a string's
// bytes never change, so a field holding the same string (same data
// pointer, same length) as when it was last encoded or decoded reuses that
// JSON, and a large string is decoded by a fast path. Everything else goes
// through encoding/json, and the result is the same bytes and the same
// value encoding/json gives (statecodec_test.go checks it).

// bigString is the size from which a string field is treated apart.
const bigString = 4096

// bigMarker stands in for a large field while the rest of the state goes
// through encoding/json.
const bigMarker = "\x00gatehouse:large-field"

var bigMarkerJSON = []byte(`"\u0000gatehouse:large-field"`)

// stringField is a top-level string field of a state struct.
type stringField struct {
	index int
	key   string // its JSON name
	keyJS []byte // the name as encoding/json writes it
}

// stringFields lists the fields of S the codec may treat apart, or nil
// when S must go whole through encoding/json: not a struct, custom
// (un)marshalling, embedded structs (promoted fields and their conflicts
// are encoding/json's business), or anything about the fields this code
// does not model exactly.
func stringFields[S any]() []stringField {
	t := reflect.TypeFor[S]()
	if t.Kind() != reflect.Struct || customJSON(t) {
		return nil
	}
	var out []stringField
	names := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		if names[strings.ToLower(name)] {
			return nil // encoding/json's rules for clashing names: leave them to it
		}
		names[strings.ToLower(name)] = true
		if f.Type.Kind() != reflect.String || customJSON(f.Type) || strings.Contains(","+opts+",", ",string,") {
			continue
		}
		key, err := json.Marshal(name)
		if err != nil || !bytes.Equal(key, []byte(`"`+name+`"`)) {
			continue
		}
		out = append(out, stringField{index: i, key: name, keyJS: key})
	}
	return out
}

func customJSON(t reflect.Type) bool {
	for _, tt := range []reflect.Type{t, reflect.PointerTo(t)} {
		if tt.Implements(reflect.TypeFor[json.Marshaler]()) || tt.Implements(reflect.TypeFor[json.Unmarshaler]()) ||
			tt.Implements(reflect.TypeFor[encoding.TextMarshaler]()) || tt.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
			return true
		}
	}
	return false
}

// stateCodec encodes and decodes the states of one execution, remembering
// the JSON of its large fields.
type stateCodec[S any] struct {
	fields []stringField
	known  map[int]knownString // by field
}

type knownString struct {
	data *byte
	n    int
	js   []byte
}

func (c *stateCodec[S]) remember(i int, s string, js []byte) {
	if c.known == nil {
		c.known = map[int]knownString{}
	}
	c.known[i] = knownString{data: unsafe.StringData(s), n: len(s), js: js}
}

// encode is json.Marshal(s).
func (c *stateCodec[S]) encode(s S) ([]byte, error) {
	if len(c.fields) == 0 {
		return json.Marshal(s)
	}
	v := reflect.ValueOf(&s).Elem()
	type sub struct {
		f  *stringField
		js []byte
	}
	var subs []sub
	for i := range c.fields {
		f := &c.fields[i]
		fv := v.Field(f.index)
		str := fv.String()
		if len(str) < bigString {
			continue
		}
		k, ok := c.known[f.index]
		if !ok || k.data != unsafe.StringData(str) || k.n != len(str) {
			js, err := json.Marshal(str)
			if err != nil {
				return nil, err
			}
			c.remember(f.index, str, js)
			k = c.known[f.index]
		}
		subs = append(subs, sub{f: f, js: k.js})
		fv.SetString(bigMarker)
	}
	if len(subs) == 0 {
		return json.Marshal(s)
	}
	small, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	ms, ok := jsonobj.Split(small)
	if !ok {
		return nil, &json.UnsupportedValueError{Str: "state did not encode as an object"}
	}
	size := len(small)
	for _, x := range subs {
		size += len(x.js)
	}
	out := bytes.NewBuffer(make([]byte, 0, size))
	out.WriteByte('{')
	done := 0
	for i, m := range ms {
		if i > 0 {
			out.WriteByte(',')
		}
		out.Write(m.Key)
		out.WriteByte(':')
		val := m.Val
		if bytes.Equal(val, bigMarkerJSON) {
			for _, x := range subs {
				if bytes.Equal(m.Key, x.f.keyJS) {
					val = x.js
					done++
					break
				}
			}
		}
		out.Write(val)
	}
	out.WriteByte('}')
	if done != len(subs) {
		return nil, &json.UnsupportedValueError{Str: "state: a large field went missing while encoding"}
	}
	return out.Bytes(), nil
}

// decode is json.Unmarshal(b, &s).
func (c *stateCodec[S]) decode(b []byte) (S, error) {
	var s S
	if len(c.fields) == 0 || len(b) < bigString {
		return s, json.Unmarshal(b, &s)
	}
	ms, ok := jsonobj.Split(b)
	if !ok {
		return s, json.Unmarshal(b, &s)
	}
	type big struct {
		f   *stringField
		str string
		js  []byte
	}
	var bigs []big
	taken := make([]bool, len(ms))
	for mi, m := range ms {
		if len(m.Val) < bigString || m.Val[0] != '"' {
			continue
		}
		for i := range c.fields {
			f := &c.fields[i]
			if !bytes.Equal(m.Key, f.keyJS) {
				continue
			}
			if str, ok := unquote(m.Val); ok {
				bigs = append(bigs, big{f: f, str: str, js: m.Val})
				taken[mi] = true
			}
			break
		}
	}
	if len(bigs) == 0 {
		return s, json.Unmarshal(b, &s)
	}
	// encoding/json matches names case-insensitively, last member wins:
	// a second member for a field taken apart leaves the whole to it.
	for mi, m := range ms {
		if taken[mi] {
			continue
		}
		for _, x := range bigs {
			if bytes.EqualFold(m.Key, x.f.keyJS) {
				return s, json.Unmarshal(b, &s)
			}
		}
	}
	var small bytes.Buffer
	small.WriteByte('{')
	for mi, m := range ms {
		if mi > 0 {
			small.WriteByte(',')
		}
		small.Write(m.Key)
		small.WriteByte(':')
		if taken[mi] {
			small.WriteString(`""`)
		} else {
			small.Write(m.Val)
		}
	}
	small.WriteByte('}')
	if err := json.Unmarshal(small.Bytes(), &s); err != nil {
		return s, err
	}
	v := reflect.ValueOf(&s).Elem()
	for _, x := range bigs {
		v.Field(x.f.index).SetString(x.str)
		c.remember(x.f.index, x.str, x.js)
	}
	return s, nil
}

// unquote decodes the JSON string q (quotes included) as encoding/json
// does, or reports false for anything it leaves to encoding/json (invalid
// UTF-8, control characters, bad escapes).
func unquote(q []byte) (string, bool) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return "", false
	}
	body := q[1 : len(q)-1]
	buf := make([]byte, 0, len(body))
	for len(body) > 0 {
		i := bytes.IndexByte(body, '\\')
		chunk := body
		if i >= 0 {
			chunk = body[:i]
		}
		if !plain(chunk) {
			return "", false
		}
		buf = append(buf, chunk...)
		if i < 0 {
			break
		}
		body = body[i:]
		if len(body) < 2 {
			return "", false
		}
		switch c := body[1]; c {
		case '"', '\\', '/':
			buf = append(buf, c)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := hex4(body[2:])
			if !ok {
				return "", false
			}
			body = body[6:]
			if utf16.IsSurrogate(r) {
				if len(body) >= 6 && body[0] == '\\' && body[1] == 'u' {
					if r2, ok := hex4(body[2:]); ok {
						if dec := utf16.DecodeRune(r, r2); dec != unicode.ReplacementChar {
							buf = utf8.AppendRune(buf, dec)
							body = body[6:]
							continue
						}
					}
				}
				r = unicode.ReplacementChar
			}
			buf = utf8.AppendRune(buf, r)
			continue
		default:
			return "", false
		}
		body = body[2:]
	}
	return unsafe.String(unsafe.SliceData(buf), len(buf)), true
}

// plain reports whether b is valid UTF-8 without quotes or control
// characters: bytes encoding/json copies as they are.
func plain(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '"' {
			return false
		}
	}
	return utf8.Valid(b)
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}
