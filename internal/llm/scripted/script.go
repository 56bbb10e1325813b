package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxScriptSize bounds a script file.
const MaxScriptSize = 8 << 20

// Script is a parsed LLM_SCRIPT_FILE: canned replies per role and the time
// calls take. It is immutable once parsed and safe for concurrent use.
//
//	{"roles": {"sdd.reviewer": ["reply 1", "reply 2"]},
//	 "delay": "150ms", "delays": {"feature.plan": "2s"}}
type Script struct {
	roles  map[string][]string
	delay  time.Duration
	delays map[string]time.Duration
}

// ScriptError is a script that cannot be used, with where and why.
type ScriptError struct {
	// Name is the script's name (its path when loaded from a file).
	Name string
	// Line and Col are 1-based; Col is 0 when unknown.
	Line, Col int
	// Reason says what is wrong.
	Reason string
}

func (e *ScriptError) Error() string {
	if e.Col > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", e.Name, e.Line, e.Col, e.Reason)
	}
	return fmt.Sprintf("%s:%d: %s", e.Name, e.Line, e.Reason)
}

// rolePattern is "<workflow>.<role>", lower case, e.g. "sdd.api_data".
var rolePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*\.[a-z][a-z0-9_-]*$`)

// ValidRole reports whether role has the "<workflow>.<role>" form.
func ValidRole(role string) bool { return rolePattern.MatchString(role) }

// LoadScript reads and parses the script file at path. Errors: the file's
// (os.ErrNotExist wrapped, …) or *ScriptError.
func LoadScript(path string) (*Script, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("LLM script: %w", err)
	}
	defer f.Close()
	return ParseScript(f, path)
}

// ParseScript reads a script from r; name appears in errors. Errors:
// *ScriptError giving the line, the column where it helps, and the reason;
// or r's read error.
func ParseScript(r io.Reader, name string) (*Script, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxScriptSize+1))
	if err != nil {
		return nil, fmt.Errorf("LLM script %s: %w", name, err)
	}
	p := &parser{name: name, data: data}
	if len(data) > MaxScriptSize {
		return nil, p.errAt(MaxScriptSize, "the script is larger than %d MiB", MaxScriptSize>>20)
	}
	if bytes.HasPrefix(data, []byte("\uFEFF")) {
		// A byte-order mark some editors write; blank it, keeping offsets.
		p.data = append([]byte("   "), data[3:]...)
	}
	return p.parse()
}

// Roles lists the roles the script gives replies for, sorted.
func (s *Script) Roles() []string { return slices.Sorted(maps.Keys(s.roles)) }

// Replies returns role's replies in order (nil when the script has none).
func (s *Script) Replies(role string) []string { return slices.Clone(s.roles[role]) }

// Reply is the reply to the iteration-th (1-based) node run of role: the
// iteration-th reply, the last one repeating. ok is false when the script
// has no replies for role.
func (s *Script) Reply(role string, iteration int) (text string, ok bool) {
	rs := s.roles[role]
	if len(rs) == 0 {
		return "", false
	}
	return rs[min(max(iteration, 1), len(rs))-1], true
}

// Delay is how long a call of role takes: its entry in "delays", else
// "delay".
func (s *Script) Delay(role string) time.Duration {
	if d, ok := s.delays[role]; ok {
		return d
	}
	return s.delay
}

// MarshalJSON writes the script in the form ParseScript reads.
func (s *Script) MarshalJSON() ([]byte, error) {
	out := struct {
		Roles  map[string][]string `json:"roles"`
		Delay  string              `json:"delay,omitempty"`
		Delays map[string]string   `json:"delays,omitempty"`
	}{Roles: s.roles}
	if out.Roles == nil {
		out.Roles = map[string][]string{}
	}
	if s.delay != 0 {
		out.Delay = s.delay.String()
	}
	if len(s.delays) > 0 {
		out.Delays = make(map[string]string, len(s.delays))
		for r, d := range s.delays {
			out.Delays[r] = d.String()
		}
	}
	return json.Marshal(out)
}

// --- parsing ---

// parser walks the script token by token so that every error can say
// where it is: json.Decoder.InputOffset gives the end of the last token,
// from which the next value's start is found by skipping separators.
type parser struct {
	name string
	data []byte
	dec  *json.Decoder
}

func (p *parser) parse() (*Script, error) {
	if len(bytes.TrimSpace(p.data)) == 0 {
		return nil, p.errLine(1, `the script is empty; want a JSON object such as {"roles": {"feature.plan": ["…"]}}`)
	}
	// Syntax first, over the whole input (trailing data included), so the
	// walk below only meets well-formed JSON.
	var v any
	if err := json.Unmarshal(p.data, &v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, p.errAt(int(se.Offset)-1, "malformed JSON: %s", strings.TrimPrefix(se.Error(), "json: "))
		}
		return nil, p.errLine(1, "malformed JSON: %v", err)
	}
	p.dec = json.NewDecoder(bytes.NewReader(p.data))
	p.dec.UseNumber()
	s := &Script{roles: map[string][]string{}, delays: map[string]time.Duration{}}
	err := p.object("the script", func(key string, at int) error {
		switch key {
		case "roles":
			return p.roles(s)
		case "delay":
			d, err := p.duration(`"delay"`)
			s.delay = d
			return err
		case "delays":
			return p.delays(s)
		default:
			return p.errAt(at, "unknown key %q (want roles, delay or delays)", key)
		}
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// object reads a JSON object, calling field for each key with the key's
// offset; field must consume the value. A key given twice is an error.
func (p *parser) object(what string, field func(key string, at int) error) error {
	at := p.next()
	tok, err := p.dec.Token()
	if err != nil {
		return p.errAt(at, "malformed JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return p.errAt(at, "%s must be a JSON object, got %s", what, describe(tok))
	}
	seen := map[string]int{}
	for p.dec.More() {
		at := p.next()
		tok, err := p.dec.Token()
		if err != nil {
			return p.errAt(at, "malformed JSON: %v", err)
		}
		key, _ := tok.(string)
		if first, dup := seen[key]; dup {
			return p.errAt(at, "%q is given twice in %s (first on line %d)", key, what, p.line(first))
		}
		seen[key] = at
		if err := field(key, at); err != nil {
			return err
		}
	}
	if _, err := p.dec.Token(); err != nil { // '}'
		return p.errAt(p.next(), "malformed JSON: %v", err)
	}
	return nil
}

func (p *parser) roles(s *Script) error {
	return p.object(`"roles"`, func(role string, at int) error {
		if !ValidRole(role) {
			return p.errAt(at, "role %q is not of the form <workflow>.<role> (e.g. \"sdd.reviewer\")", role)
		}
		start := p.next()
		tok, err := p.dec.Token()
		if err != nil {
			return p.errAt(start, "malformed JSON: %v", err)
		}
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return p.errAt(start, "role %q: want a list of replies (strings), got %s", role, describe(tok))
		}
		var replies []string
		for p.dec.More() {
			at := p.next()
			var raw json.RawMessage
			if err := p.dec.Decode(&raw); err != nil {
				return p.errAt(at, "malformed JSON: %v", err)
			}
			var text string
			if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &text) != nil {
				return p.errAt(at, "role %q: reply %d is %s; want a string (JSON-escape documents: \\n, \\\")",
					role, len(replies)+1, describeRaw(raw))
			}
			replies = append(replies, text)
		}
		if _, err := p.dec.Token(); err != nil { // ']'
			return p.errAt(p.next(), "malformed JSON: %v", err)
		}
		if len(replies) == 0 {
			return p.errAt(start, "role %q has no replies; give at least one, or leave the role out for its built-in reply", role)
		}
		s.roles[role] = replies
		return nil
	})
}

func (p *parser) delays(s *Script) error {
	return p.object(`"delays"`, func(role string, at int) error {
		if !ValidRole(role) {
			return p.errAt(at, "delays: role %q is not of the form <workflow>.<role> (e.g. \"feature.plan\")", role)
		}
		d, err := p.duration(fmt.Sprintf("delays of %q", role))
		s.delays[role] = d
		return err
	})
}

// duration reads a Go duration string such as "150ms", zero or more.
func (p *parser) duration(what string) (time.Duration, error) {
	at := p.next()
	var raw json.RawMessage
	if err := p.dec.Decode(&raw); err != nil {
		return 0, p.errAt(at, "malformed JSON: %v", err)
	}
	var text string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &text) != nil {
		return 0, p.errAt(at, "%s is %s; want a duration string such as \"150ms\" or \"2s\"", what, describeRaw(raw))
	}
	d, err := time.ParseDuration(strings.TrimSpace(text))
	if err != nil {
		return 0, p.errAt(at, "%s: %q is not a duration; want e.g. \"150ms\" or \"2s\"", what, text)
	}
	if d < 0 {
		return 0, p.errAt(at, "%s: %q is negative", what, text)
	}
	return d, nil
}

// next is the offset where the next token starts: after the last token,
// past whitespace and the separators the decoder has not consumed yet.
func (p *parser) next() int {
	i := int(p.dec.InputOffset())
	for i < len(p.data) && strings.IndexByte(" \t\r\n,:", p.data[i]) >= 0 {
		i++
	}
	return i
}

// pos turns a byte offset into a 1-based line and column (in characters).
func (p *parser) pos(off int) (line, col int) {
	off = min(max(off, 0), len(p.data))
	before := p.data[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = 1 + utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:])
	return line, col
}

func (p *parser) line(off int) int { l, _ := p.pos(off); return l }

func (p *parser) errAt(off int, format string, args ...any) error {
	line, col := p.pos(off)
	return &ScriptError{Name: p.name, Line: line, Col: col, Reason: fmt.Sprintf(format, args...)}
}

func (p *parser) errLine(line int, format string, args ...any) error {
	return &ScriptError{Name: p.name, Line: line, Reason: fmt.Sprintf(format, args...)}
}

// describe names a token's JSON type for an error.
func describe(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return "a list"
		}
		return "an object"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

func describeRaw(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
