package graph

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
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
	// share: the JSON of large fields goes to the checkpointer as it is
	// (Checkpoint.Fields), and may come back to a later run.
	share bool
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

// bigJSON is the JSON of the large string field f of a state holding str:
// the JSON remembered for it when str is the string it was made from.
func (c *stateCodec[S]) bigJSON(f *stringField, str string) ([]byte, error) {
	if k, ok := c.known[f.index]; ok && k.data == unsafe.StringData(str) && k.n == len(str) {
		return k.js, nil
	}
	js, err := json.Marshal(str)
	if err != nil {
		return nil, err
	}
	c.remember(f.index, str, js)
	// A string that is valid UTF-8 is what its JSON decodes to (encoding/json
	// replaces the bytes of invalid UTF-8): a run that loads this JSON back
	// gets the string without decoding it.
	if c.share && utf8.ValidString(str) {
		decoded.put(js, str)
	}
	return js, nil
}

type bigSub struct {
	f  *stringField
	js []byte
}

// encodeSmall encodes s with its large string fields replaced by
// bigMarker, and returns the JSON of those fields. small is nil when s has
// none.
func (c *stateCodec[S]) encodeSmall(s S) (small []byte, subs []bigSub, err error) {
	v := reflect.ValueOf(&s).Elem()
	for i := range c.fields {
		f := &c.fields[i]
		fv := v.Field(f.index)
		str := fv.String()
		if len(str) < bigString {
			continue
		}
		js, err := c.bigJSON(f, str)
		if err != nil {
			return nil, nil, err
		}
		subs = append(subs, bigSub{f: f, js: js})
		fv.SetString(bigMarker)
	}
	if len(subs) == 0 {
		return nil, nil, nil
	}
	small, err = json.Marshal(s)
	return small, subs, err
}

// encodeApart is encode with the large string fields kept apart: state is
// json.Marshal(s) without their members, and fields holds them, each the
// same JSON slice for as long as its string does not change.
func (c *stateCodec[S]) encodeApart(s S) (state []byte, fields []StateField, err error) {
	if len(c.fields) == 0 {
		state, err = json.Marshal(s)
		return state, nil, err
	}
	small, subs, err := c.encodeSmall(s)
	if err != nil || small == nil {
		if err == nil {
			state, err = json.Marshal(s)
		}
		return state, nil, err
	}
	ms, ok := jsonobj.Split(small)
	if !ok {
		return nil, nil, &json.UnsupportedValueError{Str: "state did not encode as an object"}
	}
	fields = make([]StateField, 0, len(subs))
	kept := ms[:0]
	for _, m := range ms {
		if bytes.Equal(m.Val, bigMarkerJSON) {
			if x := subFor(subs, m.Key); x != nil {
				fields = append(fields, StateField{Key: x.f.key, JSON: x.js})
				continue
			}
		}
		kept = append(kept, m)
	}
	if len(fields) != len(subs) {
		return nil, nil, &json.UnsupportedValueError{Str: "state: a large field went missing while encoding"}
	}
	return jsonobj.Join(kept, len(small)), fields, nil
}

func subFor(subs []bigSub, key []byte) *bigSub {
	for i := range subs {
		if bytes.Equal(key, subs[i].f.keyJS) {
			return &subs[i]
		}
	}
	return nil
}

// encode is json.Marshal(s).
func (c *stateCodec[S]) encode(s S) ([]byte, error) {
	if len(c.fields) == 0 {
		return json.Marshal(s)
	}
	small, subs, err := c.encodeSmall(s)
	if err != nil {
		return nil, err
	}
	if small == nil {
		return json.Marshal(s)
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
		var whole S // the same error, and the same partial value
		return whole, json.Unmarshal(b, &whole)
	}
	v := reflect.ValueOf(&s).Elem()
	for _, x := range bigs {
		v.Field(x.f.index).SetString(x.str)
		c.remember(x.f.index, x.str, x.js)
	}
	return s, nil
}

