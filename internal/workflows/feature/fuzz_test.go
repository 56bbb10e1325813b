package feature

import (
	"testing"

	"github.com/gatehousehq/gatehouse/internal/workflows/fuzztest"
)

// FuzzParseInput: whatever ParseInput accepts satisfies InputSchema and
// parses again to the same value; whatever it refuses is a validation
// error naming an input field. Run: go test -run '^$' -fuzz '^FuzzParseInput$' ./internal/workflows/feature
func FuzzParseInput(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `{}`, `[]`, `"text"`, `42`, `{"x": 1}`, `{} {}`, "{\"\uFEFF\": 1}",
		`{"description": "Add a login page"}`,
		`{"description": "  x  ", "name": "login-page"}`,
		`{"description": ""}`,
		`{"description": 5}`,
		`{"description": "d", "name": ["n"]}`,
		`{"description": "d", "extra": true}`,
		`{"description": "\u0000\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fuzztest.ParseInput(t, InputSchema, ParseInput, raw)
	})
}
