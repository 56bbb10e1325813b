package pgtext

import (
	"net/url"
	"testing"
)

func TestJSON(t *testing.T) {
	for _, c := range []struct{ body, field, problem string }{
		{`{"a":"fine","b":[1,"ok",{"c":null}]}`, "", ""},
		{`{"title":"a\u0000b"}`, "title", NUL},
		{"{\"title\":\"a\xffb\"}", "title", InvalidUTF8},
		{`{"input":{"tags":["x","\u0000"]}}`, "input.tags[1]", NUL},
		{`{"input":{"list":[{"a":1},{"b":"\u0000"}]}}`, "input.list[1].b", NUL},
		{`{"a":{"k\u0000":1}}`, "a", "has a key that " + NUL},
		{`{"k\u0000":1}`, "", "has a key that " + NUL},
		{`"\u0000"`, "", NUL},
		{`{"a":"\\u0000"}`, "", ""}, // an escaped backslash, then text: no NUL
		{`{"a":"\u0000`, "", ""},    // not JSON: the decoder says so
	} {
		field, problem := JSON([]byte(c.body))
		if field != c.field || problem != c.problem {
			t.Errorf("JSON(%q) = %q, %q; want %q, %q", c.body, field, problem, c.field, c.problem)
		}
	}
}

func TestValues(t *testing.T) {
	for _, c := range []struct {
		v             url.Values
		name, problem string
	}{
		{url.Values{"q": {"fine"}}, "", ""},
		{url.Values{"b": {"x\x00"}, "a": {"\xff"}}, "a", InvalidUTF8},
		{url.Values{"q": {"ok", "x\x00y"}}, "q", NUL},
		{url.Values{"\x00": {"1"}}, "", "has a name that " + NUL},
	} {
		name, problem := Values(c.v)
		if name != c.name || problem != c.problem {
			t.Errorf("Values(%v) = %q, %q; want %q, %q", c.v, name, problem, c.name, c.problem)
		}
	}
}

func TestShown(t *testing.T) {
	for in, want := range map[string]string{"fine": "fine", "a\x00b": "a\uFFFDb", "a\xff\xfeb": "a\uFFFDb", "\x00\xff": "\uFFFD\uFFFD"} {
		if got := Shown(in); got != want {
			t.Errorf("Shown(%q) = %q, want %q", in, got, want)
		}
	}
}
