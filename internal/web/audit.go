package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// Limits of the audit trail.
const (
	defaultAuditLimit = 100
	maxAuditLimit     = 1000
)

// AuditEvent is the JSON of an audit event: an administrative action
// (users, tokens, sessions, refused decisions) or an action on a task
// (task_id and seq set: created, approved, decided, cancelled, retried).
type AuditEvent struct {
	At      string          `json:"at"`
	Actor   string          `json:"actor"`
	Kind    string          `json:"kind"`
	Subject string          `json:"subject"`
	TaskID  string          `json:"task_id,omitempty"`
	Seq     int64           `json:"seq,omitempty"`
	Data    json.RawMessage `json:"data"`
}

// auditFilter reads ?actor=&kind=&since=&until=&limit= (times RFC 3339).
func auditFilter(c echo.Context) (auth.AuditFilter, error) {
	f := auth.AuditFilter{Actor: strings.TrimSpace(c.QueryParam("actor")), Kind: strings.TrimSpace(c.QueryParam("kind"))}
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		raw := strings.TrimSpace(c.QueryParam(p.name))
		if raw == "" {
			continue
		}
		t, err := parseTime(raw)
		if err != nil {
			return f, response.BadRequest(p.name, "%s must be a time such as 2026-01-02T15:04:05Z (RFC 3339) or 2026-01-02", p.name)
		}
		*p.t = t
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		return f, response.BadRequest("until", "until must be after since")
	}
	limit, err := request.QueryInt(c, "limit", defaultAuditLimit, 1, maxAuditLimit)
	if err != nil {
		return f, err
	}
	f.Limit = int(limit)
	return f, nil
}

// parseTime reads RFC 3339, a local date-time as a form's
// datetime-local input sends it (UTC), or a date.
func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	_, err := time.Parse(time.RFC3339Nano, s)
	return time.Time{}, err
}

func auditJSON(e *auth.AuditEvent) AuditEvent {
	return AuditEvent{At: stamp(e.At), Actor: e.Actor, Kind: e.Kind, Subject: e.Subject, TaskID: e.TaskID, Seq: e.Seq,
		Data: orObject(e.Data)}
}

// auditAPI: GET /api/v1/audit?actor=&kind=&since=&until=&limit= → the
// audit trail, newest first (admin).
func (s *Server) auditAPI(c echo.Context) error {
	f, err := auditFilter(c)
	if err != nil {
		return err
	}
	evs, err := s.auth.AuditTrail(c.Request().Context(), f)
	if err != nil {
		return err
	}
	out := struct {
		Events []AuditEvent `json:"events"`
	}{Events: make([]AuditEvent, 0, len(evs))}
	for i := range evs {
		out.Events = append(out.Events, auditJSON(&evs[i]))
	}
	return response.JSON(c, http.StatusOK, out)
}
