package graph

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
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