// decodeApart is decode of the state that is state with fields added
// (Checkpoint.FullState). A large string field comes from its member of
// fields as it is, and its JSON is remembered: encoding the state again
// gives that same slice for as long as the string does not change.
// Anything else goes through decode of the whole.
func (c *stateCodec[S]) decodeApart(state []byte, fields []StateField) (S, error) {
	var s S
	if len(fields) == 0 {
		return c.decode(state)
	}
	whole := func() (S, error) {
		b, err := joinFields(state, fields)
		if err != nil {
			return s, err
		}
		return c.decode(b)
	}
	strs := make([]string, len(fields))
	idx := make([]int, len(fields))
	for i, fl := range fields {
		j := slices.IndexFunc(c.fields, func(f stringField) bool { return f.key == fl.Key })
		if j < 0 || len(fl.JSON) < bigString || fl.JSON[0] != '"' || slices.Contains(idx[:i], j) {
			return whole()
		}
		str, ok := decoded.unquote(fl.JSON)
		if !ok {
			return whole()
		}
		strs[i], idx[i] = str, j
	}
	if _, ok := jsonobj.Split(state); !ok {
		return whole()
	}
	// The fields come after state's members, as in the whole state, where
	// encoding/json lets the last member of a field win.
	if err := json.Unmarshal(state, &s); err != nil {
		return whole() // the same error, and the same partial value
	}
	v := reflect.ValueOf(&s).Elem()
	for i, fl := range fields {
		f := &c.fields[idx[i]]
		v.Field(f.index).SetString(strs[i])
		c.remember(f.index, strs[i], fl.JSON)
	}
	return s, nil
}

// decoded remembers the strings decoded from the large fields runs
// loaded, by the identity of their JSON (StateField.JSON is never
// modified): the store gives the next run of a task the same slice for a
// field it holds, and that run gets the string without decoding or
// allocating a megabyte again. An entry holds its JSON, so its address is
// not reused while it is remembered.
var decoded = stringMemo{max: 32 << 20}

type stringMemo struct {
	mu   sync.Mutex
	m    map[*byte]memoString
	size int // bytes of the strings held
	max  int
}

type memoString struct {
	js  []byte
	str string
}

// unquote is unquote(js), remembered.
func (m *stringMemo) unquote(js []byte) (string, bool) {
	if len(js) == 0 {
		return unquote(js)
	}
	m.mu.Lock()
	e, ok := m.m[&js[0]]
	m.mu.Unlock()
	if ok && len(e.js) == len(js) {
		return e.str, true
	}
	str, ok := unquote(js)
	if ok {
		m.put(js, str)
	}
	return str, ok
}

// drop forgets js.
func (m *stringMemo) drop(js []byte) {
	if len(js) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.m[&js[0]]; ok && len(e.js) == len(js) {
		m.size -= len(e.str)
		delete(m.m, &js[0])
	}
}

// release forgets the strings of the task's large fields: it ended, and
// no run will load them again.
func (c *stateCodec[S]) release() {
	if !c.share {
		return
	}
	for _, k := range c.known {
		decoded.drop(k.js)
	}
}

// put remembers that js decodes to str.
func (m *stringMemo) put(js []byte, str string) {
	if len(js) == 0 || len(str) > m.max {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[*byte]memoString{}
	}
	if old, ok := m.m[&js[0]]; ok {
		m.size -= len(old.str)
		delete(m.m, &js[0])
	}
	for k, v := range m.m {
		if m.size+len(str) <= m.max {
			break
		}
		delete(m.m, k)
		m.size -= len(v.str)
	}
	m.m[&js[0]] = memoString{js: js, str: str}
	m.size += len(str)
}

// joinFields adds fields to the JSON object state, after its members.
func joinFields(state []byte, fields []StateField) ([]byte, error) {
	if len(fields) == 0 {
		return state, nil
	}
	ms, ok := jsonobj.Split(state)
	if !ok {
		return nil, fmt.Errorf("state is not an object but has fields kept apart")
	}
	size := len(state) + 1
	for _, f := range fields {
		size += len(f.Key) + len(f.JSON) + 8
		k, err := json.Marshal(f.Key)
		if err != nil {
			return nil, err
		}
		ms = append(ms, jsonobj.Member{Key: k, Val: f.JSON})
	}
	return jsonobj.Join(ms, size), nil
}

// unquote decodes the JSON string q (quotes included) as encoding/json
// does, or reports false for anything it leaves to encoding/json
// (jsonobj.Unquote).
func unquote(q []byte) (string, bool) {
	b, ok := jsonobj.Unquote(q)
	if !ok {
		return "", false
	}
	// b is fresh and never written again.
	return unsafe.String(unsafe.SliceData(b), len(b)), true
}
