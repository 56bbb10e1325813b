package sdd

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
)

// Review is the reviewer's JSON reply:
//
//	{"needs_revision": true, "issues": ["no auth section"],
//	 "suggestions": ["…"], "summary": "…", "score": 6}
//
// Only needs_revision matters to the graph (absent: false, as seed 000's
// review_data.get('needs_revision', False)); the rest reaches the next
// drafts as revision_feedback.
type Review struct {
	NeedsRevision bool     `json:"needs_revision"`
	Issues        []string `json:"issues"`
	Suggestions   []string `json:"suggestions,omitempty"`
	Summary       string   `json:"summary,omitempty"`
	Score         *float64 `json:"score,omitempty"`
}

// ParseReview reads a reviewer's reply: the JSON object in it (fenced or
// with prose around it is fine). needs_revision may be a boolean or
// "true"/"false"/"yes"/"no"; issues and suggestions may be a string, a
// list of strings, or a list of objects (each becomes "key: value, …").
func ParseReview(reply string) (Review, error) {
	var r Review
	obj, err := agent.JSONObject(reply)
	if err != nil {
		return r, fmt.Errorf("the reviewer's reply is not the JSON review asked for: %w (reply: %q)", err, agent.Excerpt(reply, 120))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(obj), &m); err != nil {
		return r, fmt.Errorf("the reviewer's reply is not the JSON review asked for: %v (reply: %q)", err, agent.Excerpt(reply, 120))
	}
	if raw, ok := m["needs_revision"]; ok {
		if r.NeedsRevision, err = flexBool(raw); err != nil {
			return r, fmt.Errorf("the reviewer's needs_revision %s: %w", raw, err)
		}
	}
	r.Issues = flexStrings(m["issues"])
	r.Suggestions = flexStrings(m["suggestions"])
	_ = json.Unmarshal(m["summary"], &r.Summary)
	var score float64
	if json.Unmarshal(m["score"], &score) == nil && m["score"] != nil {
		r.Score = &score
	}
	if r.Issues == nil {
		r.Issues = []string{}
	}
	return r, nil
}

func flexBool(raw json.RawMessage) (bool, error) {
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return b, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true", "yes":
			return true, nil
		case "false", "no", "":
			return false, nil
		}
	}
	if string(raw) == "null" {
		return false, nil
	}
	return false, fmt.Errorf("is not true or false")
}

func flexStrings(raw json.RawMessage) []string {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one = strings.TrimSpace(one); one == "" {
			return nil
		}
		return []string{one}
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return []string{strings.TrimSpace(string(raw))}
	}
	out := []string{}
	for _, item := range list {
		var s string
		if json.Unmarshal(item, &s) == nil {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
			continue
		}
		var obj map[string]any
		if json.Unmarshal(item, &obj) == nil {
			keys := make([]string, 0, len(obj))
			for k := range obj {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var parts []string
			for _, k := range keys {
				parts = append(parts, fmt.Sprintf("%s: %v", k, obj[k]))
			}
			out = append(out, strings.Join(parts, ", "))
			continue
		}
		out = append(out, strings.TrimSpace(string(item)))
	}
	return out
}

// Feedback is the review as revision_feedback for the next drafts.
func (r Review) Feedback(round int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "The reviewer asked for a revision (review %d).\n", round)
	if r.Summary != "" {
		fmt.Fprintf(&sb, "Summary: %s\n", r.Summary)
	}
	if len(r.Issues) > 0 {
		sb.WriteString("Issues to fix:\n")
		for _, i := range r.Issues {
			fmt.Fprintf(&sb, "- %s\n", i)
		}
	}
	if len(r.Suggestions) > 0 {
		sb.WriteString("Suggestions:\n")
		for _, s := range r.Suggestions {
			fmt.Fprintf(&sb, "- %s\n", s)
		}
	}
	return strings.TrimRight(sb.String(), "\n")
}
