package api

// Approval requests from any agent (SPEC §16): /api/v1/requests, over
// package requests (the MCP server uses the same service).

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/requests"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// CreateRequestResponse is a Request with its callback secret, in the 201
// (and to the same principal on an idempotent repeat) only.
type CreateRequestResponse struct {
	requests.Request
	CallbackSecret string `json:"callback_secret,omitempty"`
}

// createRequest: POST /api/v1/requests → 201 Request; 200 for an
// idempotent repeat; 409 for a key reused with another body.
func (h *Handler) createRequest(c echo.Context) error {
	var in requests.CreateInput
	if err := request.DecodeJSON(c, &in); err != nil {
		return err
	}
	r, created, secret, err := h.requests.Create(c.Request().Context(), request.Principal(c), in, requests.ViaAPI)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.Response().Header().Set(echo.HeaderLocation, Prefix+"/requests/"+r.ID)
	return c.JSON(status, CreateRequestResponse{Request: r, CallbackSecret: secret})
}

// getRequest: GET /api/v1/requests/:id?wait=30s → 200 Request: at once
// when it is no longer pending, else within 100 ms of its decision, or at
// wait (at most 60 s).
func (h *Handler) getRequest(c echo.Context) error {
	var wait time.Duration
	if raw := strings.TrimSpace(c.QueryParam("wait")); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d < 0 || d > requests.MaxWait {
			return response.BadRequest("wait", "wait must be a duration from 0s to 60s (e.g. 30s)")
		}
		wait = d
	}
	r, err := h.requests.Wait(c.Request().Context(), c.Param("id"), wait)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

// listRequests: GET /api/v1/requests?status=&kind=&limit=&cursor= →
// {"requests":[Request],"next_cursor"} newest first.
func (h *Handler) listRequests(c echo.Context) error {
	limit, err := request.QueryInt(c, "limit", 50, 1, 200)
	if err != nil {
		return err
	}
	page, err := h.requests.List(c.Request().Context(), requests.ListFilter{Status: c.QueryParam("status"),
		Kind: c.QueryParam("kind"), Limit: int(limit), Cursor: c.QueryParam("cursor")})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

// cancelRequest: POST /api/v1/requests/:id/cancel (its creator or an
// admin) → 200 Request, cancelled; 409 when no longer pending.
func (h *Handler) cancelRequest(c echo.Context) error {
	r, err := h.requests.Cancel(c.Request().Context(), request.Principal(c), c.Param("id"), requests.ViaAPI)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}
