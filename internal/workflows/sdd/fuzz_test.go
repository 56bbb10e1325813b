package sdd

import (
	"testing"

	"github.com/gatehousehq/gatehouse/internal/workflows/fuzztest"
)

// FuzzParseInput: whatever ParseInput accepts satisfies InputSchema and
// parses again to the same value; whatever it refuses is a validation
// error naming an input field. Run: go test -run '^$' -fuzz '^FuzzParseInput$' ./internal/workflows/sdd
func FuzzParseInput(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `{}`, `[]`, `"text"`, `42`, `{"x": 1}`, `{} {}`, "{\"\uFEFF\": 1}",
		`{"project_brief": "A URL shortener for a team of five."}`,
		`{"project_brief": " "}`,
		`{"project_brief": null}`,
		`{"project_brief": "b", "x": 1}`,
		`{"project_brief": {"a": 1}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fuzztest.ParseInput(t, InputSchema, ParseInput, raw)
	})
}
