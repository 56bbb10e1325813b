package desk

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/views"
)

// dueIn says how long is left for people: "45 s", "12 min",
// "2 h 59 min" (hours alone would round 2 h 59 min down to "2 h"), "14 h",
// "2 d", or "overdue".
func dueIn(d time.Duration) string {
	switch {
	case d <= 0:
		return "overdue"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + " s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + " min"
	case d < 10*time.Hour:
		h, m := int(d.Hours()), int(d.Minutes())%60
		if m == 0 {
			return strconv.Itoa(h) + " h"
		}
		return strconv.Itoa(h) + " h " + strconv.Itoa(m) + " min"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + " h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + " d"
}

// claimForm: POST /tasks/:id/claim — op=claim|release|take_over (with a
// reason) on the interrupt_id. An htmx submit gets the decision area back
// (a refusal says why in it); the other pages see the claim live.
func (d *desk) claimForm(c echo.Context) error {
	id, err := request.PathID(c)
	if err != nil {
		return response.NotFound("task")
	}
	ctx := c.Request().Context()
	itrID := strings.TrimSpace(c.FormValue("interrupt_id"))
	op := strings.TrimSpace(c.FormValue("op"))
	who := userOf(ctx)
	t, itr, err := d.s.store.DecisionSubject(ctx, id, itrID)
	if err != nil {
		return err
	}
	if err := request.MayRead(who.p, t); err != nil {
		return err
	}
	if itr == nil || itr.TaskID != t.ID {
		return response.NotFound("interrupt")
	}
	var opErr error
	switch op {
	case "claim", "take_over":
		if err := d.s.decider.MayDecide(who.p, t, itr); err != nil {
			opErr = err
			break
		}
		req := postgres.ClaimRequest{InterruptID: itr.ID, Who: who.p.Name, TTL: d.s.claimTTL}
		if op == "take_over" {
			req.TakeOver, req.Reason = true, strings.TrimSpace(c.FormValue("reason"))
			switch {
			case !who.p.Can(auth.RoleAdmin):
				opErr = &auth.ForbiddenError{Reason: "taking over a claim needs the admin role"}
			case req.Reason == "":
				opErr = response.BadRequest("reason", "say why you take the claim over (it is audited)")
			}
			if opErr != nil {
				break
			}
		}
		_, opErr = d.s.store.ClaimInterrupt(ctx, req)
	case "release":
		_, opErr = d.s.store.ReleaseInterrupt(ctx, itr.ID, who.p.Name, who.p.Can(auth.RoleAdmin))
	default:
		return response.BadRequest("op", "op must be claim, release or take_over")
	}
	if !request.IsHX(c) {
		if opErr != nil {
			return opErr
		}
		return c.Redirect(http.StatusSeeOther, "/tasks/"+id+"#decide")
	}
	td, err := d.loadTask(ctx, id)
	if err != nil {
		return err
	}
	v := d.interruptView(ctx, td, who)
	status := http.StatusOK
	if opErr != nil {
		e := response.Of(opErr)
		status = e.Status
		var cf *graph.ConflictError
		msg := e.Message
		if errors.As(opErr, &cf) && cf.Holder != "" {
			msg = "Claimed by " + cf.Holder + " first."
		}
		if v.Pending != nil {
			v.Pending.Errors[""] = msg
		}
	}
	return response.Page(c, status, views.InterruptArea(v, false))
}
