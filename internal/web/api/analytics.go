package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// analyticsAPI: GET /api/v1/analytics?since=&until=&kind=&workflow=&format=
// — SPEC §13, as JSON or (format=csv) one CSV row per kind.
func (h *Handler) analyticsAPI(c echo.Context) error {
	format := c.QueryParam("format")
	if format != "" && format != "json" && format != "csv" {
		return response.BadRequest("format", "format must be json or csv")
	}
	f, err := request.AnalyticsFilter(c)
	if err != nil {
		return err
	}
	r, err := h.store.Analytics(c.Request().Context(), f)
	if err != nil {
		return err
	}
	if format == "csv" {
		b, err := r.CSV()
		if err != nil {
			return err
		}
		name := "gatehouse-analytics-" + f.Since.Format(time.DateOnly) + "-" +
			f.Until.AddDate(0, 0, -1).Format(time.DateOnly) + ".csv"
		c.Response().Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
		return c.Blob(http.StatusOK, "text/csv; charset=utf-8", b)
	}
	return response.JSON(c, http.StatusOK, r)
}
