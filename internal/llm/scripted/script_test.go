package scripted

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseScript(t *testing.T) {
	t.Parallel()
	src := `{
  "roles": {
    "sdd.reviewer": ["{\"needs_revision\": true}", "{\"needs_revision\": false}"],
    "slogan.reviewer": ["SHIP IT!"]
  },
  "delay": "150ms",
  "delays": {"feature.plan": "2s", "sdd.api_data": "0s"}
}`
	s, err := ParseScript(strings.NewReader(src), "script.json")
	if err != nil {
		t.Fatalf("ParseScript: %v", err)
	}
	if got, want := s.Roles(), []string{"sdd.reviewer", "slogan.reviewer"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Roles = %q, want %q", got, want)
	}
	if got := s.Replies("sdd.reviewer"); !reflect.DeepEqual(got, []string{`{"needs_revision": true}`, `{"needs_revision": false}`}) {
		t.Errorf("Replies = %q", got)
	}
	for role, want := range map[string]time.Duration{
		"feature.plan": 2 * time.Second, "sdd.api_data": 0, "sdd.reviewer": 150 * time.Millisecond,
	} {
		if got := s.Delay(role); got != want {
			t.Errorf("Delay(%s) = %s, want %s", role, got, want)
		}
	}
}

func TestParseScriptAccepts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, src string }{
		{"EmptyObject", `{}`},
		{"DelayOnly", `{"delay": "1s"}`},
		{"EmptyReplyString", `{"roles": {"feature.plan": [""]}}`},
		{"UnderscoreAndDigits", `{"roles": {"sdd.api_data": ["x"], "pm2.worker-1": ["y"]}}`},
		{"ByteOrderMark", "\uFEFF{\"roles\": {\"feature.plan\": [\"x\"]}}"},
		{"TrailingNewline", "{}\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := ParseScript(strings.NewReader(tc.src), "s.json"); err != nil {
				t.Errorf("ParseScript: %v", err)
			}
		})
	}
}

func TestParseScriptErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		src       string
		line, col int // col 0: not checked
		reason    string
	}{
		{"Empty", "  \n", 1, 0, "the script is empty"},
		{"MalformedMissingComma", "{\n  \"roles\": {\n    \"feature.plan\": [\"a\" \"b\"]\n  }\n}", 3, 26, "malformed JSON: invalid character '\"' after array element"},
		{"MalformedTrailingComma", "{\"roles\": {\n\"feature.plan\": [\"a\",]}}", 2, 22, "malformed JSON: invalid character ']'"},
		{"MalformedTruncated", "{\"roles\": {\n  \"feature.plan\": [\"a\"", 2, 0, "malformed JSON: unexpected end of JSON input"},
		{"MalformedTrailingData", "{}\n{}", 2, 1, "malformed JSON: invalid character '{' after top-level value"},
		{"MalformedSingleQuotes", "{'roles': {}}", 1, 2, "malformed JSON: invalid character '\\''"},
		{"NotAnObject", "[\"feature.plan\"]", 1, 1, "the script must be a JSON object, got a list"},
		{"UnknownKey", "{\n  \"roles\": {},\n  \"dealy\": \"1s\"\n}", 3, 3, `unknown key "dealy" (want roles, delay or delays)`},
		{"UnknownKeyAfterNested", "{\"roles\": {\"a.b\": [\"{\\\"roles\\\": 1}\"]},\n\n \"replies\": {}}", 3, 2, `unknown key "replies"`},
		{"DuplicateKey", "{\"delay\": \"1s\",\n\"delay\": \"2s\"}", 2, 1, `"delay" is given twice in the script (first on line 1)`},
		{"RolesNotObject", "{\"roles\": [\"x\"]}", 1, 11, `"roles" must be a JSON object, got a list`},
		{"RolesNull", "{\"roles\": null}", 1, 11, `"roles" must be a JSON object, got null`},
		{"RoleWithoutWorkflow", "{\"roles\": {\n  \"reviewer\": [\"x\"]}}", 2, 3, `role "reviewer" is not of the form <workflow>.<role>`},
		{"RoleTooManyParts", "{\"roles\": {\"sdd.reviewer.x\": [\"x\"]}}", 1, 12, `role "sdd.reviewer.x" is not of the form`},
		{"RoleUpperCase", "{\"roles\": {\"SDD.Reviewer\": [\"x\"]}}", 1, 12, `role "SDD.Reviewer" is not of the form`},
		{"RoleEmpty", "{\"roles\": {\"\": [\"x\"]}}", 1, 12, `role "" is not of the form`},
		{"RoleDuplicate", "{\"roles\": {\n\"a.b\": [\"x\"],\n\"a.b\": [\"y\"]}}", 3, 1, `"a.b" is given twice in "roles" (first on line 2)`},
		{"EmptyReplyList", "{\"roles\": {\n  \"sdd.reviewer\": []\n}}", 2, 19, `role "sdd.reviewer" has no replies`},
		{"RepliesNotList", "{\"roles\": {\"sdd.reviewer\": \"SHIP IT\"}}", 1, 28, `role "sdd.reviewer": want a list of replies (strings), got a string`},
		{"ReplyNumber", "{\"roles\": {\"sdd.reviewer\": [\"ok\",\n   42]}}", 2, 4, `role "sdd.reviewer": reply 2 is a number; want a string`},
		{"ReplyObject", "{\"roles\": {\"sdd.reviewer\": [{\"needs_revision\": false}]}}", 1, 29, `reply 1 is an object; want a string`},
		{"ReplyNull", "{\"roles\": {\"sdd.reviewer\": [null]}}", 1, 29, `reply 1 is null; want a string`},
		{"BadDelay", "{\n\"delay\": \"soon\"}", 2, 10, `"delay": "soon" is not a duration`},
		{"DelayNumber", "{\"delay\": 150}", 1, 11, `"delay" is a number; want a duration string`},
		{"NegativeDelay", "{\"delay\": \"-1s\"}", 1, 11, `"delay": "-1s" is negative`},
		{"BadDelays", "{\"delays\": {\n \"feature.plan\": \"2 seconds\"}}", 2, 18, `delays of "feature.plan": "2 seconds" is not a duration`},
		{"DelaysBadRole", "{\"delays\": {\"plan\": \"2s\"}}", 1, 13, `delays: role "plan" is not of the form`},
		{"DelaysNotObject", "{\"delays\": \"2s\"}", 1, 12, `"delays" must be a JSON object, got a string`},
		{"ColumnInCharacters", "{\"roles\": {\"a.b\": [\"é\", 1]}}", 1, 25, "reply 2 is a number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseScript(strings.NewReader(tc.src), "s.json")
			var se *ScriptError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v (%T), want *ScriptError", err, err)
			}
			if se.Line != tc.line || (tc.col != 0 && se.Col != tc.col) {
				t.Errorf("at %d:%d, want %d:%d (%v)", se.Line, se.Col, tc.line, tc.col, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "s.json:"+itoa(tc.line)+":") {
				t.Errorf("error %q does not start with the name and line %d", msg, tc.line)
			}
			if !strings.Contains(msg, tc.reason) {
				t.Errorf("error %q lacks %q", msg, tc.reason)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestParseScriptTooLarge(t *testing.T) {
	t.Parallel()
	big := `{"roles": {"a.b": ["` + strings.Repeat("x", MaxScriptSize) + `"]}}`
	_, err := ParseScript(strings.NewReader(big), "big.json")
	if err == nil || !strings.Contains(err.Error(), "larger than 8 MiB") {
		t.Errorf("err = %v", err)
	}
}

func TestLoadScript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"roles": {"slogan.reviewer": ["Too vague.", "SHIP IT!"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadScript(good)
	if err != nil {
		t.Fatalf("LoadScript: %v", err)
	}
	if got, _ := s.Reply("slogan.reviewer", 2); got != "SHIP IT!" {
		t.Errorf("reply 2 = %q", got)
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{\n\"roles\": 1}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadScript(bad); err == nil || !strings.HasPrefix(err.Error(), bad+":2:10: ") {
		t.Errorf("err = %v, want it to start with the path and position", err)
	}

	_, err = LoadScript(filepath.Join(dir, "missing.json"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("err = %v, want not-exist naming the file", err)
	}
}

func TestScriptRoundTrip(t *testing.T) {
	t.Parallel()
	src := `{"roles": {"a.b": ["x\n\"y\"", "<z>"]}, "delay": "1m30s", "delays": {"c.d": "0s", "e.f": "1.5ms"}}`
	s := mustParse(t, src)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	again := mustParse(t, string(b))
	if !sameScript(s, again) {
		t.Errorf("round trip changed the script:\n%+v\n%+v\n(%s)", s, again, b)
	}
}

func mustParse(t *testing.T, src string) *Script {
	t.Helper()
	s, err := ParseScript(strings.NewReader(src), "s.json")
	if err != nil {
		t.Fatalf("ParseScript(%q): %v", src, err)
	}
	return s
}

func sameScript(a, b *Script) bool {
	return reflect.DeepEqual(a.roles, b.roles) && a.delay == b.delay && reflect.DeepEqual(a.delays, b.delays)
}

func FuzzParseScript(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"roles": {"sdd.reviewer": ["{\"needs_revision\": true}", "{\"needs_revision\": false}"], "slogan.reviewer": ["Too vague.", "SHIP IT!"]}}`,
		`{"roles": {"feature.plan": ["phases: []"]}, "delay": "150ms", "delays": {"feature.plan": "2s"}}`,
		`{"roles": {"a.b": []}}`,
		`{"roles": {"a.b": [1]}}`,
		`{"delay": "-1s"}`,
		`{"dealy": "1s"}`,
		"{\n\"roles\": {\"a.b\": [\"x\" \"y\"]}}",
		`[]`,
		``,
		"\uFEFF{}",
		`{"roles": {"a.b": ["é\u0000"]}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src string) {
		s, err := ParseScript(strings.NewReader(src), "fuzz.json")
		if err != nil {
			var se *ScriptError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v (%T), want *ScriptError", err, err)
			}
			if lines := strings.Count(src, "\n") + 1; se.Line < 1 || se.Line > lines || se.Col < 0 || se.Reason == "" {
				t.Fatalf("error %q: position %d:%d outside the input's %d lines", err, se.Line, se.Col, lines)
			}
			return
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := ParseScript(strings.NewReader(string(b)), "again.json")
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		if !sameScript(s, again) {
			t.Fatalf("round trip changed the script: %s", b)
		}
	})
}
