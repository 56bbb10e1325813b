package request

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// PathID reads the :id path parameter: a uuid, in canonical lower case.
func PathID(c echo.Context) (string, error) {
	id := c.Param("id")
	if !graph.ValidID(id) {
		return "", response.BadRequest("id", "id must be a uuid")
	}
	return strings.ToLower(id), nil
}

// QueryInt reads an integer query parameter in [lo, hi]; def when absent
// or empty.
func QueryInt(c echo.Context, name string, def, lo, hi int64) (int64, error) {
	raw := c.QueryParam(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, response.BadRequest(name, "%s must be an integer from %d to %d", name, lo, hi)
	}
	return n, nil
}

// Cursors are opaque to clients: base64url of "<created_at RFC 3339 nano>
// <task id>", the last task of the previous page.

// EncodeCursor is the cursor of the page after c (nil: none).
func EncodeCursor(c *postgres.TaskCursor) *string {
	if c == nil {
		return nil
	}
	s := base64.RawURLEncoding.EncodeToString([]byte(c.CreatedAt.UTC().Format(time.RFC3339Nano) + " " + c.ID))
	return &s
}

// DecodeCursor reads a cursor EncodeCursor handed out (nil for "").
func DecodeCursor(s string) (*postgres.TaskCursor, error) {
	if s == "" {
		return nil, nil
	}
	bad := response.BadRequest("cursor", "cursor is not one this server handed out (use next_cursor of the previous page)")
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	at, id, ok := strings.Cut(string(raw), " ")
	if !ok || !graph.ValidID(id) {
		return nil, bad
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return nil, bad
	}
	return &postgres.TaskCursor{CreatedAt: t, ID: strings.ToLower(id)}, nil
}

// TaskStatus reads the status filter: empty or one of the task statuses.
func TaskStatus(s string) (graph.TaskStatus, error) {
	switch st := graph.TaskStatus(s); st {
	case "", graph.StatusQueued, graph.StatusRunning, graph.StatusWaiting, graph.StatusSucceeded, graph.StatusFailed,
		graph.StatusCancelled:
		return st, nil
	}
	return "", response.BadRequest("status", "status must be one of queued, running, waiting, succeeded, failed, cancelled")
}
