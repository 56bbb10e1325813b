package request

import (
	"errors"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/analytics"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// Limits of the audit trail.
const (
	defaultAuditLimit = 100
	maxAuditLimit     = 1000
)

// AnalyticsFilter reads since, until, kind and workflow of a request.
func AnalyticsFilter(c echo.Context) (analytics.Filter, error) {
	q := c.QueryParams()
	f, err := analytics.ParseFilter(strings.TrimSpace(q.Get("since")), strings.TrimSpace(q.Get("until")),
		strings.TrimSpace(q.Get("kind")), strings.TrimSpace(q.Get("workflow")), time.Now())
	var fe *analytics.FieldError
	if errors.As(err, &fe) {
		return f, response.BadRequest(fe.Field, "%s %s", fe.Field, fe.Message)
	}
	return f, err
}

// AuditFilter reads ?actor=&kind=&since=&until=&limit= (times RFC 3339).
func AuditFilter(c echo.Context) (auth.AuditFilter, error) {
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
	limit, err := QueryInt(c, "limit", defaultAuditLimit, 1, maxAuditLimit)
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
