package graph

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"
)

type codecState struct {
	Doc     string            `json:"doc"`
	Plan    string            `json:"plan,omitempty"`
	Count   int               `json:"count"`
	Notes   map[string]string `json:"notes,omitempty"`
	Skipped string            `json:"-"`
	Quoted  string            `json:"quoted,string"`
	Bare    string
	hidden  string
}

// pieces of strings that exercise encoding/json's escaping and decoding.
var codecPieces = []string{"plain text ", "<b>&amp;</b>", `"quoted"`, `back\slash`, "new\nline\ttab\r",
	"é ü 日本語 ", "😀", "\u2028\u2029", "\x01\x1f", "\xff\xfe bad utf-8 ", "}{][,:", "\\u0041"}

func randomText(r *rand.Rand, n int) string {
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString(codecPieces[r.IntN(len(codecPieces))])
	}
	return sb.String()
}

// encode gives exactly json.Marshal's bytes, for large and small fields,
// fresh and remembered.
func TestStateCodecEncodeIsJSONMarshal(t *testing.T) {
	c := stateCodec[codecState]{fields: stringFields[codecState]()}
	if len(c.fields) != 3 { // doc, plan, Bare (quoted has ",string")
		t.Fatalf("fields %+v", c.fields)
	}
	r := rand.New(rand.NewPCG(7, 8))
	s := codecState{Count: 1, Notes: map[string]string{"a": "b"}, Skipped: "x", Quoted: "q", hidden: "h"}
	for i := range 60 {
		switch i % 4 {
		case 0:
			s.Doc = randomText(r, bigString+r.IntN(3*bigString))
		case 1:
			s.Plan = randomText(r, r.IntN(2*bigString))
		case 2:
			s.Bare = randomText(r, r.IntN(2*bigString))
		}
		s.Count++
		got, err := c.encode(s)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(s)
		if !bytes.Equal(got, want) {
			t.Fatalf("step %d:\n got %.300s\nwant %.300s", i, got, want)
		}
	}
}

// decode gives exactly json.Unmarshal's value, including for inputs it
// leaves to encoding/json.
func TestStateCodecDecodeIsJSONUnmarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	big := func() string { return randomText(r, bigString+r.IntN(bigString)) }
	bigJS := func() string { b, _ := json.Marshal(big()); return string(b) }
	inputs := []string{
		`{"doc":` + bigJS() + `,"count":3}`,
		`{"count":3, "doc" : ` + bigJS() + ` , "plan":` + bigJS() + `,"Bare":` + bigJS() + `}`,
		// escapes encoding/json writes differently from this: \u escapes,
		// surrogate pairs, lone surrogates, \/
		`{"doc":"` + strings.Repeat(`a\u00e9\ud83d\ude00\ud800x\udc00\/\"\\\b\f\n\r\t\u0041`, 400) + `"}`,
		// left to encoding/json: raw control character, invalid UTF-8, bad escape
		"{\"doc\":\"" + strings.Repeat("a\x01", bigString) + "\"}",
		"{\"doc\":\"" + strings.Repeat("a\xff", bigString) + "\"}",
		`{"doc":"` + strings.Repeat(`a\x`, bigString) + `"}`,
		// a second member for the same field (case-insensitive): last wins
		`{"doc":` + bigJS() + `,"DOC":"small"}`,
		`{"Doc":` + bigJS() + `,"doc":` + bigJS() + `}`,
		// not a string, wrong type, not an object
		`{"doc":` + strings.Repeat(`1`, bigString) + `}`,
		`{"notes":{"doc":` + bigJS() + `}}`,
		`[` + bigJS() + `]`,
	}
	for i, in := range inputs {
		c := stateCodec[codecState]{fields: stringFields[codecState]()}
		got, gerr := c.decode([]byte(in))
		var want codecState
		werr := json.Unmarshal([]byte(in), &want)
		if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("input %d: got %v %.100q, want %v %.100q", i, gerr, got.Doc, werr, want.Doc)
		}
		if gerr != nil {
			continue
		}
		// What was decoded encodes back to the same value (the JSON of a
		// large field it decoded is reused as it was read).
		enc, err := c.encode(got)
		if err != nil {
			t.Fatal(err)
		}
		var back codecState
		if err := json.Unmarshal(enc, &back); err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("input %d: re-encoded %.200s: %v", i, enc, err)
		}
	}
}

