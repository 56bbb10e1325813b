package request

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/pgtext"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// PostgreSQL stores no U+0000 and no invalid UTF-8 in text or jsonb: such
// input is refused at the door, 400 naming the field, before anything is
// changed (LESSONS: "found with hostile text"). DecodeJSON checks every
// JSON body; CheckForm every form a page posts; CheckURL every query
// string and path parameter. The check itself is pgtext's, which the channels outside
// internal/web (LangGraph, MCP) use too.

// TextError is the 400 of a field whose text cannot be stored.
func TextError(field, problem string) error {
	if field == "" {
		return response.BadRequest("", "request body %s", problem)
	}
	return response.BadRequest(field, "%s %s", field, problem)
}

// checkJSONText refuses a JSON document with a string (key or value) that
// cannot be stored, naming its field ("input.description", "items[2]").
// body must be valid JSON.
func checkJSONText(body []byte) error {
	if field, problem := pgtext.JSON(body); problem != "" {
		return TextError(field, problem)
	}
	return nil
}

// CheckForm refuses a posted URL-encoded form any of whose values or
// names cannot be stored: 400 naming the first such field, in name order.
// Nothing has been read by the handler yet. A multipart form is left to
// its handler, which reads it with its own limit and then calls
// CheckValues.
func CheckForm(c echo.Context) error {
	r := c.Request()
	if r.Method != http.MethodPost || strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
		return nil
	}
	var maxErr *http.MaxBytesError
	if err := r.ParseForm(); errors.As(err, &maxErr) {
		return response.TooLarge()
	}
	return CheckValues(r.PostForm)
}

// CheckValues is CheckForm's check of a form's values, for a handler that
// parsed its form itself.
func CheckValues(values url.Values) error {
	if name, problem := pgtext.Values(values); problem != "" {
		if name == "" {
			return TextError("", "has a field "+strings.TrimPrefix(problem, "has a "))
		}
		return TextError(name, problem)
	}
	return nil
}

// CheckURL refuses a request whose query string has a parameter (name or
// value) or whose route has a path parameter that cannot be stored or
// compared — %00, %FF — 400 naming the parameter, before a handler reads
// it: a filter or a search term with such text would otherwise reach
// PostgreSQL and come back as a 500. (Before routing there are no path
// parameters yet: the query alone is checked.)
func CheckURL(c echo.Context) error {
	for i, name := range c.ParamNames() {
		if i < len(c.ParamValues()) {
			if problem := pgtext.Problem(c.ParamValues()[i]); problem != "" {
				return response.BadRequest(name, "%s %s", name, problem)
			}
		}
	}
	name, problem := pgtext.Values(c.QueryParams())
	switch {
	case problem == "":
		return nil
	case name == "":
		return response.BadRequest("", "the query string has a parameter %s", strings.TrimPrefix(problem, "has a "))
	default:
		return response.BadRequest(name, "%s %s", name, problem)
	}
}
