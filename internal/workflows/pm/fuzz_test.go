package pm

import (
	"testing"

	"github.com/gatehousehq/gatehouse/internal/workflows/fuzztest"
)

// FuzzParseInput: whatever ParseInput accepts satisfies InputSchema and
// parses again to the same value; whatever it refuses is a validation
// error naming an input field. Run: go test -run '^$' -fuzz '^FuzzParseInput$' ./internal/workflows/pm
func FuzzParseInput(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `{}`, `[]`, `"text"`, `42`, `{"x": 1}`, `{} {}`, "{\"\uFEFF\": 1}",
		`{"description": "Ship the release", "acceptance_criteria": ["tests pass", "docs updated"]}`,
		`{"description": "d", "acceptance_criteria": []}`,
		`{"description": "d", "acceptance_criteria": ["ok", " "]}`,
		`{"description": "d", "acceptance_criteria": ["a"], "preferences": {"language": "Go", "n": 1e3}}`,
		`{"description": "d", "acceptance_criteria": "one"}`,
		`{"description": "d", "acceptance_criteria": ["a"], "preferences": []}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fuzztest.ParseInput(t, InputSchema, ParseInput, raw)
	})
}
