// Package request is the built-in one-node workflow `request` (SPEC §16):
// the task of an approval request that an agent made through the API or
// MCP. Its one node, ask, puts the request to a person as one interrupt of
// the request's kind; the task starts waiting on it (graph.Engine.
// CreateAsking), and ends when it is answered. Everything that serves an
// interrupt — the inbox, the task page, the timeline, the audit, claims,
// deadlines, reminders, escalation, email, Slack, webhooks, analytics —
// serves a request with no second path.
//
// It imports graph only.
package request

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gatehousehq/gatehouse/graph"
)

// Name is the workflow's name.
const Name = "request"

// NodeAsk is the workflow's one node.
const NodeAsk = "ask"

// ArtifactPayload names the artifact that carries the payload on the
// interrupt (formatted JSON).
const ArtifactPayload = "payload.json"

// StateVersion is the version of State's shape.
const StateVersion = 1

// Input is the task's input: the request as created (internal/requests
// checks it before the task is made).
type Input struct {
	Kind           string          `json:"kind"`
	Title          string          `json:"title"`
	Description    string          `json:"description,omitempty"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Actions        []string        `json:"actions"`
	ResponseSchema json.RawMessage `json:"response_schema,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	// Deadline is the request's own deadline as given (a Go duration or
	// an RFC 3339 time); empty: the policy's.
	Deadline string `json:"deadline,omitempty"`
	// RequestedBy is the principal that asked, and Via the channel
	// ("api", "mcp").
	RequestedBy string `json:"requested_by,omitempty"`
	Via         string `json:"via,omitempty"`
	// FieldOrder is the order of the response_schema's properties as the
	// request wrote them (the schema is stored as jsonb, which keeps no
	// order): the desk draws the answer's controls in it.
	FieldOrder []string `json:"field_order,omitempty"`
}

// State is the workflow's state: the request, then its answer.
type State struct {
	Request Input  `json:"request"`
	Action  string `json:"action,omitempty"`
	Answer  string `json:"answer,omitempty"`
}

// InputSchema is the JSON Schema of Input, for the workflow list.
var InputSchema = json.RawMessage(`{"type":"object","required":["kind","title","actions"],"properties":{` +
	`"kind":{"type":"string","pattern":"^[a-z][a-z0-9_]{0,39}$"},"title":{"type":"string","minLength":1,"maxLength":200},` +
	`"description":{"type":"string"},"payload":{"type":"object"},` +
	`"actions":{"type":"array","items":{"enum":["approve","reject","edit","respond"]},"minItems":1},` +
	`"response_schema":{"type":"object"},"metadata":{"type":"object"}}}`)

// Question is what the request asks: its kind, title and description, the
// payload as formatted JSON, the actions offered.
func Question(in Input) graph.Question {
	q := graph.Question{Kind: in.Kind, Title: in.Title, Text: in.Description, Actions: in.Actions}
	if len(in.Payload) > 0 && strings.TrimSpace(string(in.Payload)) != "{}" {
		q.Artifact = &graph.ArtifactRef{Name: ArtifactPayload, ContentType: "application/json", Content: Pretty(in.Payload)}
	}
	return q
}

// Pretty is JSON indented by two spaces, its text as written (no \u003c
// for "<": people read it; pages escape it), raw as it is when it is not
// JSON.
func Pretty(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// New compiles the workflow.
func New() (*graph.Graph[State], error) {
	return graph.New[State](Name).
		StateVersion(StateVersion).
		Describe("Approval request", "A question an agent asked a person through /api/v1/requests or MCP: "+
			"one interrupt of the request's kind, answered on the desk, by email, in Slack or through the API.").
		Node(NodeAsk, ask, graph.WithDescription("Asks the request's question; the task ends with the answer.")).
		Edge(NodeAsk, graph.END).
		Unlisted().
		Init(initial).
		Result(func(s State) any { return map[string]string{"action": s.Action, "answer": s.Answer} }).
		InputSchema(InputSchema).
		Compile()
}

func initial(raw json.RawMessage, _ graph.Options) (State, error) {
	var in Input
	if err := json.Unmarshal(raw, &in); err != nil {
		return State{}, &graph.ValidationError{Field: "input", Message: fmt.Sprintf("is not a request: %v", err)}
	}
	switch {
	case in.Kind == "":
		return State{}, &graph.ValidationError{Field: "input.kind", Message: "is required"}
	case in.Title == "":
		return State{}, &graph.ValidationError{Field: "input.title", Message: "is required"}
	case len(in.Actions) == 0:
		return State{}, &graph.ValidationError{Field: "input.actions", Message: "is required"}
	}
	return State{Request: in}, nil
}

func ask(_ context.Context, run *graph.NodeRun, s State) (State, error) {
	a, err := run.Ask(Question(s.Request))
	if err != nil {
		return s, err
	}
	s.Action, s.Answer = a.Action, a.Text
	return s, nil
}
