package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// Limits of the inbox.
const (
	defaultInterruptLimit = 100
	maxInterruptLimit     = 500
)

type decisionRequest struct {
	InterruptID string          `json:"interrupt_id"`
	Action      string          `json:"action"`
	Feedback    string          `json:"feedback"`
	Value       json.RawMessage `json:"value"`
}

// decide: POST /api/v1/tasks/:id/decisions → 202 Task. The decision is
// committed before the answer is written; the task runs on a worker.
func (s *Server) decide(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var req decisionRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if isNull(req.Value) {
		req.Value = nil
	}
	ctx := c.Request().Context()
	_, err = s.engine.Decide(ctx, id, graph.DecisionInput{InterruptID: strings.TrimSpace(req.InterruptID),
		Action: strings.TrimSpace(req.Action), Feedback: req.Feedback, Value: req.Value, DecidedBy: actor})
	if errors.Is(err, graph.ErrInterruptNotFound) {
		// Say which is missing: the task or its interrupt.
		if _, terr := s.store.Task(ctx, id); terr != nil {
			return terr
		}
	}
	if err != nil {
		return err
	}
	s.wakeRunner()
	return s.renderTask(c, http.StatusAccepted, id)
}

// listDecisions: GET /api/v1/tasks/:id/decisions → oldest first.
func (s *Server) listDecisions(c echo.Context) error {
	t, err := s.taskOf(c)
	if err != nil {
		return err
	}
	ds, err := s.store.Decisions(c.Request().Context(), t.ID)
	if err != nil {
		return err
	}
	out := struct {
		Decisions []Decision `json:"decisions"`
	}{Decisions: make([]Decision, 0, len(ds))}
	for i := range ds {
		out.Decisions = append(out.Decisions, decisionJSON(&ds[i]))
	}
	return writeJSON(c, http.StatusOK, out)
}

// listInterrupts: GET /api/v1/interrupts?status=pending&kind=&limit= → the
// inbox, oldest first, each with its task.
func (s *Server) listInterrupts(c echo.Context) error {
	status := c.QueryParam("status")
	switch status {
	case "":
		status = graph.InterruptPending
	case graph.InterruptPending, graph.InterruptResolved, graph.InterruptCancelled:
	default:
		return badRequest("status", "status must be one of pending, resolved, cancelled")
	}
	limit, err := queryInt(c, "limit", defaultInterruptLimit, 1, maxInterruptLimit)
	if err != nil {
		return err
	}
	entries, err := s.store.ListInterrupts(c.Request().Context(), postgres.InterruptFilter{Status: status,
		Kind: strings.TrimSpace(c.QueryParam("kind")), Limit: int(limit)})
	if err != nil {
		return err
	}
	out := struct {
		Interrupts []Interrupt `json:"interrupts"`
	}{Interrupts: make([]Interrupt, 0, len(entries))}
	for i := range entries {
		out.Interrupts = append(out.Interrupts, inboxJSON(&entries[i]))
	}
	return writeJSON(c, http.StatusOK, out)
}
