package requests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/workflows/request"
)

// CheckDecision is the Decider's check of decisions on requests
// (auth.WithDecisionCheck), for every channel alike: an answer must be
// valid against the request's response_schema (*AnswerError naming the
// field; stored as typed JSON), or be text when there is none; an edit
// must be the edited payload, a JSON object (sent as one, or as its JSON
// text from a form). Decisions on other tasks pass untouched.
func CheckDecision(task *graph.Task, _ *graph.Interrupt, in *graph.DecisionInput) error {
	if task == nil || task.Workflow != request.Name {
		return nil
	}
	var req request.Input
	if err := json.Unmarshal(task.Input, &req); err != nil {
		return fmt.Errorf("request %s: stored input: %w", task.ID, err)
	}
	v := bytes.TrimSpace(in.Value)
	if string(v) == "null" {
		v = nil
	}
	switch in.Action {
	case graph.ActionRespond:
		if req.ResponseSchema == nil {
			if len(v) > 0 && v[0] != '"' {
				return &graph.ValidationError{Field: "value", Message: "must be text: this request has no response_schema"}
			}
			return nil
		}
		form, err := ParseForm(req.ResponseSchema)
		if err != nil {
			return fmt.Errorf("request %s: stored response_schema: %w", task.ID, err)
		}
		if !form.Single && len(v) > 0 && v[0] == '"' {
			// A form's JSON text of the answer.
			var s string
			if json.Unmarshal(v, &s) == nil {
				v = json.RawMessage(s)
			}
		}
		typed, err := form.Validate(v)
		if err != nil {
			return err
		}
		in.Value = typed
	case graph.ActionEdit:
		if len(v) > 0 && v[0] == '"' {
			var s string
			if json.Unmarshal(v, &s) == nil {
				v = bytes.TrimSpace([]byte(s))
			}
		}
		obj, err := object("value", v, MaxPayload)
		if err != nil || obj == nil {
			return &graph.ValidationError{Field: "value", Message: "must be the edited payload, a JSON object" + jsonProblem(v, err)}
		}
		in.Value = obj
	}
	return nil
}

// Callback is the notify.CallbackSource of the callback channel: where a
// request's callback goes, its secret, and its body
// {"type","timestamp","data":{"request"}} for the delivery.
func (s *Service) Callback(ctx context.Context, d *notify.Delivery) (notify.CallbackTarget, error) {
	url, secret, err := s.store.RequestCallback(ctx, d.TaskID)
	if errors.Is(err, ErrNotFound) {
		return notify.CallbackTarget{}, notify.ErrNotFound
	}
	if err != nil {
		return notify.CallbackTarget{}, err
	}
	t := notify.CallbackTarget{URL: url, Secret: secret}
	if len(d.Payload) > 0 {
		return t, nil
	}
	r, err := s.Get(ctx, d.TaskID)
	if err != nil {
		return notify.CallbackTarget{}, err
	}
	t.Body, err = json.Marshal(map[string]any{"type": d.Event, "timestamp": d.CreatedAt.UTC().Format(time.RFC3339Nano),
		"data": map[string]any{"request": r}})
	return t, err
}

// jsonProblem says where an edited payload fails to be a JSON object
// ("": nothing more to say).
func jsonProblem(v []byte, err error) string {
	if len(v) == 0 {
		return ": it is empty"
	}
	var se *json.SyntaxError
	if jerr := json.Unmarshal(v, new(any)); errors.As(jerr, &se) {
		// Offset is past the byte at fault: its line and column are
		// those of the byte before.
		line, col := 1, 1
		for _, b := range v[:min(max(int(se.Offset)-1, 0), len(v))] {
			if b == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		return fmt.Sprintf(": not JSON at line %d, column %d (%s)", line, col, se.Error())
	} else if jerr != nil {
		return ": " + jerr.Error()
	}
	if v[0] != '{' {
		return ": this JSON is not an object"
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return ": it " + fe.Problem
	}
	return ""
}
