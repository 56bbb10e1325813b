package api

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

func interruptParam(c echo.Context) (string, error) {
	id := c.Param("id")
	if !graph.ValidID(id) {
		return "", response.BadRequest("id", "id must be a uuid")
	}
	return strings.ToLower(id), nil
}

// interruptOf reads the interrupt of the path with its task, checking the
// principal may see the task.
func (h *Handler) interruptOf(c echo.Context) (*graph.Task, *graph.Interrupt, error) {
	iid, err := interruptParam(c)
	if err != nil {
		return nil, nil, err
	}
	ctx := c.Request().Context()
	itr, err := h.store.Interrupt(ctx, iid)
	if err != nil {
		return nil, nil, err
	}
	t, err := h.store.Task(ctx, itr.TaskID)
	if err != nil {
		return nil, nil, err
	}
	if err := request.MayRead(request.Principal(c), t); err != nil {
		return nil, nil, err
	}
	return t, itr, nil
}

// renderInterrupt writes one interrupt with its task and approvals.
func (h *Handler) renderInterrupt(c echo.Context, status int, t *graph.Task, itr *graph.Interrupt) error {
	out := interruptJSON(itr)
	out.Task = &TaskRef{ID: t.ID, Title: t.Title, Workflow: t.Workflow}
	if itr.Status == graph.InterruptPending {
		var err error
		if out.Approvals, err = h.approvalsOf(c.Request().Context(), t, itr); err != nil {
			return err
		}
	}
	return response.JSON(c, status, out)
}

// getInterrupt: GET /api/v1/interrupts/:iid → Interrupt (with its task).
func (h *Handler) getInterrupt(c echo.Context) error {
	t, itr, err := h.interruptOf(c)
	if err != nil {
		return err
	}
	return h.renderInterrupt(c, http.StatusOK, t, itr)
}

type claimRequest struct {
	TakeOver bool   `json:"take_over"`
	Reason   string `json:"reason"`
}

// claimInterrupt: POST /api/v1/interrupts/:iid/claim, body {} or none →
// 200 Interrupt claimed by the principal (renewed when they hold it); 409
// naming the holder while someone else holds it; 403 for whoever may not
// decide it. {"take_over": true, "reason": "…"}: an admin takes it from
// its holder (audited as interrupt.taken_over).
func (h *Handler) claimInterrupt(c echo.Context) error {
	var req claimRequest
	if c.Request().ContentLength != 0 {
		if err := request.DecodeJSON(c, &req); err != nil {
			if ae, ok := err.(*response.Error); !ok || !strings.Contains(ae.Message, "empty") {
				return err
			}
		}
	}
	req.Reason = strings.TrimSpace(req.Reason)
	t, itr, err := h.interruptOf(c)
	if err != nil {
		return err
	}
	who := request.Principal(c)
	if err := h.decider.MayDecide(who, t, itr); err != nil {
		return err
	}
	if req.TakeOver {
		if !who.Can(auth.RoleAdmin) {
			return &auth.ForbiddenError{Reason: "taking over a claim needs the admin role; " + who.Name + " is " + who.Role.Article()}
		}
		if req.Reason == "" {
			return response.BadRequest("reason", "reason is required to take over a claim (it is audited)")
		}
	}
	got, err := h.store.ClaimInterrupt(c.Request().Context(), postgres.ClaimRequest{InterruptID: itr.ID, Who: who.Name,
		TTL: h.claimTTL, TakeOver: req.TakeOver, Reason: req.Reason})
	if err != nil {
		return err
	}
	return h.renderInterrupt(c, http.StatusOK, t, got)
}

// releaseInterrupt: DELETE /api/v1/interrupts/:iid/claim by the holder
// or an admin → 200 Interrupt; by anyone else 403.
func (h *Handler) releaseInterrupt(c echo.Context) error {
	t, itr, err := h.interruptOf(c)
	if err != nil {
		return err
	}
	who := request.Principal(c)
	got, err := h.store.ReleaseInterrupt(c.Request().Context(), itr.ID, who.Name, who.Can(auth.RoleAdmin))
	if err != nil {
		return err
	}
	return h.renderInterrupt(c, http.StatusOK, t, got)
}
