package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/requests"
)

// Requests is what the request tools need from §16's service
// (requests.Service).
type Requests interface {
	// Create makes a request as p through via; created is false for an
	// idempotent repeat; secret is its callback secret.
	Create(ctx context.Context, p auth.Principal, in requests.CreateInput, via string) (r requests.Request, created bool, secret string, err error)
	// Wait returns the request once it is no longer pending or after d.
	Wait(ctx context.Context, id string, d time.Duration) (requests.Request, error)
	// Cancel cancels a pending request as p (its creator or an admin).
	Cancel(ctx context.Context, p auth.Principal, id, via string) (requests.Request, error)
}

var _ Requests = (*requests.Service)(nil)

// MaxWaitSeconds is the longest wait of one call (SPEC §19): under the
// HTTP server's write timeout, and under most clients' call timeouts.
const MaxWaitSeconds = 50

// Defaults of the request tools' kinds.
const (
	DefaultApprovalKind = "approval"
	DefaultQuestionKind = "question"
)

// requestApprovalInput is §16's body plus wait_seconds.
type requestApprovalInput struct {
	Kind           string          `json:"kind,omitempty" jsonschema:"the kind of approval (^[a-z][a-z0-9_]{0,39}$); the policy names who decides each kind (default approval)"`
	Title          string          `json:"title" jsonschema:"what is asked, for the person who decides (1-200 characters)"`
	Description    string          `json:"description,omitempty" jsonschema:"more context, in Markdown (at most 64 KiB)"`
	Payload        json.RawMessage `json:"payload,omitempty" jsonschema:"what is to be approved, e.g. a tool call's name and arguments (a JSON object, at most 256 KiB)"`
	Actions        []string        `json:"actions,omitempty" jsonschema:"what the person may do (default [approve, reject], or [respond] with only a response_schema)"`
	ResponseSchema json.RawMessage `json:"response_schema,omitempty" jsonschema:"a JSON Schema of a typed answer the desk renders as a form"`
	IdempotencyKey string          `json:"idempotency_key,omitempty" jsonschema:"the same key again returns the same request instead of asking twice (at most 200 characters)"`
	Deadline       string          `json:"deadline,omitempty" jsonschema:"a Go duration (30m) or an RFC 3339 time (default: the policy's)"`
	CallbackURL    string          `json:"callback_url,omitempty" jsonschema:"an https URL that gets one signed delivery when the request is decided, expires or is cancelled"`
	Metadata       json.RawMessage `json:"metadata,omitempty" jsonschema:"a JSON object returned as given (at most 16 KiB)"`
	WaitSeconds    int             `json:"wait_seconds,omitempty" jsonschema:"how long to wait for the decision before returning the pending request (0-50, default 0)"`
}

// askHumanInput is ask_human's arguments.
type askHumanInput struct {
	Question       string          `json:"question" jsonschema:"the question for a person"`
	ResponseSchema json.RawMessage `json:"response_schema,omitempty" jsonschema:"a JSON Schema of the answer (an object of strings, numbers, booleans, choices); without it the answer is text"`
	Kind           string          `json:"kind,omitempty" jsonschema:"the kind of question; the policy names who answers each kind (default question)"`
	Deadline       string          `json:"deadline,omitempty" jsonschema:"a Go duration (30m) or an RFC 3339 time (default: the policy's)"`
	IdempotencyKey string          `json:"idempotency_key,omitempty" jsonschema:"the same key again returns the same request instead of asking twice"`
	WaitSeconds    int             `json:"wait_seconds,omitempty" jsonschema:"how long to wait for the answer before returning the pending request (0-50, default 0)"`
}

// getRequestInput is get_request's arguments.
type getRequestInput struct {
	ID          string `json:"id" jsonschema:"the request's id"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"how long to wait while it is pending (0-50, default 0)"`
}

// cancelRequestInput is cancel_request's arguments.
type cancelRequestInput struct {
	ID string `json:"id" jsonschema:"the request's id"`
}

// RequestSchema is the JSON Schema of §16's Request, the output of the
// request tools.
func RequestSchema() *jsonschema.Schema { return requestSchemaOf[requests.Request]() }

// CreatedRequest is request_approval's result: the Request, with its
// callback secret when it was made with a callback_url (SPEC §16: to the
// principal who made it, on the call that made it or a repeat of its
// idempotency key; never elsewhere).
type CreatedRequest struct {
	requests.Request
	CallbackSecret string `json:"callback_secret,omitempty" jsonschema:"the Standard Webhooks secret (whsec_…) that signs the delivery to callback_url; keep it: it is shown only here"`
}

// requestSchemaOf is the schema of a Request (or a type embedding one).
func requestSchemaOf[T any]() *jsonschema.Schema {
	return SchemaFor[T](map[string]*jsonschema.Schema{
		"payload":         objectOrNull("what is to be approved"),
		"response_schema": objectOrNull("the JSON Schema of a typed answer"),
		"metadata":        objectOrNull("returned as given"),
		"status": {Type: "string", Enum: []any{requests.StatusPending, requests.StatusApproved, requests.StatusRejected,
			requests.StatusEdited, requests.StatusResponded, requests.StatusExpired, requests.StatusCancelled}},
		"decision.value": anyJSON("edit: the edited payload; respond: the answer (typed JSON valid against response_schema, else text)"),
	})
}

