package analyze

import (
	"testing"

	"github.com/gatehousehq/gatehouse/internal/workflows/fuzztest"
)

// FuzzParseInput: whatever ParseInput accepts satisfies InputSchema and
// parses again to the same value; whatever it refuses is a validation
// error naming an input field. Run: go test -run '^$' -fuzz '^FuzzParseInput$' ./internal/workflows/analyze
func FuzzParseInput(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `{}`, `[]`, `"text"`, `42`, `{"x": 1}`, `{} {}`, "{\"\uFEFF\": 1}",
		`{"query": "Why is the build slow?"}`,
		`{"query": "q", "files": [{"name": "a.txt", "content": "hello"}]}`,
		`{"query": "q", "files": [{"name": "a.txt", "content": "x"}, {"name": "a.txt", "content": "y"}]}`,
		`{"query": "q", "files": [{"name": "", "content": "x"}]}`,
		`{"query": "q", "files": [{"name": "a\nb", "content": "x"}]}`,
		`{"query": "q", "files": {}}`,
		`{"query": "q", "files": [{"name": "a", "content": "x", "mode": 1}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fuzztest.ParseInput(t, InputSchema, ParseInput, raw)
	})
}
