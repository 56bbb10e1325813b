package slogan

import (
	"testing"

	"github.com/gatehousehq/gatehouse/internal/workflows/fuzztest"
)

// FuzzParseInput: whatever ParseInput accepts satisfies InputSchema and
// parses again to the same value; whatever it refuses is a validation
// error naming an input field. Run: go test -run '^$' -fuzz '^FuzzParseInput$' ./internal/workflows/slogan
func FuzzParseInput(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `{}`, `[]`, `"text"`, `42`, `{"x": 1}`, `{} {}`, "{\"\uFEFF\": 1}",
		`{"user_input": "eco-friendly water bottles"}`,
		`{"user_input": "\t\n"}`,
		`{"user_input": 1.5}`,
		`{"user_input": "ok", "max_turns": 3}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fuzztest.ParseInput(t, InputSchema, ParseInput, raw)
	})
}