func (s *Server) addRequestTools() {
	out := RequestSchema()
	wait := &jsonschema.Schema{Type: "integer", Minimum: new(0.0), Maximum: new(float64(MaxWaitSeconds))}
	actions := &jsonschema.Schema{Type: "array", MinItems: new(1),
		Items: &jsonschema.Schema{Type: "string", Enum: []any{"approve", "reject", "edit", "respond"}}}
	idem := &jsonschema.Schema{Type: "string", MaxLength: new(200)}

	in := SchemaFor[requestApprovalInput](map[string]*jsonschema.Schema{
		"payload": {Type: "object"}, "response_schema": {Type: "object"}, "metadata": {Type: "object"},
		"actions": actions, "wait_seconds": wait, "idempotency_key": idem,
		"title": {Type: "string", MinLength: new(1), MaxLength: new(200)},
	})
	sdk.AddTool(s.srv, &sdk.Tool{Name: "request_approval", Title: "Ask a person to approve",
		Description: "Asks a person to approve something (a tool call, a deploy, a refund) and returns the request. " +
			"With wait_seconds, waits for the decision up to that long; while status is pending, call get_request " +
			"with wait_seconds. Proceed only when status is approved (or edited: use decision.value as the approved payload). " +
			"Needs the operator role.",
		Annotations: &sdk.ToolAnnotations{OpenWorldHint: new(true)}, InputSchema: in, OutputSchema: requestSchemaOf[CreatedRequest](),
	}, s.requestApproval)

	ask := SchemaFor[askHumanInput](map[string]*jsonschema.Schema{
		"response_schema": {Type: "object"}, "wait_seconds": wait, "idempotency_key": idem,
		"question": {Type: "string", MinLength: new(1)},
	})
	sdk.AddTool(s.srv, &sdk.Tool{Name: "ask_human", Title: "Ask a person a question",
		Description: "Asks a person a question and returns the request; the answer is decision.value once status is " +
			"responded. With wait_seconds, waits for it up to that long; while pending, call get_request with wait_seconds. " +
			"Needs the operator role.",
		Annotations: &sdk.ToolAnnotations{OpenWorldHint: new(true)}, InputSchema: ask, OutputSchema: out,
	}, s.askHuman)

	sdk.AddTool(s.srv, &sdk.Tool{Name: "get_request", Title: "Get a request",
		Description: "A request as it stands; with wait_seconds, returns as soon as it is decided, or when the wait ends.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
		InputSchema: SchemaFor[getRequestInput](map[string]*jsonschema.Schema{"wait_seconds": wait}), OutputSchema: out,
	}, s.getRequest)

	sdk.AddTool(s.srv, &sdk.Tool{Name: "cancel_request", Title: "Cancel a request",
		Description:  "Withdraws a pending request (its creator or an admin): nobody needs to decide it any more.",
		Annotations:  &sdk.ToolAnnotations{DestructiveHint: new(true), IdempotentHint: true, OpenWorldHint: new(false)},
		OutputSchema: out,
	}, s.cancelRequest)
}

func (s *Server) requestApproval(ctx context.Context, req *sdk.CallToolRequest, in requestApprovalInput) (*sdk.CallToolResult, CreatedRequest, error) {
	p, err := principal(req, auth.RoleOperator)
	if err != nil {
		return nil, CreatedRequest{}, err
	}
	if strings.TrimSpace(in.Kind) == "" {
		in.Kind = DefaultApprovalKind
	}
	r, secret, err := s.create(ctx, req, "request_approval", p, requests.CreateInput{Kind: in.Kind, Title: in.Title,
		Description: in.Description, Payload: in.Payload, Actions: in.Actions, ResponseSchema: in.ResponseSchema,
		IdempotencyKey: in.IdempotencyKey, Deadline: in.Deadline, CallbackURL: in.CallbackURL, Metadata: in.Metadata},
		in.WaitSeconds)
	if err != nil {
		return nil, CreatedRequest{}, err
	}
	return nil, CreatedRequest{Request: r, CallbackSecret: secret}, nil
}

// maxTitle is the longest request title (SPEC §16).
const maxTitle = 200

