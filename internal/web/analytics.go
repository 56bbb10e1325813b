package web

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/analytics"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// analyticsFilter reads since, until, kind and workflow of a request.
func analyticsFilter(c echo.Context) (analytics.Filter, error) {
	q := c.QueryParams()
	f, err := analytics.ParseFilter(strings.TrimSpace(q.Get("since")), strings.TrimSpace(q.Get("until")),
		strings.TrimSpace(q.Get("kind")), strings.TrimSpace(q.Get("workflow")), time.Now())
	var fe *analytics.FieldError
	if errors.As(err, &fe) {
		return f, response.BadRequest(fe.Field, "%s %s", fe.Field, fe.Message)
	}
	return f, err
}

// analyticsAPI: GET /api/v1/analytics?since=&until=&kind=&workflow=&format=
// — SPEC §13, as JSON or (format=csv) one CSV row per kind.
func (s *Server) analyticsAPI(c echo.Context) error {
	format := c.QueryParam("format")
	if format != "" && format != "json" && format != "csv" {
		return response.BadRequest("format", "format must be json or csv")
	}
	f, err := analyticsFilter(c)
	if err != nil {
		return err
	}
	r, err := s.store.Analytics(c.Request().Context(), f)
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
