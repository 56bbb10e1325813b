package jsonobj

import (
	"reflect"
	"testing"
)

func TestSplitObject(t *testing.T) {
	cases := []struct {
		in   string
		keys []string
		vals []string
		ok   bool
	}{
		{`{}`, nil, nil, true},
		{` { } `, nil, nil, true},
		{`{"a":1}`, []string{`"a"`}, []string{`1`}, true},
		{`{"a": "x\"}y", "b" : [1,{"c":"]"}], "d":{"e":"\\"},"f":null}`,
			[]string{`"a"`, `"b"`, `"d"`, `"f"`}, []string{`"x\"}y"`, `[1,{"c":"]"}]`, `{"e":"\\"}`, `null`}, true},
		{`{"k\"ey":true,"z":-1.5e3}`, []string{`"k\"ey"`, `"z"`}, []string{`true`, `-1.5e3`}, true},
		{`[1,2]`, nil, nil, false},
		{`"s"`, nil, nil, false},
		{`null`, nil, nil, false},
		{`{"a":1`, nil, nil, false},
		{`{"a":"unterminated}`, nil, nil, false},
		{`{"a":{"b":1}`, nil, nil, false},
		{`{"a":1} x`, nil, nil, false},
		{`{"a" 1}`, nil, nil, false},
		{`{a:1}`, nil, nil, false},
	}
	for _, c := range cases {
		ms, ok := Split([]byte(c.in))
		if ok != c.ok {
			t.Errorf("%s: ok = %v, want %v", c.in, ok, c.ok)
			continue
		}
		var keys, vals []string
		for _, m := range ms {
			keys, vals = append(keys, string(m.Key)), append(vals, string(m.Val))
		}
		if !reflect.DeepEqual(keys, c.keys) || !reflect.DeepEqual(vals, c.vals) {
			t.Errorf("%s: %q %q, want %q %q", c.in, keys, vals, c.keys, c.vals)
		}
	}
}

func TestJoinIsSplitsInverse(t *testing.T) {
	for _, in := range []string{`{}`, `{"a":1}`, `{"a":1,"b":{"c":[1,2]},"d\"e":"x"}`} {
		ms, ok := Split([]byte(in))
		if !ok {
			t.Fatalf("split %s", in)
		}
		if got := string(Join(ms, len(in))); got != in {
			t.Errorf("Join(Split(%s)) = %s", in, got)
		}
	}
	ms, _ := Split([]byte(`{"a":1,"b":2,"c":3}`))
	if got := string(Join([]Member{ms[0], ms[2]}, 0)); got != `{"a":1,"c":3}` {
		t.Errorf("Join of a and c = %s", got)
	}
}