type embedded struct{ Doc string }

type withEmbedded struct {
	embedded
	Plan string
}

type custom struct{ Doc string }

func (custom) MarshalJSON() ([]byte, error) { return []byte(`{}`), nil }

type clash struct {
	A string `json:"doc"`
	B string `json:"DOC"`
}

func TestStateCodecLeavesOddTypesToEncodingJSON(t *testing.T) {
	if f := stringFields[withEmbedded](); f != nil {
		t.Errorf("embedded: %+v", f)
	}
	if f := stringFields[custom](); f != nil {
		t.Errorf("custom marshaler: %+v", f)
	}
	if f := stringFields[clash](); f != nil {
		t.Errorf("clashing names: %+v", f)
	}
	if f := stringFields[map[string]any](); f != nil {
		t.Errorf("map: %+v", f)
	}
}

func BenchmarkStateCodecUnchanged1MB(b *testing.B) {
	c := stateCodec[codecState]{fields: stringFields[codecState]()}
	s := codecState{Doc: randomText(rand.New(rand.NewPCG(1, 1)), 1<<20)}
	for b.Loop() {
		s.Count++
		if _, err := c.encode(s); err != nil {
			b.Fatal(err)
		}
	}
}

// encodeApart gives json.Marshal's value with the large string fields
// apart, an unchanged field as the very slice it gave before, and
// decodeApart reads it back; both agree with encoding/json on the whole.
func TestStateCodecApart(t *testing.T) {
	c := stateCodec[codecState]{fields: stringFields[codecState]()}
	r := rand.New(rand.NewPCG(11, 12))
	s := codecState{Count: 1, Notes: map[string]string{"a": "b"}, Quoted: "q", Bare: "small"}
	var lastDoc []byte
	for i := range 40 {
		switch i % 5 {
		case 0:
			s.Doc = randomText(r, bigString+r.IntN(3*bigString))
		case 1:
			s.Plan = randomText(r, r.IntN(2*bigString))
		case 2:
			s.Bare = randomText(r, r.IntN(2*bigString))
		}
		s.Count++
		state, fields, err := c.encodeApart(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fields {
			if len(f.JSON) < bigString || bytes.Contains(state, []byte(`"`+f.Key+`":`)) {
				t.Fatalf("step %d: field %s of %d bytes, state %.200s", i, f.Key, len(f.JSON), state)
			}
			if f.Key == "doc" {
				if i%5 != 0 && &f.JSON[0] != &lastDoc[0] {
					t.Errorf("step %d: the unchanged document was encoded again", i)
				}
				lastDoc = f.JSON
			}
		}
		whole, err := joinFields(state, fields)
		if err != nil {
			t.Fatal(err)
		}
		var got, want codecState
		if err := json.Unmarshal(whole, &got); err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(s)
		if err := json.Unmarshal(js, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: joined state differs:\n got %+.300v\nwant %+.300v", i, got, want)
		}
		d := stateCodec[codecState]{fields: c.fields}
		back, err := d.decodeApart(state, fields)
		if err != nil || !reflect.DeepEqual(back, want) {
			t.Fatalf("step %d: decoded apart: %v", i, err)
		}
		again, fields2, err := d.encodeApart(back)
		if err != nil {
			t.Fatal(err)
		}
		// (a small string with invalid UTF-8 may grow past bigString on
		// the way back: encoding/json replaces each bad byte by U+FFFD)
		for _, f := range fields {
			j := slices.IndexFunc(fields2, func(g StateField) bool { return g.Key == f.Key })
			if j < 0 || &fields2[j].JSON[0] != &f.JSON[0] {
				t.Errorf("step %d: decoded field %s encoded again", i, f.Key)
			}
		}
		var again2 codecState
		if whole, err := joinFields(again, fields2); err != nil || json.Unmarshal(whole, &again2) != nil || !reflect.DeepEqual(again2, want) {
			t.Fatalf("step %d: a decoded state encodes to another value", i)
		}
	}
}

// decodeApart leaves to encoding/json, on the whole state, the fields it
// does not take as they are: other types, odd strings, unknown names.
func TestStateCodecApartFallsBack(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	bigJS := func() json.RawMessage { b, _ := json.Marshal(randomText(r, bigString+r.IntN(bigString))); return b }
	cases := []struct {
		state  string
		fields []StateField
	}{
		{`{"count":2}`, []StateField{{Key: "doc", JSON: bigJS()}, {Key: "plan", JSON: bigJS()}}},
		{`{"count":2}`, []StateField{{Key: "notes", JSON: json.RawMessage(`{"k":` + string(bigJS()) + `}`)}}},
		{`{"count":2}`, []StateField{{Key: "other", JSON: bigJS()}}},
		{`{"count":2}`, []StateField{{Key: "DOC", JSON: bigJS()}}},
		{`{"count":2}`, []StateField{{Key: "doc", JSON: json.RawMessage("\"" + strings.Repeat("a\x01", bigString) + "\"")}}},
		{`{"count":2}`, []StateField{{Key: "doc", JSON: json.RawMessage(`"short"`)}}},
		{`{"doc":"inline","count":2}`, []StateField{{Key: "doc", JSON: bigJS()}}},
		{`{}`, []StateField{{Key: "doc", JSON: bigJS()}, {Key: "doc", JSON: bigJS()}}},
		{`{"count":"x"}`, []StateField{{Key: "doc", JSON: bigJS()}}},
		{`[1]`, []StateField{{Key: "doc", JSON: bigJS()}}},
	}
	for i, tc := range cases {
		c := stateCodec[codecState]{fields: stringFields[codecState]()}
		got, gerr := c.decodeApart([]byte(tc.state), tc.fields)
		var want codecState
		whole, werr := joinFields([]byte(tc.state), tc.fields)
		if werr == nil {
			werr = json.Unmarshal(whole, &want)
		}
		if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("case %d: got %v %.60q, want %v %.60q", i, gerr, got.Doc, werr, want.Doc)
		}
	}
}

