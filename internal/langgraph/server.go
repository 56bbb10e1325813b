// Package langgraph speaks the LangGraph Agent Server API (SPEC §14) under
// /langgraph, so that the official SDKs and LangChain's Agent Inbox drive
// Gatehouse unchanged. It is a translation, not a second engine: an
// assistant is a workflow, a thread is a task and its metadata, a run is
// one stretch of the task until it waits, ends or fails, and every decision
// goes through the one auth.Decider with the native API's policy.
//
// It declares its own Store and error body; it must not import internal/web
// nor its handler packages (the server mounts it).
package langgraph

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/pgtext"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// Prefix is where the API is mounted; the SDK's apiUrl is <base>/langgraph.
const Prefix = "/langgraph"

// maxBody bounds a request body, as on the native API.
const maxBody = 1 << 20

// defaultHeartbeat is the SSE comment period (SPEC §14: every 5 s).
const defaultHeartbeat = 5 * time.Second

// Deps is what the API needs: the native API's engine, store, hub,
// authentication and Decider.
type Deps struct {
	Engine  *graph.Engine
	Store   *postgres.Store
	Hub     *live.Hub
	Auth    *auth.Service
	Decider *auth.Decider
	// Wake is the native server's (web.Deps): called after a task became
	// runnable here other than by a decision (the Decider wakes for its
	// own).
	Wake func()
	// CORSOrigins are the browser origins allowed to call (exact matches).
	CORSOrigins []string
	// Closing ends open streams when closed (server shutdown): the clients
	// reconnect with Last-Event-ID, to this replica or another.
	Closing   <-chan struct{}
	Heartbeat time.Duration
	Logger    *slog.Logger
	Version   string
}

// API serves /langgraph.
type API struct {
	engine    *graph.Engine
	store     *postgres.Store
	hub       *live.Hub
	auth      *auth.Service
	decider   *auth.Decider
	wake      func()
	origins   []string
	closing   <-chan struct{}
	heartbeat time.Duration
	log       *slog.Logger
	version   string
	started   time.Time
	// assistants are the workflows as assistants, in the engine's order;
	// assistantsJSON maps each workflow name to its assistant id (threads
	// of tasks started elsewhere carry it in their metadata).
	assistants     []assistant
	assistantsJSON []byte
}

// New returns the API.
func New(d Deps) *API {
	a := &API{engine: d.Engine, store: d.Store, hub: d.Hub, auth: d.Auth, decider: d.Decider, wake: d.Wake,
		origins: d.CORSOrigins, closing: d.Closing, heartbeat: d.Heartbeat, log: d.Logger,
		version: d.Version, started: time.Now().UTC()}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.heartbeat <= 0 {
		a.heartbeat = defaultHeartbeat
	}
	if a.closing == nil {
		a.closing = make(chan struct{})
	}
	a.assistants, a.assistantsJSON = assistantsOf(d.Engine, a.started)
	return a
}

// Owns reports whether path is under /langgraph.
func Owns(path string) bool {
	return path == Prefix || strings.HasPrefix(path, Prefix+"/")
}

// Register adds the routes to e.
func (a *API) Register(e *echo.Echo) {
	g := e.Group(Prefix)
	g.GET("/ok", a.ok)
	g.GET("/info", a.info)
	g.POST("/assistants/search", a.searchAssistants)
	g.GET("/assistants/:assistant_id", a.getAssistant)
	g.POST("/threads", a.createThread)
	g.POST("/threads/search", a.searchThreads)
	g.GET("/threads/:thread_id", a.getThread)
	g.GET("/threads/:thread_id/state", a.getState)
	g.POST("/threads/:thread_id/state", a.updateState)
	g.POST("/threads/:thread_id/history", a.history)
	g.GET("/threads/:thread_id/history", a.history)
	g.POST("/threads/:thread_id/runs", a.createRun)
	g.POST("/threads/:thread_id/runs/stream", a.streamRun)
	g.POST("/threads/:thread_id/runs/wait", a.waitRun)
	g.GET("/threads/:thread_id/runs", a.listRuns)
	g.GET("/threads/:thread_id/runs/:run_id", a.getRun)
	g.GET("/threads/:thread_id/runs/:run_id/join", a.joinRun)
	g.GET("/threads/:thread_id/runs/:run_id/stream", a.joinStream)
	g.POST("/threads/:thread_id/runs/:run_id/cancel", a.cancelRun)
}

// principalKey holds the authenticated principal in the echo context.
const principalKey = "gatehouse.langgraph.principal"

func principalOf(c echo.Context) auth.Principal {
	p, _ := c.Get(principalKey).(auth.Principal)
	return p
}

