package api

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
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

func auditJSON(e *auth.AuditEvent) AuditEvent {
	return AuditEvent{At: stamp(e.At), Actor: e.Actor, Kind: e.Kind, Subject: e.Subject, TaskID: e.TaskID, Seq: e.Seq,
		Data: orObject(e.Data)}
}

// auditAPI: GET /api/v1/audit?actor=&kind=&since=&until=&limit= → the
// audit trail, newest first (admin).
func (h *Handler) auditAPI(c echo.Context) error {
	f, err := request.AuditFilter(c)
	if err != nil {
		return err
	}
	evs, err := h.auth.AuditTrail(c.Request().Context(), f)
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
