// Package response is what a client of the server sees: the API's Error
// and its codes, Of (the one mapping of errors to statuses), JSON bodies
// rendered before their status is written, buffered HTML pages, and the
// wording of decisions that every channel shows alike. It sits below the
// handler packages (api, desk, act, slack) and imports none of them, nor
// internal/web.
package response

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/requests"
)

// Error codes of the API (the "code" of an error body).
const (
	CodeBadRequest       = "bad_request"
	CodeUnknownWorkflow  = "unknown_workflow"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodeTooLarge         = "too_large"
	CodeTooManyRequests  = "too_many_requests"
	CodeInvalidInput     = "invalid_input"
	CodeUnavailable      = "unavailable"
	CodeInternal         = "internal"
)

// Error is an API error: what the client sees. Handlers return it (or any
// error; Of maps the rest).
type Error struct {
	Status  int
	Code    string
	Message string
	// Field names the bad part of the request (a body field such as
	// "input.description", a query parameter such as "cursor", a path
	// parameter such as "id"); empty when the request as a whole is wrong.
	Field string
	// Err is the cause, logged and never shown.
	Err error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	if e.Field != "" {
		msg += " (field " + e.Field + ")"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// BadRequest is a 400 naming the field.
func BadRequest(field, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

// NotFound is a 404 saying what is missing.
func NotFound(what string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: what + " not found"}
}

// StatusClientGone marks a request whose client went away (nginx's 499):
// logged as such, never an error of ours.
const StatusClientGone = 499

// MaxBody is the request body limit (SPEC §7: 413 above 1 MiB).
const MaxBody = 1 << 20

// TooLarge is the 413 of a body over MaxBody.
func TooLarge() *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge,
		Message: fmt.Sprintf("request body is larger than %d bytes", MaxBody)}
}

// Of maps any error to what the client sees. It is the one place where
// errors become statuses.
func Of(err error) *Error {
	var (
		apiErr   *Error
		valErr   *graph.ValidationError
		wfErr    *graph.UnknownWorkflowError
		wrongErr *graph.WrongTaskError
		cfErr    *graph.ConflictError
		holdErr  *graph.ClaimHolderError
		maxErr   *http.MaxBytesError
		httpErr  *echo.HTTPError
		fbErr    *auth.ForbiddenError
		thErr    *auth.ThrottledError
		invErr   *auth.InvalidError
		goneErr  *graph.NodeGoneError
		tsErr    *graph.TaskStatusError
		rfErr    *requests.FieldError
		rcErr    *requests.ConflictError
		ansErr   *auth.AnswerError
	)
	switch {
	case errors.As(err, &apiErr):
		return apiErr
	case errors.As(err, &rfErr):
		return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Field: rfErr.Field, Message: rfErr.Error(), Err: err}
	case errors.As(err, &rcErr):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: rcErr.Error(), Err: err}
	case errors.As(err, &ansErr):
		// An answer that fails its request's response_schema (SPEC §17).
		return &Error{Status: http.StatusUnprocessableEntity, Code: CodeInvalidInput, Field: ansErr.Field,
			Message: ansErr.Error(), Err: err}
	case errors.Is(err, requests.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "request not found", Err: err}
	case errors.As(err, &fbErr):
		// A refusal with its reason: who may decide, separation of duties.
		return &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: fbErr.Reason, Err: err}
	case errors.As(err, &thErr):
		return &Error{Status: http.StatusTooManyRequests, Code: CodeTooManyRequests, Message: thErr.Error(), Err: err}
	case errors.As(err, &invErr):
		return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Field: invErr.Field, Message: invErr.Error(), Err: err}
	case errors.Is(err, auth.ErrExists):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: err.Error(), Err: err}
	case errors.Is(err, auth.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: err.Error(), Err: err}
	case errors.As(err, &maxErr):
		return TooLarge()
	case errors.As(err, &goneErr):
		// A task stored under another definition, standing at a node this
		// binary no longer has: the message names the node.
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: goneErr.Error(), Err: err}
	case errors.As(err, &tsErr):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: tsErr.Error(), Err: err}
	case errors.As(err, &valErr):
		// The workflow's input schema is 422, and so is its state schema (a
		// fork's patch); the rest of a request (options, the decision's
		// fields) is plain bad input.
		if valErr.Field == "input" || strings.HasPrefix(valErr.Field, "input.") ||
			valErr.Field == "state" || strings.HasPrefix(valErr.Field, "state.") {
			return &Error{Status: http.StatusUnprocessableEntity, Code: CodeInvalidInput, Field: valErr.Field,
				Message: valErr.Error(), Err: err}
		}
		return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Field: valErr.Field, Message: valErr.Error(), Err: err}
	case errors.As(err, &wfErr):
		return &Error{Status: http.StatusBadRequest, Code: CodeUnknownWorkflow, Field: "workflow",
			Message: fmt.Sprintf("no workflow is called %q", wfErr.Name), Err: err}
	case errors.As(err, &wrongErr):
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Field: "interrupt_id",
			Message: "interrupt not found for this task", Err: err}
	case errors.Is(err, graph.ErrInterruptNotFound):
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Field: "interrupt_id", Message: "interrupt not found", Err: err}
	case errors.Is(err, graph.ErrTaskNotFound):
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "task not found", Err: err}
	case errors.Is(err, postgres.ErrCheckpointNotFound):
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Field: "step", Message: "checkpoint not found", Err: err}
	case errors.As(err, &holdErr):
		return &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: holdErr.Error(), Err: err}
	case errors.As(err, &cfErr):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Field: "interrupt_id", Message: cfErr.Error(), Err: err}
	case errors.Is(err, graph.ErrConflict):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "conflict", Err: err}
	case errors.As(err, &httpErr):
		return fromHTTPError(httpErr)
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads this.
		return &Error{Status: StatusClientGone, Code: CodeUnavailable, Message: "request cancelled", Err: err}
	default:
		return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error", Err: err}
	}
}

