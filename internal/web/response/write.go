package response

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
)

// JSON renders v first and writes it with the status only once it
// rendered: a marshalling error never leaves half a body behind a 200.
func JSON(c echo.Context, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("render %T: %w", v, err)
	}
	b = append(b, '\n')
	return c.JSONBlob(status, b)
}

// Page renders comp into a buffer, then writes it with status: a render
// error never leaves half a page behind a 200. Pages are never cached.
func Page(c echo.Context, status int, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(c.Request().Context(), &buf); err != nil {
		return fmt.Errorf("render page: %w", err)
	}
	// The security headers (the server's) are on every response.
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.HTMLBlob(status, buf.Bytes())
}

// ContentSecurityPolicy allows this origin only: no inline script or
// style, no eval, no frames. The pages are built for it (htmx runs with
// allowEval off and its injected styles off).
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
