// Package web is Gatehouse's HTTP server: echo, the middleware (request
// log, panics, security headers, body limits), authentication (bearer
// tokens, desk sessions), each route's least role, health, readiness and
// metrics. It mounts the rooms below it (web/api, web/desk, web/act,
// web/slack), the LangGraph API and the MCP server; the rooms never import
// it nor one another.
package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/langgraph"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/requests"
	"github.com/gatehousehq/gatehouse/internal/sso"
	"github.com/gatehousehq/gatehouse/internal/web/act"
	"github.com/gatehousehq/gatehouse/internal/web/api"
	"github.com/gatehousehq/gatehouse/internal/web/desk"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/internal/web/slack"
	"github.com/gatehousehq/gatehouse/internal/web/socket"
)

// Deps is what the server needs.
type Deps struct {
	Engine *graph.Engine
	Store  *postgres.Store
	Hub    *live.Hub
	// Wake is called after a task became runnable here (create, fork,
	// retry): the local runner's fast path. NOTIFY covers other replicas.
	// A decision's task is the Decider's to hand over (auth.WithWorker).
	// May be nil.
	Wake func()
	// Auth authenticates principals: bearer tokens and desk sessions. When
	// nil, one is made over Store with BootstrapToken (an admin token acting
	// as the principal "bootstrap") and the default session lifetimes.
	Auth           *auth.Service
	BootstrapToken string
	// Decider records people's decisions under the approval policy; nil:
	// one over Engine and Store with the default policy, waking through Wake.
	Decider *auth.Decider
	// TrustProxy believes X-Forwarded-Proto (Secure cookies) and
	// X-Forwarded-For (the client's address) from a reverse proxy.
	TrustProxy bool
	// Ready reports whether the server can serve (database reachable,
	// migrations applied); nil means always ready.
	Ready   func(ctx context.Context) error
	Logger  *slog.Logger
	Version string
	// Metrics, when set, is served at GET /metrics, open like /healthz.
	Metrics http.Handler
	// LLMProvider is the LLM_PROVIDER in use; "scripted" puts the offline
	// demo model's banner on the task pages of ModelWorkflows.
	LLMProvider string
	// ModelWorkflows names the workflows whose nodes call that model (the
	// built-in ones but request): a request's page has no model to speak of.
	ModelWorkflows []string
	// CORSOrigins are the browser origins allowed to call /langgraph
	// (GATEHOUSE_CORS_ORIGINS): Agent Inbox calls from the browser.
	CORSOrigins []string
	// SlackSigningSecret verifies Slack's callbacks at
	// /integrations/slack/actions ("": the route answers 404).
	SlackSigningSecret string
	// WebhookAllowPrivate lets /admin/webhooks add endpoints on loopback,
	// private and link-local addresses (GATEHOUSE_WEBHOOK_ALLOW_PRIVATE).
	WebhookAllowPrivate bool
	// ClaimTTL is how long a claim on an interrupt lasts unless renewed
	// (GATEHOUSE_CLAIM_TTL; 0: 30 minutes).
	ClaimTTL time.Duration
	// OutboxRetention is how long finished deliveries are kept
	// (GATEHOUSE_OUTBOX_RETENTION; 0: forever), as /admin/webhooks says.
	OutboxRetention time.Duration
	// Requests serves /api/v1/requests (SPEC §16); nil: one over Store,
	// Engine and Hub.
	Requests *requests.Service
	// SSO, when set, offers sign-in with the identity provider (SPEC §21)
	// at /auth/oidc/start and /auth/oidc/callback.
	SSO *sso.Client
}

// DefaultClaimTTL is how long a claim lasts when GATEHOUSE_CLAIM_TTL is
// not set.
const DefaultClaimTTL = 30 * time.Minute

// readyTimeout bounds the readiness check.
const readyTimeout = 3 * time.Second