func BenchmarkStateCodecApartUnchanged1MB(b *testing.B) {
	c := stateCodec[codecState]{fields: stringFields[codecState]()}
	s := codecState{Doc: randomText(rand.New(rand.NewPCG(1, 1)), 1<<20)}
	for b.Loop() {
		s.Count++
		if _, _, err := c.encodeApart(s); err != nil {
			b.Fatal(err)
		}
	}
}

// unquote agrees with encoding/json on every string it takes, and leaves
// to it those it does not, for JSON both as encoding/json writes it and
// with the escapes others write.
func TestUnquoteIsJSONUnmarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	escapes := []string{`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u0041`, `\u00e9`, `\ud83d\ude00`, `\ud800`, `\udc00x`,
		`\ud800\u0041`, `\uD83D\uDE00`, `\u12`, `\x`, "\x01", `"`, "\xff", "é", "\xe6\x97", "😀", `\`}
	for i := range 3000 {
		var sb strings.Builder
		sb.WriteByte('"')
		for range r.IntN(40) {
			if r.IntN(3) == 0 {
				sb.WriteString(escapes[r.IntN(len(escapes))])
			} else {
				sb.WriteString(strings.Repeat("abcdefgh ij"[r.IntN(11):], 1+r.IntN(3)))
			}
		}
		if i%2 == 0 {
			js, _ := json.Marshal(randomText(r, r.IntN(64)))
			sb.Write(js[1 : len(js)-1])
		}
		sb.WriteByte('"')
		q := sb.String()
		got, ok := unquote([]byte(q))
		var want string
		err := json.Unmarshal([]byte(q), &want)
		if ok && (err != nil || got != want) {
			t.Fatalf("%q: got %q, encoding/json %q %v", q, got, want, err)
		}
		if !ok && err == nil && utf8.ValidString(q) && !strings.ContainsFunc(q, func(r rune) bool { return r < 0x20 }) {
			t.Errorf("%q: left to encoding/json", q)
		}
	}
}

// BenchmarkUnquote1MB decodes a 1 MB document with a line break every
// ~70 bytes, as a run does once for a large field it loads.
func BenchmarkUnquote1MB(b *testing.B) {
	var sb strings.Builder
	for sb.Len() < 1<<20 {
		sb.WriteString("the gate holds each task until a reviewer approves the plan é.\n")
	}
	js, _ := json.Marshal(sb.String())
	b.SetBytes(int64(len(js)))
	for b.Loop() {
		if _, ok := unquote(js); !ok {
			b.Fatal("not taken")
		}
	}
}

// The memo gives the string decoded before for the same JSON slice, and
// decodes another slice afresh; it keeps within its bound.
func TestStringMemo(t *testing.T) {
	m := stringMemo{max: 3 * bigString}
	js := []byte(`"` + strings.Repeat(`ab\n`, bigString/3) + `"`)
	s1, ok1 := m.unquote(js)
	s2, ok2 := m.unquote(js)
	if !ok1 || !ok2 || s1 != s2 || unsafe.StringData(s1) != unsafe.StringData(s2) {
		t.Fatal("the same slice decoded twice")
	}
	other := bytes.Clone(js)
	if s3, ok := m.unquote(other); !ok || s3 != s1 || unsafe.StringData(s3) == unsafe.StringData(s1) {
		t.Error("another slice did not decode afresh")
	}
	longer := append(bytes.Clone(js), `x"`...)
	if _, ok := m.unquote(longer[:len(js)]); !ok {
		t.Fatal("not decoded")
	}
	if s4, ok := m.unquote(longer); ok {
		t.Errorf("a longer slice at the same address: %.20q", s4)
	}
	for range 10 {
		if _, ok := m.unquote(bytes.Clone(js)); !ok {
			t.Fatal("not decoded")
		}
	}
	if m.size > m.max || len(m.m) > 3 {
		t.Errorf("%d bytes in %d entries, bound %d", m.size, len(m.m), m.max)
	}
	if _, ok := m.unquote([]byte(`"x\u00"`)); ok {
		t.Error("bad escape taken")
	}
	m.unquote(js)
	n := len(m.m)
	m.drop(longer)
	m.drop(bytes.Clone(js))
	if len(m.m) != n {
		t.Errorf("dropping what is not held: %d entries, were %d", len(m.m), n)
	}
	m.drop(js)
	if _, ok := m.m[&js[0]]; ok || len(m.m) != n-1 {
		t.Errorf("dropped but held")
	}
	size := 0
	for _, e := range m.m {
		size += len(e.str)
	}
	if size != m.size {
		t.Errorf("size %d, held %d", m.size, size)
	}
}

