package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// FuzzCanonicalize compares Canonicalize with the reference: what the
// scanner accepts the reference accepts, with the same bytes, and every
// document the reference accepts that is valid JSON the scanner accepts.
// (The reference also took a document followed by an invalid character,
// its last Token's error read as the end: the scanner refuses those.)
func FuzzCanonicalize(f *testing.F) {
	for _, seed := range []string{
		`{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}`,
		`{"\u20ac": 1, "\r": 2, "\ufb33": 3, "1": 4, "\ud83d\ude00": 5, "\u0080": 6, "\u00f6": 7, "\ud800": 8, "\udc00x": 9}`,
		`{"b":[],"a":{}}`, `"<&>\u2028"`, `-0`, `-0.0`, `123456789012345`, `1234567890123456`, `-123456789012345`,
		`9007199254740993`, `1e400`, `{"a":1,"a":2}`, `{"a":}`, `[1] 2`, `[1,]`, `{"a":1,}`, `01`, `1.`, `.5`, `+1`,
		`tru`, `nulll`, ` [ 1 , { "x" : "y" } ] `, `"\u00e9\uD834\uDD1E"`, "\"tab\there\"", `{"":0,"\u0000":1}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Canonicalize(data)
		want, rerr := referenceCanonicalize(data)
		if err == nil {
			if rerr != nil {
				t.Fatalf("Canonicalize(%q) = %s; the reference refuses it: %v", data, got, rerr)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Canonicalize(%q)\n got %s\nwant %s", data, got, want)
			}
			return
		}
		if rerr == nil && json.Valid(data) {
			t.Fatalf("Canonicalize(%q): %v; the reference gives %s", data, err, want)
		}
	})
}

// A long and nested document, as an interrupt's payload with its
// artifact: the scanner's output is the reference's.
func TestCanonicalizeMatchesReference(t *testing.T) {
	t.Parallel()
	doc := map[string]any{"title": "Approve the plan", "question": "Go ahead?\n\"quoted\" \u2028 é 😀",
		"actions": []string{"approve", "reject", "edit"}, "n": []any{1, -0.5, 1e21, 1e-7, 12345678901234567},
		"artifact": map[string]any{"name": "plan.md", "content_type": "text/markdown",
			"content": strings.Repeat("# Step\n- do the thing <&>\t\n", 500)}}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Canonicalize(data)
	if err != nil {
		t.Fatal(err)
	}
	want, err := referenceCanonicalize(data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func BenchmarkCanonicalize(b *testing.B) {
	data, _ := json.Marshal(map[string]any{"title": "Approve the plan", "kind": "plan", "actions": []string{"approve", "reject", "edit"},
		"artifact": map[string]any{"name": "plan.md", "content_type": "text/markdown", "content": strings.Repeat("# Step\n- do it\n", 100)}})
	for _, c := range []struct {
		name string
		f    func([]byte) ([]byte, error)
	}{{"scanner", Canonicalize}, {"reference", referenceCanonicalize}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.f(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// referenceCanonicalize is the first Canonicalize, built on
// encoding/json's Decoder.Token: the fuzz test compares the scanner with it.
func referenceCanonicalize(data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("jcs: invalid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var buf bytes.Buffer
	if err := refValue(dec, &buf); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("jcs: data after the JSON value")
	}
	return buf.Bytes(), nil
}

// value reads one JSON value from dec and writes its canonical form.
func refValue(dec *json.Decoder, w *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("jcs: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return refObject(dec, w)
		case '[':
			w.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					w.WriteByte(',')
				}
				if err := refValue(dec, w); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil { // ]
				return fmt.Errorf("jcs: %w", err)
			}
			w.WriteByte(']')
			return nil
		}
		return fmt.Errorf("jcs: unexpected %v", t)
	case string:
		refWriteString(w, t)
	case json.Number:
		s, err := Number(string(t))
		if err != nil {
			return err
		}
		w.WriteString(s)
	case bool:
		w.WriteString(strconv.FormatBool(t))
	case nil:
		w.WriteString("null")
	}
	return nil
}

type refMember struct {
	name  string
	key   []uint16
	value []byte
}

func refObject(dec *json.Decoder, w *bytes.Buffer) error {
	var ms []refMember
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("jcs: %w", err)
		}
		name, _ := tok.(string)
		if seen[name] {
			return fmt.Errorf("jcs: duplicate member %q", name)
		}
		seen[name] = true
		var v bytes.Buffer
		if err := refValue(dec, &v); err != nil {
			return err
		}
		ms = append(ms, refMember{name: name, key: utf16.Encode([]rune(name)), value: v.Bytes()})
	}
	if _, err := dec.Token(); err != nil { // }
		return fmt.Errorf("jcs: %w", err)
	}
	// RFC 8785 §3.2.3: sorted by UTF-16 code units, compared as unsigned
	// integers (not by code points: they differ above U+FFFF).
	slices.SortFunc(ms, func(a, b refMember) int { return slices.Compare(a.key, b.key) })
	w.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			w.WriteByte(',')
		}
		refWriteString(w, m.name)
		w.WriteByte(':')
		w.Write(m.value)
	}
	w.WriteByte('}')
	return nil
}

// refWriteString escapes as JSON.stringify does: the two-character escapes
// for \b \t \n \f \r " \, \u00xx (lower-case hex) for the other controls,
// everything else as it is.
func refWriteString(w *bytes.Buffer, s string) {
	const hexDigits = "0123456789abcdef"
	w.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			w.WriteString(`\"`)
		case '\\':
			w.WriteString(`\\`)
		case '\b':
			w.WriteString(`\b`)
		case '\f':
			w.WriteString(`\f`)
		case '\n':
			w.WriteString(`\n`)
		case '\r':
			w.WriteString(`\r`)
		case '\t':
			w.WriteString(`\t`)
		default:
			if r < 0x20 {
				w.WriteString(`\u00`)
				w.WriteByte(hexDigits[r>>4])
				w.WriteByte(hexDigits[r&0xf])
			} else {
				w.WriteRune(r)
			}
		}
	}
	w.WriteByte('"')
}
