package requests

import (
	"strings"
	"testing"
)

// TestJSONProblemSaysWhere: the line and column of a payload's JSON error
// are those of the character at fault (the browser's check says the same).
func TestJSONProblemSaysWhere(t *testing.T) {
	cases := []struct{ in, want string }{
		{"{\n  \"tool\": \"shell\",\n  \"args\": }", "line 3, column 11"},
		{`{"a": tru}`, "line 1, column 10"},
		{`{"a" 1}`, "line 1, column 6"},
		{`[1, 2]`, "not an object"},
		{``, "empty"},
	}
	for _, c := range cases {
		if got := jsonProblem([]byte(c.in), nil); !strings.Contains(got, c.want) {
			t.Errorf("jsonProblem(%q) = %q, want %q in it", c.in, got, c.want)
		}
	}
}