// Pre runs before routing for every request under /langgraph: CORS (a
// preflight is answered here), then authentication by x-api-key or bearer
// token (/ok and /info are open), then the query string (a parameter with
// text PostgreSQL cannot store is 400 naming it: pgtext), then the body
// limit. Other paths pass.
func (a *API) Pre(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if !Owns(r.URL.Path) {
			return next(c)
		}
		if a.cors(c) {
			return nil
		}
		// The desk's security headers would tell a browser client's
		// fetch nothing useful; the API answers JSON and event streams.
		c.Response().Header().Del("Content-Security-Policy")
		p := strings.TrimPrefix(r.URL.Path, Prefix)
		if p != "/ok" && p != "/info" {
			if err := a.authenticate(c); err != nil {
				return err
			}
		}
		if name, problem := pgtext.Values(c.QueryParams()); problem != "" {
			if name == "" {
				return badText("", "query string has a parameter "+strings.TrimPrefix(problem, "has a "))
			}
			return badText(name, problem)
		}
		if r.ContentLength > maxBody {
			return &apiError{Status: http.StatusRequestEntityTooLarge, Detail: "request body is larger than 1048576 bytes"}
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(c.Response(), r.Body, maxBody)
		}
		return next(c)
	}
}

// authenticate accepts x-api-key: <token> (the SDK's) or Authorization:
// Bearer <token>, API tokens and the bootstrap token alike.
func (a *API) authenticate(c echo.Context) error {
	r := c.Request()
	token := strings.TrimSpace(r.Header.Get("X-Api-Key"))
	if token == "" {
		if h := r.Header.Get(echo.HeaderAuthorization); h != "" {
			scheme, t, ok := strings.Cut(h, " ")
			if ok && strings.EqualFold(scheme, "Bearer") {
				token = strings.TrimSpace(t)
			}
		}
	}
	if token == "" {
		return &apiError{Status: http.StatusUnauthorized, Detail: "missing API key: send x-api-key: <Gatehouse API token>"}
	}
	p, err := a.auth.Bearer(r.Context(), token)
	if errors.Is(err, auth.ErrUnauthenticated) {
		return &apiError{Status: http.StatusUnauthorized, Detail: "invalid API key"}
	}
	if err != nil {
		return err
	}
	c.Set(principalKey, p)
	return nil
}

// need refuses a principal below role with 403.
func need(c echo.Context, role auth.Role, doing string) error {
	p := principalOf(c)
	if p.Can(role) {
		return nil
	}
	return &apiError{Status: http.StatusForbidden, Detail: doing + " needs the " + string(role) + " role; " + p.Name + " is " + p.Role.Article()}
}

// cors applies SPEC §14's CORS to the request; true when it answered a
// preflight. A foreign origin gets no CORS headers at all.
func (a *API) cors(c echo.Context) bool {
	r := c.Request()
	origin := r.Header.Get("Origin")
	allowed := origin != "" && slices.Contains(a.origins, origin)
	h := c.Response().Header()
	if origin != "" {
		h.Add("Vary", "Origin")
	}
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if !allowed {
		if preflight {
			// Nothing for a foreign origin: the browser refuses the call.
			c.Response().WriteHeader(http.StatusNoContent)
			return true
		}
		return false
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Credentials", "true")
	if !preflight {
		h.Set("Access-Control-Expose-Headers", "Content-Location, Location, X-Pagination-Next, X-Pagination-Total")
		return false
	}
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "content-type, x-api-key, authorization, last-event-id")
	h.Set("Access-Control-Max-Age", "600")
	if strings.EqualFold(r.Header.Get("Access-Control-Request-Private-Network"), "true") {
		h.Set("Access-Control-Allow-Private-Network", "true")
	}
	c.Response().WriteHeader(http.StatusNoContent)
	return true
}

func (a *API) ok(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]bool{"ok": true})
}

func (a *API) info(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{
		"version":              a.version,
		"langgraph_js_version": nil,
		"flags":                map[string]bool{"assistants": true, "crons": false, "langsmith": false, "langsmith_tracing_replicas": false},
		"host":                 map[string]any{"kind": "gatehouse", "project_id": nil, "revision_id": nil, "tenant_id": nil},
		"metadata":             map[string]any{"server": "gatehouse"},
	})
}

// wakeRunner hands work to this replica's runner (NOTIFY tells others).
func (a *API) wakeRunner() {
	if a.wake != nil {
		a.wake()
	}
}

// waitCtx is the request's context, ended also by server shutdown.
func (a *API) waitCtx(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-a.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
