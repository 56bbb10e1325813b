package web

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/langgraph"
	"github.com/gatehousehq/gatehouse/internal/web/api"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// logRequests logs every request once it is answered: method, path, route,
// status and duration; for errors the cause under "error" (5xx at level
// error with the details the client never sees).
func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err) // writes the error response
		}
		r := c.Request()
		status := c.Response().Status
		attrs := []any{"method", r.Method, "path", request.LogPath(r), "route", c.Path(), "status", status,
			"duration", time.Since(start)}
		level := slog.LevelInfo
		if err != nil && langgraph.Owns(r.URL.Path) {
			if st, _ := langgraph.ErrorOf(err); st >= 500 {
				level = slog.LevelError
			}
			attrs = append(attrs, "error", err)
		} else if err != nil {
			e := response.Of(err)
			cause := error(e)
			if e.Err != nil {
				cause = e.Err
			}
			attrs = append(attrs, "code", e.Code, "error", cause)
			if e.Status >= 500 && e.Status != response.StatusClientGone {
				level = slog.LevelError
			}
		}
		s.log.Log(r.Context(), level, "http request", attrs...)
		return nil
	}
}

// recoverPanics turns a handler's panic into a 500 (logged with its stack).
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		return next(c)
	}
}

// onAPI applies mw to requests under /api/v1 only.
func onAPI(mw echo.MiddlewareFunc) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		wrapped := mw(next)
		return func(c echo.Context) error {
			if p := c.Request().URL.Path; p == api.Prefix || strings.HasPrefix(p, api.Prefix+"/") {
				return wrapped(c)
			}
			return next(c)
		}
	}
}

// checkQuery refuses an API request whose query string has text
// PostgreSQL cannot store (request.CheckURL: 400 naming the parameter),
// after authentication and before any handler reads a filter. The desk
// checks its own (an HTML page), /langgraph its own ({"detail"}).
func checkQuery(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := request.CheckURL(c); err != nil {
			return err
		}
		return next(c)
	}
}

// limitBody refuses bodies over response.MaxBody: at once when Content-Length says
// so, otherwise when the reader crosses the limit (decodeBody then answers
// 413).
func limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength > response.MaxBody {
			return response.TooLarge()
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(c.Response(), r.Body, response.MaxBody)
		}
		return next(c)
	}
}
