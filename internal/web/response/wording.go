package response

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gatehousehq/gatehouse/graph"
)

// Verb is an action in the past tense, as the timeline, action links and
// Slack say what was decided.
func Verb(action string) string {
	switch action {
	case graph.ActionApprove:
		return "approved"
	case graph.ActionReject:
		return "rejected"
	case graph.ActionEdit:
		return "approved with edits"
	case graph.ActionRespond:
		return "answered"
	}
	return action
}

// DecisionMessage words the engine's refusal of a decision for a person
// (the desk's form, an action link's page, a Slack reply).
func DecisionMessage(ve *graph.ValidationError) string {
	switch {
	case ve.Field == "feedback":
		return "Say what must change: a rejection needs feedback."
	case ve.Field == "value" && ve.Message == "must hold the answer":
		return "Write an answer."
	case ve.Field == "value" && ve.Message == "must hold the edited artifact":
		return "The edited document is empty."
	}
	return Sentence(ve.Message)
}

// Sentence makes an engine message read as a sentence: "is required" →
// "Is required."
func Sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	s = string(unicode.ToUpper(r)) + s[n:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}
