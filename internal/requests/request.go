// Package requests is approval requests from any agent (SPEC §16–17): an
// agent in any language asks a person through /api/v1/requests or MCP and
// gets a durable, audited answer.
//
// A request is a task of the built-in one-node workflow `request`
// (internal/workflows/request) with the same id, created waiting on one
// interrupt of the request's kind, so the inbox, the task page, the
// timeline, the audit, claims, deadlines, reminders, escalation, email,
// Slack, webhooks and analytics serve it with no second path, and every
// decision goes through the one auth.Decider (CheckDecision checks
// answers against the response_schema and edits of the payload, for every
// channel).
//
// The API of the package, for the HTTP handlers and the MCP server:
//
//   - NewService(Config) *Service.
//   - (*Service).Create(ctx, principal auth.Principal, in CreateInput, via string)
//     (req Request, created bool, secret string, err error): via is
//     ViaAPI or ViaMCP and is carried by the events as data.via; created
//     is false for an idempotent repeat (HTTP 200 instead of 201); secret
//     is the callback's whsec_… (only to the principal that made it).
//   - (*Service).Get(ctx, id) (Request, error).
//   - (*Service).Wait(ctx, id, d time.Duration) (Request, error): at once
//     when not pending, within 100 ms of its decision, else after d (at
//     most MaxWait); no database connection is held while it waits.
//   - (*Service).List(ctx, ListFilter) (Page, error).
//   - (*Service).Cancel(ctx, principal, id, via string) (Request, error).
//
// Errors: *FieldError{Field, Problem} for bad input (HTTP 400, MCP
// isError naming the field); *ConflictError (409: a reused idempotency key
// with another body, a cancel of a request no longer pending);
// *auth.ForbiddenError (403); ErrNotFound (404); *AnswerError (=
// auth.AnswerError: an answer that fails the response_schema, 422 naming
// the field "value.<property>").
//
// It imports graph, auth, notify, jcs and the request workflow only: never
// postgres (it declares the Store it calls, which postgres implements),
// live, the runner, nor the channels that serve it (internal/web's rooms,
// mcp), which import it.
package requests

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/gatehousehq/gatehouse/internal/auth"
)

// Channels a request is made through (data.via of its events).
const (
	ViaAPI = "api"
	ViaMCP = "mcp"
)

// Request statuses (SPEC §16).
const (
	StatusPending   = "pending"
	StatusApproved  = "approved"
	StatusRejected  = "rejected"
	StatusEdited    = "edited"
	StatusResponded = "responded"
	StatusExpired   = "expired"
	StatusCancelled = "cancelled"
)

// Statuses lists every status, for filters.
var Statuses = []string{StatusPending, StatusApproved, StatusRejected, StatusEdited, StatusResponded, StatusExpired, StatusCancelled}

// Request is an approval request as the API shows it (SPEC §16).
type Request struct {
	ID             string          `json:"id"`
	Kind           string          `json:"kind"`
	Title          string          `json:"title"`
	Description    string          `json:"description"`
	Payload        json.RawMessage `json:"payload"`
	PayloadSHA256  string          `json:"payload_sha256"`
	Actions        []string        `json:"actions"`
	ResponseSchema json.RawMessage `json:"response_schema"`
	Status         string          `json:"status"`
	Decision       *Decision       `json:"decision"`
	Deadline       *time.Time      `json:"deadline"`
	CreatedBy      string          `json:"created_by"`
	CreatedAt      time.Time       `json:"created_at"`
	DecidedAt      *time.Time      `json:"decided_at"`
	URL            string          `json:"url"`
	TaskID         string          `json:"task_id"`
	InterruptID    string          `json:"interrupt_id"`
	IdempotencyKey *string         `json:"idempotency_key"`
	Metadata       json.RawMessage `json:"metadata"`
	// Via is the channel the request was made through (ViaAPI, ViaMCP).
	Via string `json:"-"`
}

// Pending reports whether the request still waits for a person.
func (r Request) Pending() bool { return r.Status == StatusPending }

// Decision is how a request was decided: edit carries the edited payload
// (a JSON object) as Value, respond the answer (typed JSON valid against
// the response_schema, else a string).
type Decision struct {
	Action   string          `json:"action"`
	By       string          `json:"by"`
	At       time.Time       `json:"at"`
	Feedback string          `json:"feedback"`
	Value    json.RawMessage `json:"value"`
}

// CreateInput is the body of POST /api/v1/requests.
type CreateInput struct {
	Kind           string          `json:"kind"`
	Title          string          `json:"title"`
	Description    string          `json:"description,omitempty"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Actions        []string        `json:"actions,omitempty"`
	ResponseSchema json.RawMessage `json:"response_schema,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	// Deadline is a Go duration ("30m") or an RFC 3339 time; empty: the
	// policy's.
	Deadline    string          `json:"deadline,omitempty"`
	CallbackURL string          `json:"callback_url,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// ListFilter selects requests: Status and Kind empty for any, Limit
// (default 50, at most 200), Cursor from the previous page's NextCursor.
type ListFilter struct {
	Status string
	Kind   string
	Limit  int
	Cursor string
}

// Page is one page of a list, newest first.
type Page struct {
	Requests   []Request `json:"requests"`
	NextCursor *string   `json:"next_cursor"`
}

// FieldError is bad input, naming the field ("title",
// "response_schema.properties.env"): HTTP 400, nothing created.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// AnswerError is an answer that fails its request's response_schema
// (HTTP 422 naming the field).
type AnswerError = auth.AnswerError

// ConflictError is a request that cannot be made or changed as asked: an
// idempotency key used with another body, a cancel of a request that is
// no longer pending (HTTP 409).
type ConflictError struct{ Reason string }

func (e *ConflictError) Error() string { return e.Reason }

// ErrNotFound is a request that does not exist.
var ErrNotFound = errors.New("request not found")

// MaxWait is the longest long poll.
const MaxWait = 60 * time.Second
