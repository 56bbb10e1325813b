package langgraph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/pgtext"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// apiError is what a client of /langgraph sees: {"detail": "…"} with a
// status, as LangGraph's server answers.
type apiError struct {
	Status int
	Detail string
	Err    error // the cause, logged, never shown
}

func (e *apiError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %v", e.Status, e.Detail, e.Err)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Detail)
}

func (e *apiError) Unwrap() error { return e.Err }

func unprocessable(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusUnprocessableEntity, Detail: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusConflict, Detail: fmt.Sprintf(format, args...)}
}

func notFound(what string) *apiError {
	return &apiError{Status: http.StatusNotFound, Detail: what + " not found"}
}

// ErrorOf maps any error to the status and detail a client sees; the one
// place on this prefix where errors become statuses.
func ErrorOf(err error) (status int, detail string) {
	var (
		apiErr  *apiError
		valErr  *graph.ValidationError
		wfErr   *graph.UnknownWorkflowError
		wrong   *graph.WrongTaskError
		cfErr   *graph.ConflictError
		stErr   *graph.TaskStatusError
		fbErr   *auth.ForbiddenError
		maxErr  *http.MaxBytesError
		httpErr *echo.HTTPError
	)
	switch {
	case errors.As(err, &apiErr):
		return apiErr.Status, apiErr.Detail
	case errors.As(err, &fbErr):
		return http.StatusForbidden, fbErr.Reason
	case errors.As(err, &maxErr):
		return http.StatusRequestEntityTooLarge, "request body is larger than 1048576 bytes"
	case errors.As(err, &valErr):
		return http.StatusUnprocessableEntity, valErr.Error()
	case errors.As(err, &wfErr):
		return http.StatusNotFound, fmt.Sprintf("assistant not found: no workflow is called %q", wfErr.Name)
	case errors.As(err, &wrong), errors.Is(err, graph.ErrInterruptNotFound):
		return http.StatusNotFound, "interrupt not found"
	case errors.Is(err, postgres.ErrThreadNotFound), errors.Is(err, graph.ErrTaskNotFound):
		return http.StatusNotFound, "thread not found"
	case errors.Is(err, postgres.ErrRunNotFound):
		return http.StatusNotFound, "run not found"
	case errors.Is(err, postgres.ErrThreadBusy):
		return http.StatusConflict, "thread is busy with another run: wait for it to finish (multitask_strategy reject)"
	case errors.As(err, &cfErr):
		return http.StatusConflict, cfErr.Error()
	case errors.As(err, &stErr):
		return http.StatusConflict, stErr.Error()
	case errors.Is(err, graph.ErrConflict):
		return http.StatusConflict, "conflict"
	case errors.As(err, &httpErr):
		msg := http.StatusText(httpErr.Code)
		if m, ok := httpErr.Message.(string); ok && m != "" {
			msg = m
		}
		if httpErr.Code >= 500 {
			return http.StatusInternalServerError, "internal error"
		}
		return httpErr.Code, msg
	case errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, "request cancelled"
	default:
		return http.StatusInternalServerError, "internal error"
	}
}

// HandleError writes err as {"detail"} unless the response has started
// (a stream that failed midway has said so in an error event).
func HandleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, detail := ErrorOf(err)
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = writeJSON(c, status, map[string]string{"detail": detail})
}

// writeJSON renders v into a buffer first, so that a failure never leaves
// half a body behind a 200.
func writeJSON(c echo.Context, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	c.Response().WriteHeader(status)
	_, err = c.Response().Write(b)
	return err
}

// decodeBody reads one JSON object into v: an empty body is {}, anything
// else malformed is 422 naming what is wrong.
func decodeBody(c echo.Context, v any) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return err
		}
		return &apiError{Status: http.StatusBadRequest, Detail: "could not read the request body", Err: err}
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || string(body) == "null" {
		body = []byte(`{}`)
	}
	if body[0] != '{' {
		return unprocessable("the request body must be a JSON object")
	}
	// Text PostgreSQL cannot store, before anything is decoded (the
	// decoder would turn invalid UTF-8 into U+FFFD without a word).
	if field, problem := pgtext.JSON(body); problem != "" {
		return badText(field, problem)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return unprocessable("%s: must be %s, not a JSON %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return unprocessable("the request body is not valid JSON: %v", err)
	}
	if dec.More() {
		return unprocessable("the request body holds data after its JSON object")
	}
	return nil
}

// badText is the 400 of a field (of the body, or a query parameter) whose
// text cannot be stored: U+0000 or invalid UTF-8 (pgtext).
func badText(field, problem string) *apiError {
	if field == "" {
		return &apiError{Status: http.StatusBadRequest, Detail: "the request " + problem}
	}
	return &apiError{Status: http.StatusBadRequest, Detail: field + ": " + problem}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int64", "int32", "float64":
		return "a number"
	case "bool":
		return "a boolean"
	case "slice":
		return "a list"
	case "map", "struct":
		return "an object"
	}
	return goKind
}
