// Package jsonobj finds the top-level members of a JSON object without
// decoding it: the store keeps a state's large fields apart, and the engine
// reuses the encoding of those that did not change.
//
// It imports the standard library only.
package jsonobj

import "bytes"

// Member is one top-level member of a JSON object: its key as written
// (quotes and escapes included) and its value.
type Member struct {
	Key, Val []byte
}

// Join writes members back as one JSON object, in their order; size is a
// hint of the length it will have.
func Join(ms []Member, size int) []byte {
	out := bytes.NewBuffer(make([]byte, 0, size))
	out.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			out.WriteByte(',')
		}
		out.Write(m.Key)
		out.WriteByte(':')
		out.Write(m.Val)
	}
	out.WriteByte('}')
	return out.Bytes()
}

// Split returns the members of the JSON object b, or false when b is not
// an object it can split (callers then treat b whole). It only finds the
// members' bounds and does not validate what lies inside them: b comes
// from encoding/json or from a jsonb column, both valid JSON.
func Split(b []byte) ([]Member, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	var out []Member
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return out, skipSpace(b, i+1) == len(b)
	}
	end := func(i int) ([]Member, bool) {
		if skipSpace(b, i) != len(b) {
			return nil, false
		}
		return out, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		ke, ok := skipString(b, i)
		if !ok {
			return nil, false
		}
		key := b[i:ke]
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		vs := skipSpace(b, i+1)
		ve, ok := skipValue(b, vs)
		if !ok {
			return nil, false
		}
		out = append(out, Member{Key: key, Val: b[vs:ve]})
		i = skipSpace(b, ve)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return end(i + 1)
		default:
			return nil, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string that starts at b[i].
// A quote ends the string unless an odd number of backslashes precedes it.
func skipString(b []byte, i int) (int, bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, false
		}
		j += k
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		j++
		if n%2 == 0 {
			return j, true
		}
	}
}

// skipValue returns the index just past the value that starts at b[i].
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); {
			switch b[j] {
			case '"':
				e, ok := skipString(b, j)
				if !ok {
					return 0, false
				}
				j = e
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
			j++
		}
		return 0, false
	default: // number, true, false, null
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		return j, j > i
	}
}