// fromHTTPError maps echo's own errors (no route, wrong method, …).
func fromHTTPError(h *echo.HTTPError) *Error {
	e := &Error{Status: h.Code, Message: http.StatusText(h.Code), Err: h}
	if m, ok := h.Message.(string); ok && m != "" {
		e.Message = m
	}
	switch h.Code {
	case http.StatusNotFound:
		e.Code = CodeNotFound
	case http.StatusMethodNotAllowed:
		e.Code = CodeMethodNotAllowed
	case http.StatusRequestEntityTooLarge:
		return TooLarge()
	case http.StatusUnauthorized:
		e.Code = CodeUnauthorized
	case http.StatusForbidden:
		e.Code = CodeForbidden
	case http.StatusConflict:
		e.Code = CodeConflict
	case http.StatusServiceUnavailable:
		e.Code = CodeUnavailable
	default:
		if h.Code >= 500 {
			e.Status, e.Code, e.Message = http.StatusInternalServerError, CodeInternal, "internal error"
		} else {
			e.Code = CodeBadRequest
		}
	}
	return e
}

// Body is the JSON of an error response.
type Body struct {
	Error BodyError `json:"error"`
}

// BodyError is the error of a Body.
type BodyError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// Write writes the error body of err with its status (a HEAD request, the
// status only), and Retry-After on a throttled one.
func Write(c echo.Context, err error) {
	e := Of(err)
	status := e.Status
	if status == StatusClientGone {
		status = http.StatusServiceUnavailable
	}
	var th *auth.ThrottledError
	if errors.As(err, &th) {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(th.RetryAfter.Seconds()+0.999)))
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = JSON(c, status, Body{Error: BodyError{Code: e.Code, Message: e.Message, Field: e.Field}})
}

// CSRFRefused is the answer to a session's state-changing request without
// its CSRF token.
func CSRFRefused() *Error {
	return &Error{Status: http.StatusForbidden, Code: CodeForbidden,
		Message: "missing or wrong CSRF token: reload the page and try again"}
}

// ForbiddenRole refuses a principal whose role is below min.
func ForbiddenRole(p auth.Principal, min auth.Role) *Error {
	return &Error{Status: http.StatusForbidden, Code: CodeForbidden,
		Message: fmt.Sprintf("this needs the %s role; %s is %s", min, p.Name, Article(string(p.Role)))}
}

// Article is a role with its indefinite article ("an admin", "a viewer",
// "without a role"), as messages name a principal's role.
func Article(role string) string { return auth.Role(role).Article() }
