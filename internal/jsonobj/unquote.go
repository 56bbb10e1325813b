package jsonobj

import (
	"encoding/binary"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Unquote decodes the JSON string q (quotes included) as encoding/json
// does (a lone surrogate escape becomes U+FFFD), into a new slice, or
// reports false for anything encoding/json would refuse or change (invalid
// UTF-8, control characters, bad escapes). It passes over plain bytes
// eight at a time: the engine decodes large state fields with it, and jcs
// the strings with escapes it canonicalizes.
func Unquote(q []byte) ([]byte, bool) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return nil, false
	}
	body := q[1 : len(q)-1]
	buf := make([]byte, 0, len(body))
	start, i := 0, 0 // body[start:i] is plain and not yet copied
	for {
		for i+8 <= len(body) && !special(binary.LittleEndian.Uint64(body[i:])) {
			i += 8
		}
		for i < len(body) && body[i] >= 0x20 && body[i] != '"' && body[i] != '\\' {
			i++
			if i%8 == 0 {
				break
			}
		}
		if i >= len(body) {
			break
		}
		if c := body[i]; c < 0x20 || c == '"' {
			return nil, false
		} else if c != '\\' {
			continue
		}
		buf = append(buf, body[start:i]...)
		rest := body[i:]
		if len(rest) < 2 {
			return nil, false
		}
		n := 2
		switch c := rest[1]; c {
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
			r, ok := hex4(rest[2:])
			if !ok {
				return nil, false
			}
			n = 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if len(rest) >= 12 && rest[6] == '\\' && rest[7] == 'u' {
					r2, ok = hex4(rest[8:])
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != unicode.ReplacementChar {
					r, n = dec, 12
				} else {
					r = unicode.ReplacementChar
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return nil, false
		}
		i += n
		start = i
	}
	buf = append(buf, body[start:]...)
	// Escapes append whole runes, so buf is valid UTF-8 exactly when the
	// bytes copied as they were are.
	if !utf8.Valid(buf) {
		return nil, false
	}
	return buf, true
}

// special reports whether one of the eight bytes of w is a control
// character, a quote or a backslash (maybe also for a plain byte next to
// one: callers then look at each byte).
func special(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, bs := w^'"'*ones, w^'\\'*ones
	return ((w-0x20*ones)&^w|(q-ones)&^q|(bs-ones)&^bs)&highs != 0
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
