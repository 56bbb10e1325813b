// Package jcs writes JSON in the JSON Canonicalization Scheme of RFC 8785:
// object members sorted by the UTF-16 code units of their names, no
// whitespace, strings escaped as ECMAScript's JSON.stringify escapes them,
// numbers as ECMAScript's Number.prototype.toString writes them. Hashes of
// canonical JSON (payload_sha256, SPEC §11) are the same for every reader
// of the same document, whatever order or spacing it was stored in.
//
// It imports the standard library and jsonobj only.
package jcs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gatehousehq/gatehouse/internal/jsonobj"
)

// Canonicalize returns the canonical form of the JSON document data.
// Errors: invalid JSON, invalid UTF-8, duplicate object names, numbers
// outside IEEE 754 double range (RFC 8785 §3.2.2.3 and §3.1).
//
// It scans data itself: encoding/json's Decoder.Token, which it was built
// on, allocated for every token and made the payload hash of a raised
// interrupt about 6% of a decision's Go CPU.
func Canonicalize(data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("jcs: invalid UTF-8")
	}
	s := scanner{data: data}
	out, err := s.value(make([]byte, 0, len(data)), 0)
	if err != nil {
		return nil, err
	}
	if s.space(); s.i != len(data) {
		return nil, errors.New("jcs: data after the JSON value")
	}
	return out, nil
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

// maxDepth bounds nesting, as encoding/json's does.
const maxDepth = 10000

// scanner reads one JSON document (RFC 8259) and writes its canonical form.
type scanner struct {
	data []byte
	i    int
	// members is a stack of the members of the objects being read: an
	// object's are above the mark it took, and gone once it is written.
	members []member
	// scratch holds an object's member values while they are written out
	// in order; objects are written innermost first, one at a time.
	scratch []byte
}

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) errorf(format string, a ...any) error {
	return fmt.Errorf("jcs: offset %d: %s", s.i, fmt.Sprintf(format, a...))
}

// value appends the canonical form of the value at s.i to out.
func (s *scanner) value(out []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, s.errorf("nested too deep")
	}
	s.space()
	if s.i >= len(s.data) {
		return nil, s.errorf("unexpected end of JSON input")
	}
	switch c := s.data[s.i]; {
	case c == '{':
		return s.object(out, depth)
	case c == '[':
		s.i++
		out = append(out, '[')
		if s.space(); s.i < len(s.data) && s.data[s.i] == ']' {
			s.i++
			return append(out, ']'), nil
		}
		for {
			var err error
			if out, err = s.value(out, depth+1); err != nil {
				return nil, err
			}
			s.space()
			if s.i >= len(s.data) {
				return nil, s.errorf("unexpected end of JSON input")
			}
			switch s.data[s.i] {
			case ',':
				s.i++
				out = append(out, ',')
			case ']':
				s.i++
				return append(out, ']'), nil
			default:
				return nil, s.errorf("want , or ] in an array")
			}
		}
	case c == '"':
		str, err := s.str()
		if err != nil {
			return nil, err
		}
		return appendString(out, str), nil
	case c == '-' || '0' <= c && c <= '9':
		return s.number(out)
	default:
		var lit string
		switch c {
		case 't':
			lit = "true"
		case 'f':
			lit = "false"
		case 'n':
			lit = "null"
		}
		if lit == "" || !bytes.HasPrefix(s.data[s.i:], []byte(lit)) {
			return nil, s.errorf("invalid character %q looking for a value", c)
		}
		s.i += len(lit)
		return append(out, lit...), nil
	}
}

// member is an object member read: its name (decoded) and where its
// value's canonical form was written.
type member struct {
	name       []byte
	start, end int
}

