package graph

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// defaultTitleRunes is the longest a default title is.
const defaultTitleRunes = 80

// titleKeys are the input fields a default title is taken from, in order,
// before any other text field.
var titleKeys = []string{"title", "description", "question", "query", "prompt", "topic", "subject", "name", "user_input"}

// DefaultTitle is the title of a task created without one: a short excerpt
// (one line, at most 80 runes, cut at a word) of the input's first text
// among the usual fields (title, description, question, query, prompt,
// topic, subject, name, user_input), else of its first text field by
// name, else the workflow's name. Engine.Create applies it, so every
// channel that creates tasks titles them alike.
func DefaultTitle(workflow string, input json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(input, &m) != nil {
		return workflow
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if !slices.Contains(titleKeys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range append(slices.Clone(titleKeys), keys...) {
		if v, ok := m[k].(string); ok && strings.TrimSpace(v) != "" {
			return Excerpt(v, defaultTitleRunes)
		}
	}
	return workflow
}

// Excerpt is s on one line (runs of white space as one space), cut at a
// word boundary to at most n runes, an ellipsis marking the cut.
func Excerpt(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)[:n-1]
	cut := string(r)
	if i := strings.LastIndexByte(cut, ' '); i > n/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " .,;:") + "…"
}