func (s *Server) askHuman(ctx context.Context, req *sdk.CallToolRequest, in askHumanInput) (*sdk.CallToolResult, requests.Request, error) {
	p, err := principal(req, auth.RoleOperator)
	if err != nil {
		return nil, requests.Request{}, err
	}
	q := strings.TrimSpace(in.Question)
	if q == "" {
		return nil, requests.Request{}, badArg("question", "is required")
	}
	if strings.TrimSpace(in.Kind) == "" {
		in.Kind = DefaultQuestionKind
	}
	// The title is the question; a long one is shortened there and kept
	// whole in the description.
	title, desc := strings.Join(strings.Fields(q), " "), ""
	if utf8.RuneCountInString(title) > maxTitle {
		title, desc = string([]rune(title)[:maxTitle-1])+"…", q
	}
	r, _, err := s.create(ctx, req, "ask_human", p, requests.CreateInput{Kind: in.Kind, Title: title, Description: desc,
		Actions: []string{"respond"}, ResponseSchema: in.ResponseSchema, IdempotencyKey: in.IdempotencyKey,
		Deadline: in.Deadline}, in.WaitSeconds)
	return nil, r, err
}

// create makes a request, then waits as asked; secret is its callback
// secret (empty without a callback_url).
func (s *Server) create(ctx context.Context, req *sdk.CallToolRequest, tool string, p auth.Principal, in requests.CreateInput, wait int) (requests.Request, string, error) {
	if err := checkWait(wait); err != nil {
		return requests.Request{}, "", err
	}
	r, _, secret, err := s.d.Requests.Create(ctx, p, in, Via)
	if err != nil {
		return requests.Request{}, "", s.fail(tool, err)
	}
	if r, err = s.wait(ctx, req, r, wait); err != nil {
		return requests.Request{}, "", s.fail(tool, err)
	}
	return r, secret, nil
}

func (s *Server) getRequest(ctx context.Context, req *sdk.CallToolRequest, in getRequestInput) (*sdk.CallToolResult, requests.Request, error) {
	if _, err := principal(req, auth.RoleViewer); err != nil {
		return nil, requests.Request{}, err
	}
	id, err := checkID(in.ID)
	if err != nil {
		return nil, requests.Request{}, err
	}
	if err := checkWait(in.WaitSeconds); err != nil {
		return nil, requests.Request{}, err
	}
	r, err := s.d.Requests.Wait(ctx, id, 0)
	if err == nil {
		r, err = s.wait(ctx, req, r, in.WaitSeconds)
	}
	if err != nil {
		return nil, requests.Request{}, s.fail("get_request", err)
	}
	return nil, r, nil
}

func (s *Server) cancelRequest(ctx context.Context, req *sdk.CallToolRequest, in cancelRequestInput) (*sdk.CallToolResult, requests.Request, error) {
	p, err := principal(req, auth.RoleOperator)
	if err != nil {
		return nil, requests.Request{}, err
	}
	id, err := checkID(in.ID)
	if err != nil {
		return nil, requests.Request{}, err
	}
	r, err := s.d.Requests.Cancel(ctx, p, id, Via)
	if err != nil {
		return nil, requests.Request{}, s.fail("cancel_request", err)
	}
	return nil, r, nil
}

// wait waits up to seconds for a pending request to be decided, in steps
// of ProgressEvery, sending notifications/progress after each step when
// the client sent a progressToken. It holds no database connection while
// it waits (requests.Service.Wait). When the server shuts down, it ends at
// once with the request as it stands: the request itself is durable.
func (s *Server) wait(ctx context.Context, req *sdk.CallToolRequest, r requests.Request, seconds int) (requests.Request, error) {
	if seconds <= 0 || !r.Pending() {
		return r, nil
	}
	parent := ctx
	ctx, stop := s.untilClosing(ctx)
	defer stop()
	total := time.Duration(seconds) * time.Second
	start := time.Now()
	token := req.Params.GetProgressToken()
	progress := func() {
		if token == nil || req.Session == nil {
			return
		}
		elapsed := time.Since(start).Round(time.Second)
		err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token,
			Progress: min(elapsed, total).Seconds(), Total: total.Seconds(),
			Message: fmt.Sprintf("waiting for a person to decide %q (%s of %s): %s", r.Title, elapsed, total, r.URL)})
		if err != nil {
			s.log.Debug("mcp progress", "request", r.ID, "error", err)
		}
	}
	progress()
	for {
		left := total - time.Since(start)
		if left <= 0 {
			return r, nil
		}
		got, err := s.d.Requests.Wait(ctx, r.ID, min(left, s.d.ProgressEvery))
		if err != nil {
			if parent.Err() == nil && errors.Is(err, context.Canceled) {
				// Shutting down: answer with the request as it stands.
				fresh, cancel := context.WithTimeout(context.WithoutCancel(parent), 5*time.Second)
				defer cancel()
				return s.d.Requests.Wait(fresh, r.ID, 0)
			}
			return r, err
		}
		r = got
		if !r.Pending() {
			return r, nil
		}
		progress()
	}
}

// checkWait refuses a wait_seconds out of range (the input schema says so
// too; this holds for any caller).
func checkWait(seconds int) error {
	if seconds < 0 || seconds > MaxWaitSeconds {
		return badArg("wait_seconds", "must be from 0 to %d", MaxWaitSeconds)
	}
	return nil
}

// untilClosing is ctx, also cancelled when the server shuts down.
func (s *Server) untilClosing(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if s.d.Closing != nil {
		go func() {
			select {
			case <-s.d.Closing:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}