// Server serves the API. Build it with New; serve Handler() yourself or
// call Start; stop with Shutdown.
type Server struct {
	engine  *graph.Engine
	store   *postgres.Store
	hub     *live.Hub
	wake    func()
	ready   func(ctx context.Context) error
	log     *slog.Logger
	version string

	auth       *auth.Service
	sso        *sso.Client
	decider    *auth.Decider
	requests   *requests.Service
	claimTTL   time.Duration
	trustProxy bool
	// roles is the least role of every route ("" public), by "METHOD path".
	roles map[string]auth.Role

	e *echo.Echo
	// sockets are the websockets of the event stream and the live pages.
	sockets *socket.Group

	mu      sync.Mutex
	httpSrv *http.Server
	closed  bool
	metrics http.Handler

	llmProvider    string
	modelWorkflows []string
	// lg is the LangGraph Agent Server API under /langgraph (SPEC §14).
	lg *langgraph.API

	webhookAllowPrivate bool
	outboxRetention     time.Duration
	// api serves /api/v1 (and MCP's tools through it).
	api *api.Handler
	// slack answers Slack's callbacks.
	slack *slack.Handler
	// desk serves the approval desk's pages.
	desk *desk.Handler
}

// New builds the server and its routes.
func New(d Deps) *Server {
	log := d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{engine: d.Engine, store: d.Store, hub: d.Hub, wake: d.Wake, ready: d.Ready, log: log, metrics: d.Metrics,
		version: d.Version, sockets: socket.NewGroup(), auth: d.Auth, sso: d.SSO, decider: d.Decider, trustProxy: d.TrustProxy,
		roles: map[string]auth.Role{}, llmProvider: d.LLMProvider, modelWorkflows: d.ModelWorkflows,
		webhookAllowPrivate: d.WebhookAllowPrivate, outboxRetention: d.OutboxRetention}
	if s.auth == nil {
		s.auth = auth.NewService(auth.Config{Store: d.Store, BootstrapToken: d.BootstrapToken,
			Logger: log.With("component", "auth")})
	}
	if s.decider == nil {
		s.decider = auth.NewDecider(d.Engine, d.Store, auth.DefaultPolicy(), log.With("component", "auth"),
			auth.WithWorker(auth.WakeWorker(d.Wake)), auth.WithDecisionCheck(requests.CheckDecision))
	}
	s.requests = d.Requests
	if s.requests == nil {
		rc := requests.Config{Store: d.Store, Engine: d.Engine, Wake: d.Wake, AllowPrivate: d.WebhookAllowPrivate,
			Logger: log.With("component", "requests")}
		if d.Hub != nil {
			rc.Events = d.Hub
		}
		s.requests = requests.NewService(rc)
	}
	s.claimTTL = d.ClaimTTL
	if s.claimTTL <= 0 {
		s.claimTTL = DefaultClaimTTL
	}

	s.slack = slack.New(slack.Deps{Store: d.Store, Decider: s.decider, SigningSecret: d.SlackSigningSecret,
		Logger: log.With("component", "slack")})
	s.lg = langgraph.New(langgraph.Deps{Engine: d.Engine, Store: d.Store, Hub: d.Hub, Auth: s.auth, Decider: s.decider,
		Wake: d.Wake, CORSOrigins: d.CORSOrigins, Closing: s.sockets.Closing(),
		Logger: log.With("component", "langgraph"), Version: d.Version})

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	// Pre-routing, so that authentication precedes everything about an API
	// request (an unknown API route is 401 before it is 404) without a
	// group catch-all that would turn 405s into 404s. /langgraph does its
	// own CORS, authentication and limits (s.lg.Pre).
	e.Pre(s.logRequests, s.recoverPanics, securityHeaders, s.lg.Pre, onAPI(s.authenticate), onAPI(checkQuery), onAPI(limitBody), limitDeskBody)
	s.e = e
	s.routes()
	s.lg.Register(e)
	s.mountMCP()
	return s
}

