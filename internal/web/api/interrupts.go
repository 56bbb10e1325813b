package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
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
	// PayloadSHA256 is what the decider saw (SPEC §11): malformed 400,
	// not the interrupt's 409.
	PayloadSHA256 string `json:"payload_sha256"`
}

// decide: POST /api/v1/tasks/:id/decisions → 202 Task. The decision is
// the principal's, under the approval policy (auth.Decider): refused with
// 403 and the reason (an approver of other kinds, the creator of its own
// merge, the same approver twice); on a kind that needs several approvers
// an approval short of the number leaves the interrupt pending, its
// approvals saying "1 of 2 approvals". The decision is committed before
// the answer is written; the task runs on a worker.
func (h *Handler) decide(c echo.Context) error {
	id, err := request.PathID(c)
	if err != nil {
		return err
	}
	req, err := decodeDecision(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	who := request.Principal(c)
	// The task and the interrupt named, in one statement: the Decider
	// checks and records on them without reading either again.
	t, itr, err := h.store.DecisionSubject(ctx, id, req.InterruptID)
	if err != nil {
		return err
	}
	if err := request.MayRead(who, t); err != nil {
		return err
	}
	out, err := h.decider.DecideOn(ctx, who, auth.Subject{Task: t, Interrupt: itr}, graph.DecisionInput{
		InterruptID: req.InterruptID, Action: req.Action, Feedback: req.Feedback, Value: req.Value,
		PayloadSHA256: req.PayloadSHA256})
	if errors.Is(err, graph.ErrInterruptNotFound) {
		// Say which is missing: the task or its interrupt.
		if _, terr := h.store.Task(ctx, id); terr != nil {
			return terr
		}
	}
	if err != nil {
		return err
	}
	if out.Pending() {
		// One approval of several: the interrupt waits on with one more
		// approver, and the task moved too (its approval event).
		return h.renderTask(c, http.StatusAccepted, id)
	}
	return response.JSON(c, http.StatusAccepted, h.taskJSON(decidedTask(t, out.Decision), nil))
}

// leased reports a decision that leased its task to a worker here.
func leased(d *graph.Decision) bool {
	return d != nil && d.Lease != nil && d.Lease.Fence != 0
}

// decidedTask is t as the decision d left it, so that the answer needs no
// read of its own: DecisionRecord makes the task queued (running, when it
// leased it to a worker here) with updated_at = now(), the decision's own
// time (one statement), and resolves the one interrupt it waited on. The rest of a waiting task stays as read: the
// only other change it can meet, a cancel, refuses the decision. A worker
// may have claimed the task since; the answer is what the decision left.
func decidedTask(t *graph.Task, d *graph.Decision) *graph.Task {
	after := *t
	after.Status = graph.StatusQueued
	if leased(d) {
		after.Status, after.Fence = graph.StatusRunning, d.Lease.Fence
	}
	after.UpdatedAt = d.DecidedAt
	return &after
}

// decodeDecision reads a decision request: one JSON object of the
// decisionRequest fields (400 naming what is wrong, 413 over the limit),
// trimmed, with a null value as none.
func decodeDecision(c echo.Context) (decisionRequest, error) {
	var req decisionRequest
	if err := request.DecodeJSON(c, &req); err != nil {
		return req, err
	}
	if request.IsNull(req.Value) {
		req.Value = nil
	}
	req.InterruptID, req.Action = strings.TrimSpace(req.InterruptID), strings.TrimSpace(req.Action)
	req.PayloadSHA256 = strings.TrimSpace(req.PayloadSHA256)
	return req, nil
}

// listDecisions: GET /api/v1/tasks/:id/decisions → oldest first.
func (h *Handler) listDecisions(c echo.Context) error {
	return taskItems(h, c, "decisions", h.store.Decisions, decisionJSON)
}

// listInterrupts: GET /api/v1/interrupts?status=pending&kind=&limit= → the
// inbox, oldest first, each with its task.
func (h *Handler) listInterrupts(c echo.Context) error {
	status := c.QueryParam("status")
	switch status {
	case "":
		status = graph.InterruptPending
	case graph.InterruptPending, graph.InterruptResolved, graph.InterruptCancelled, graph.InterruptExpired:
	default:
		return response.BadRequest("status", "status must be one of pending, resolved, cancelled, expired")
	}
	limit, err := request.QueryInt(c, "limit", defaultInterruptLimit, 1, maxInterruptLimit)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	entries, err := h.store.ListInterrupts(ctx, postgres.InterruptFilter{Status: status,
		Kind: strings.TrimSpace(c.QueryParam("kind")), Limit: int(limit)})
	if err != nil {
		return err
	}
	out := struct {
		Interrupts []Interrupt `json:"interrupts"`
	}{Interrupts: make([]Interrupt, 0, len(entries))}
	who := request.Principal(c)
	for i := range entries {
		e := &entries[i]
		if !auth.MaySee(who, &graph.Task{ID: e.Task.ID, Title: e.Task.Title, Workflow: e.Task.Workflow}) {
			continue
		}
		itr := inboxJSON(e)
		if e.Interrupt.Status == graph.InterruptPending {
			if itr.Approvals, err = h.approvalsOf(ctx, nil, &e.Interrupt); err != nil {
				return err
			}
		}
		out.Interrupts = append(out.Interrupts, itr)
	}
	return response.JSON(c, http.StatusOK, out)
}
