package requests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/pgtext"
	"github.com/gatehousehq/gatehouse/internal/workflows/request"
)

// Limits of a request (SPEC §16).
const (
	MaxTitle          = 200
	MaxDescription    = 64 << 10
	MaxPayload        = 256 << 10
	MaxMetadata       = 16 << 10
	MaxIdempotencyKey = 200
	MaxCallbackURL    = 2048
)

// normalized is a checked request: the task's input, its deadline and
// its callback.
type normalized struct {
	input       request.Input
	key         string
	deadline    string // as given
	callbackURL string
}

// text checks a string field: valid UTF-8, no NUL (PostgreSQL stores
// neither), at most max (runes when runes, else bytes).
func text(field, s string, maxLen int, runes bool) error {
	if problem := pgtext.Problem(s); problem != "" {
		return &FieldError{Field: field, Problem: problem}
	}
	switch {
	case runes && utf8.RuneCountInString(s) > maxLen:
		return &FieldError{Field: field, Problem: fmt.Sprintf("is longer than %d characters", maxLen)}
	case !runes && len(s) > maxLen:
		return &FieldError{Field: field, Problem: fmt.Sprintf("is larger than %d bytes", maxLen)}
	}
	return nil
}

// object checks a JSON object field of at most maxLen bytes; absent or
// null is nil.
func object(field string, raw json.RawMessage, maxLen int) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if len(raw) > maxLen {
		return nil, &FieldError{Field: field, Problem: fmt.Sprintf("is larger than %d bytes", maxLen)}
	}
	if raw[0] != '{' || !json.Valid(raw) {
		return nil, &FieldError{Field: field, Problem: "must be a JSON object"}
	}
	if at, problem := pgtext.JSON(raw); problem != "" {
		if at != "" {
			field += "." + at
		}
		return nil, &FieldError{Field: field, Problem: problem}
	}
	return raw, nil
}

// normalize checks a request as SPEC §16 says, naming the field of the
// first problem (*FieldError).
func (s *Service) normalize(ctx context.Context, in CreateInput) (normalized, error) {
	var n normalized
	in.Kind = strings.TrimSpace(in.Kind)
	switch {
	case in.Kind == "":
		return n, &FieldError{Field: "kind", Problem: "is required"}
	case !auth.ValidKind(in.Kind):
		return n, &FieldError{Field: "kind", Problem: fmt.Sprintf("%q: %s", in.Kind, auth.KindProblem)}
	}
	title := strings.Join(strings.Fields(in.Title), " ")
	if err := text("title", in.Title, MaxTitle*4, false); err != nil {
		return n, err
	}
	switch {
	case title == "":
		return n, &FieldError{Field: "title", Problem: "is required (1 to 200 characters)"}
	case utf8.RuneCountInString(title) > MaxTitle:
		return n, &FieldError{Field: "title", Problem: fmt.Sprintf("is longer than %d characters", MaxTitle)}
	}
	if err := text("description", in.Description, MaxDescription, false); err != nil {
		return n, err
	}
	payload, err := object("payload", in.Payload, MaxPayload)
	if err != nil {
		return n, err
	}
	if payload == nil {
		payload = json.RawMessage(`{}`)
	}
	metadata, err := object("metadata", in.Metadata, MaxMetadata)
	if err != nil {
		return n, err
	}
	var (
		schema json.RawMessage
		order  []string
	)
	if raw := bytes.TrimSpace(in.ResponseSchema); len(raw) > 0 && string(raw) != "null" {
		form, err := ParseForm(raw)
		if err != nil {
			return n, err
		}
		schema = raw
		if !form.Single {
			for _, f := range form.Fields {
				order = append(order, f.Name)
			}
		}
	}
	actions := in.Actions
	if in.Actions != nil && len(in.Actions) == 0 {
		return n, &FieldError{Field: "actions", Problem: "must not be empty: some of approve, reject, edit, respond"}
	}
	if len(actions) == 0 {
		actions = []string{graph.ActionApprove, graph.ActionReject}
		if schema != nil {
			actions = []string{graph.ActionRespond}
		}
	}
	var seen []string
	for i, a := range actions {
		switch a {
		case graph.ActionApprove, graph.ActionReject, graph.ActionEdit, graph.ActionRespond:
		default:
			return n, &FieldError{Field: fmt.Sprintf("actions[%d]", i), Problem: fmt.Sprintf("%q: want approve, reject, edit or respond", a)}
		}
		if slices.Contains(seen, a) {
			return n, &FieldError{Field: fmt.Sprintf("actions[%d]", i), Problem: fmt.Sprintf("%q is listed twice", a)}
		}
		seen = append(seen, a)
	}
	if schema != nil && !slices.Contains(actions, graph.ActionRespond) {
		return n, &FieldError{Field: "actions", Problem: "a response_schema describes an answer: include respond"}
	}
	n.key = in.IdempotencyKey
	if err := text("idempotency_key", n.key, MaxIdempotencyKey, true); err != nil {
		return n, err
	}
	if n.key != "" && strings.TrimSpace(n.key) == "" {
		return n, &FieldError{Field: "idempotency_key", Problem: "is blank"}
	}
	if n.deadline = strings.TrimSpace(in.Deadline); n.deadline != "" {
		if _, err := s.deadlineAfter(n.deadline, s.now()); err != nil {
			return n, err
		}
	}
	if n.callbackURL = strings.TrimSpace(in.CallbackURL); n.callbackURL != "" {
		if err := text("callback_url", n.callbackURL, MaxCallbackURL, false); err != nil {
			return n, err
		}
		if err := notify.CheckURL(ctx, n.callbackURL, s.allowPrivate); err != nil {
			return n, &FieldError{Field: "callback_url", Problem: err.Error()}
		}
	}
	n.input = request.Input{Kind: in.Kind, Title: title, Description: in.Description, Payload: payload, Actions: actions,
		ResponseSchema: schema, FieldOrder: order, Metadata: metadata, Deadline: n.deadline}
	return n, nil
}

// deadlineAfter reads a deadline (a Go duration, or an RFC 3339 time)
// as the duration from now, whole seconds, at least one.
func (s *Service) deadlineAfter(v string, now time.Time) (time.Duration, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d < time.Second {
			return 0, &FieldError{Field: "deadline", Problem: fmt.Sprintf("%s is shorter than the minimum of 1s", v)}
		}
		return d, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, &FieldError{Field: "deadline", Problem: fmt.Sprintf("%q is neither a duration (30m, 72h) nor an RFC 3339 time", v)}
	}
	d := t.Sub(now).Round(time.Second)
	if d < time.Second {
		return 0, &FieldError{Field: "deadline", Problem: fmt.Sprintf("%s is not in the future", v)}
	}
	return d, nil
}