func (s *Server) routes() {
	get := http.MethodGet
	s.route(get, "/healthz", "", s.healthz)
	s.route(get, "/readyz", "", s.readyz)
	if s.metrics != nil {
		s.route(get, "/metrics", "", echo.WrapHandler(s.metrics))
	}

	// The API: authenticate (pre-routing) said who; each route says the
	// least role it needs (roles are cumulative).
	var hub api.Follower
	if s.hub != nil {
		hub = s.hub
	}
	s.api = api.New(api.Deps{Engine: s.engine, Store: s.store, Hub: hub, Audit: s.auth, Decider: s.decider, Wake: s.wake,
		Sockets: s.sockets, Recheck: s.recheck, ClaimTTL: s.claimTTL, Requests: s.requests, Version: s.version,
		Logger: s.log})
	s.api.Register(router{s})

	// Slack's interactivity callbacks: signed by Slack, not a principal.
	s.slack.Register(router{s})

	// The approval desk: pages, their forms and live feeds, static files.
	// It checks its own sessions, roles and CSRF tokens.
	s.desk = desk.New(desk.Deps{Engine: s.engine, Store: s.store, Hub: s.hub, Auth: s.auth, Decider: s.decider,
		SSO: s.sso, Wake: s.wake, Sockets: s.sockets, Recheck: s.recheck, TrustProxy: s.trustProxy,
		ClaimTTL: s.claimTTL, LLMProvider: s.llmProvider, ModelWorkflows: s.modelWorkflows, WebhookAllowPrivate: s.webhookAllowPrivate,
		OutboxRetention: s.outboxRetention, Logger: s.log})
	s.desk.Register(router{s})

	// Action links of notification emails: their token is the credential;
	// they answer with the desk's pages.
	act.New(act.Deps{Store: s.store, Decider: s.decider, Assets: s.desk.Assets(), Page: s.desk.Page,
		Errors: s.desk.FormErrors, Logger: s.log.With("component", "act")}).Register(router{s})
}

// Handler returns the HTTP handler of every route.
func (s *Server) Handler() http.Handler { return s.e }

// Echo returns the router, so that pages can be added.
func (s *Server) Echo() *echo.Echo { return s.e }

// Start listens on addr (":8080", "127.0.0.1:0", …), serves in the
// background and returns the bound address.
func (s *Server) Start(addr string) (net.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.httpSrv != nil || s.closed {
		return nil, errors.New("web: server already started or shut down")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler:           s.e,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute, // websockets clear deadlines when upgraded
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.httpSrv = srv
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "error", err)
		}
	}()
	return ln.Addr(), nil
}

// Shutdown stops accepting connections, closes every websocket with a
// close frame (1001 going away), and waits for the handlers in flight until
// ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	srv := s.httpSrv
	s.mu.Unlock()
	s.sockets.Shut()

	var err error
	if srv != nil {
		err = srv.Shutdown(ctx)
	}
	// Hijacked connections are not the http.Server's to wait for, nor
	// the answers to Slack callbacks.
	done := make(chan struct{})
	go func() { s.sockets.Wait(); s.slack.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.Join(err, fmt.Errorf("websockets still open: %w", ctx.Err()))
	}
	return err
}

// OpenWebsockets counts the websocket handlers running now (event streams
// and live pages): the websockets_open gauge.
func (s *Server) OpenWebsockets() int { return s.sockets.Open() }

// handleError is echo's HTTPErrorHandler: it writes the error body unless
// the response has started. Logging is the request logger's job.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if langgraph.Owns(c.Request().URL.Path) {
		// LangGraph's clients read {"detail"}.
		langgraph.HandleError(err, c)
		return
	}
	response.Write(c, err)
}

// router is the server's route table as a handler package adds to it
// (each package's Router).
type router struct{ s *Server }

// Route adds a route with the least role it needs ("" public).
func (r router) Route(method, path string, role auth.Role, h echo.HandlerFunc) {
	r.s.route(method, path, role, h)
}

// Handle adds a route that checks its principal itself (the desk's pages)
// and records its least role ("" public).
func (r router) Handle(method, path string, role auth.Role, h echo.HandlerFunc) {
	r.s.e.Add(method, path, h)
	r.s.roles[method+" "+path] = role
}

// healthz: GET /healthz — the process answers.
func (s *Server) healthz(c echo.Context) error {
	return response.JSON(c, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz: GET /readyz — the database is reachable and migrated.
func (s *Server) readyz(c echo.Context) error {
	if s.ready != nil {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readyTimeout)
		defer cancel()
		if err := s.ready(ctx); err != nil {
			s.log.Warn("not ready", "error", err)
			return response.JSON(c, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": err.Error()})
		}
	}
	return response.JSON(c, http.StatusOK, map[string]string{"status": "ok"})
}