// A codec that shares its fields' JSON remembers what each decodes to:
// the string itself when it is valid UTF-8; never a string with bytes
// encoding/json would replace.
func TestStateCodecSharesDecodedStrings(t *testing.T) {
	c := stateCodec[codecState]{fields: stringFields[codecState](), share: true}
	valid := codecState{Doc: strings.Repeat("é\n<&>\u2028", bigString)}
	invalid := codecState{Doc: strings.Repeat("a\xff", bigString)}
	for _, s := range []codecState{valid, invalid} {
		state, fields, err := c.encodeApart(s)
		if err != nil || len(fields) != 1 {
			t.Fatalf("%d fields: %v", len(fields), err)
		}
		d := stateCodec[codecState]{fields: c.fields}
		got, err := d.decodeApart(state, fields)
		if err != nil {
			t.Fatal(err)
		}
		var want codecState
		whole, _ := joinFields(state, fields)
		if err := json.Unmarshal(whole, &want); err != nil || got.Doc != want.Doc {
			t.Errorf("decoded %.20q, encoding/json %.20q", got.Doc, want.Doc)
		}
		if shared := unsafe.StringData(got.Doc) == unsafe.StringData(s.Doc); shared != (s.Doc == valid.Doc) {
			t.Errorf("valid UTF-8 %v: the string decoded is the one encoded: %v", s.Doc == valid.Doc, shared)
		}
	}
}
