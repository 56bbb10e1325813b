// Package jcs writes JSON in the JSON Canonicalization Scheme of RFC 8785:
// object members sorted by the UTF-16 code units of their names, no
// whitespace, strings escaped as ECMAScript's JSON.stringify escapes them,
// numbers as ECMAScript's Number.prototype.toString writes them. Hashes of
// canonical JSON (payload_sha256, SPEC §11) are the same for every reader
// of the same document, whatever order or spacing it was stored in.
package jcs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Canonicalize returns the canonical form of the JSON document data.
// Errors: invalid JSON, invalid UTF-8, duplicate object names, numbers
// outside IEEE 754 double range (RFC 8785 §3.2.2.3 and §3.1).
func Canonicalize(data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("jcs: invalid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var buf bytes.Buffer
	if err := value(dec, &buf); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("jcs: data after the JSON value")
	}
	return buf.Bytes(), nil
}

// SHA256Hex is the lowercase hex SHA-256 of data's canonical form.
func SHA256Hex(data []byte) (string, error) {
	c, err := Canonicalize(data)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// value reads one JSON value from dec and writes its canonical form.
func value(dec *json.Decoder, w *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("jcs: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return object(dec, w)
		case '[':
			w.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					w.WriteByte(',')
				}
				if err := value(dec, w); err != nil {
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
		writeString(w, t)
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

type member struct {
	name  string
	key   []uint16
	value []byte
}

func object(dec *json.Decoder, w *bytes.Buffer) error {
	var ms []member
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
		if err := value(dec, &v); err != nil {
			return err
		}
		ms = append(ms, member{name: name, key: utf16.Encode([]rune(name)), value: v.Bytes()})
	}
	if _, err := dec.Token(); err != nil { // }
		return fmt.Errorf("jcs: %w", err)
	}
	// RFC 8785 §3.2.3: sorted by UTF-16 code units, compared as unsigned
	// integers (not by code points: they differ above U+FFFF).
	slices.SortFunc(ms, func(a, b member) int { return slices.Compare(a.key, b.key) })
	w.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			w.WriteByte(',')
		}
		writeString(w, m.name)
		w.WriteByte(':')
		w.Write(m.value)
	}
	w.WriteByte('}')
	return nil
}

// writeString escapes as JSON.stringify does: the two-character escapes
// for \b \t \n \f \r " \, \u00xx (lower-case hex) for the other controls,
// everything else as it is.
func writeString(w *bytes.Buffer, s string) {
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

// Number writes a JSON number as ECMAScript's Number.prototype.toString
// writes the double nearest to it (RFC 8785 §3.2.2.3).
func Number(lit string) (string, error) {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", fmt.Errorf("jcs: number %s is not an IEEE 754 double", lit)
	}
	return FormatFloat(f), nil
}

// FormatFloat is ECMAScript's Number.prototype.toString for a finite f.
func FormatFloat(f float64) string {
	if f == 0 {
		return "0" // also -0
	}
	neg := f < 0
	if neg {
		f = -f
	}
	// The shortest digits that round-trip, and the exponent: d.ddddde±x.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	k := len(digits)
	n := x + 1 // the decimal point sits after n digits
	var out string
	switch {
	case k <= n && n <= 21:
		out = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		out = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		out = "0." + strings.Repeat("0", -n) + digits
	default:
		sign := "+"
		if n-1 < 0 {
			sign = "-"
		}
		ex := n - 1
		if ex < 0 {
			ex = -ex
		}
		if k == 1 {
			out = digits + "e" + sign + strconv.Itoa(ex)
		} else {
			out = digits[:1] + "." + digits[1:] + "e" + sign + strconv.Itoa(ex)
		}
	}
	if neg {
		return "-" + out
	}
	return out
}