// object writes the members' values to out as it reads them, then rewrites
// that stretch of out as the canonical object: members sorted, each name
// with its value.
func (s *scanner) object(out []byte, depth int) ([]byte, error) {
	s.i++ // {
	if s.space(); s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return append(out, '{', '}'), nil
	}
	base, mark := len(out), len(s.members)
	defer func() { s.members = s.members[:mark] }()
	ascii := true
	for {
		if s.space(); s.i >= len(s.data) || s.data[s.i] != '"' {
			return nil, s.errorf("want a member name")
		}
		name, err := s.str()
		if err != nil {
			return nil, err
		}
		if s.space(); s.i >= len(s.data) || s.data[s.i] != ':' {
			return nil, s.errorf("want : after a member name")
		}
		s.i++
		start := len(out)
		if out, err = s.value(out, depth+1); err != nil {
			return nil, err
		}
		s.members = append(s.members, member{name: name, start: start, end: len(out)})
		ascii = ascii && isASCII(name)
		s.space()
		if s.i >= len(s.data) {
			return nil, s.errorf("unexpected end of JSON input")
		}
		if s.data[s.i] == '}' {
			s.i++
			break
		}
		if s.data[s.i] != ',' {
			return nil, s.errorf("want , or } in an object")
		}
		s.i++
	}
	ms := s.members[mark:]
	// RFC 8785 §3.2.3: sorted by UTF-16 code units, compared as unsigned
	// integers (not by code points: they differ above U+FFFF). ASCII names
	// compare the same either way.
	if ascii {
		slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(a.name, b.name) })
	} else {
		slices.SortFunc(ms, func(a, b member) int {
			return slices.Compare(utf16.Encode([]rune(string(a.name))), utf16.Encode([]rune(string(b.name))))
		})
	}
	for i := 1; i < len(ms); i++ {
		if bytes.Equal(ms[i-1].name, ms[i].name) {
			return nil, fmt.Errorf("jcs: duplicate member %q", ms[i].name)
		}
	}
	s.scratch = append(s.scratch[:0], out[base:]...)
	out = append(out[:base], '{')
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, m.name)
		out = append(out, ':')
		out = append(out, s.scratch[m.start-base:m.end-base]...)
	}
	return append(out, '}'), nil
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// str reads the string at s.i (its opening quote) and returns its value,
// decoded as encoding/json decodes it: a lone surrogate escape becomes
// U+FFFD. Without escapes, the value is data's own bytes.
func (s *scanner) str() ([]byte, error) {
	open := s.i
	s.i++ // "
	escaped := false
	for s.i < len(s.data) {
		switch c := s.data[s.i]; {
		case c == '"':
			s.i++
			if !escaped {
				return s.data[open+1 : s.i-1 : s.i-1], nil
			}
			v, ok := jsonobj.Unquote(s.data[open:s.i])
			if !ok {
				return nil, fmt.Errorf("jcs: offset %d: invalid escape in a string", open)
			}
			return v, nil
		case c == '\\':
			escaped = true
			s.i += 2 // an escaped quote does not end the string
			continue
		case c < 0x20:
			return nil, s.errorf("control character in a string")
		}
		s.i++
	}
	return nil, s.errorf("unexpected end of JSON input")
}

// number reads the number at s.i (RFC 8259 §6) and appends its canonical
// form. An integer of at most 15 digits is written as it is: every double
// it names prints as those digits.
func (s *scanner) number(out []byte) ([]byte, error) {
	start := s.i
	digits := func() int {
		n := 0
		for s.i < len(s.data) && '0' <= s.data[s.i] && s.data[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.data[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.data) && s.data[s.i] == '0':
		s.i++
	case digits() == 0:
		return nil, s.errorf("invalid number")
	}
	plain := s.i-start <= 16 && s.i-start-btoi(s.data[start] == '-') <= 15
	if s.i < len(s.data) && s.data[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return nil, s.errorf("invalid number")
		}
		plain = false
	}
	if s.i < len(s.data) && (s.data[s.i] == 'e' || s.data[s.i] == 'E') {
		s.i++
		if s.i < len(s.data) && (s.data[s.i] == '+' || s.data[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return nil, s.errorf("invalid number")
		}
		plain = false
	}
	lit := s.data[start:s.i]
	if plain {
		if string(lit) == "-0" {
			return append(out, '0'), nil
		}
		return append(out, lit...), nil
	}
	n, err := Number(string(lit))
	if err != nil {
		return nil, err
	}
	return append(out, n...), nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// appendString escapes as JSON.stringify does: the two-character escapes
// for \b \t \n \f \r " \, \u00xx (lower-case hex) for the other controls,
// everything else as it is.
func appendString(out []byte, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	out = append(out, '"')
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] >= 0x20 && s[i] != '"' && s[i] != '\\' {
			i++
		}
		out = append(out, s[:i]...)
		if i == len(s) {
			break
		}
		switch c := s[i]; c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		s = s[i+1:]
	}
	return append(out, '"')
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
