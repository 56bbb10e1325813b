// Package web is Gatehouse's HTTP face: the JSON API of SPEC §7 under
// /api/v1 (bearer-token authentication, one error mapping, request logging),
// task event streams over websockets, health and readiness probes, and the
// OpenAPI document. Later pages hang off Echo().
package web

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/graph"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// Deps is what the server needs.
type Deps struct {
	Engine *graph.Engine
	Store  *postgres.Store
	Hub    *live.Hub
	// Wake is called after a task became runnable here (create, decision,
	// retry): the local runner's fast path. NOTIFY covers other replicas.
	// May be nil.
	Wake func()
	// BootstrapToken is the bearer token /api/v1 requires. When empty,
	// /api/v1 answers 401 to everything (and logs why, once).
	BootstrapToken string
	// Ready reports whether the server can serve (database reachable,
	// migrations applied); nil means always ready.
	Ready   func(ctx context.Context) error
	Logger  *slog.Logger
	Version string
	// Metrics, when set, is served at GET /metrics, open like /healthz.
	Metrics http.Handler
}

// apiPrefix is where the JSON API lives.
const apiPrefix = "/api/v1"

// actor is who the bootstrap token acts as, in created_by, decided_by, …
const actor = "bootstrap"

// Websocket timing.
const (
	defaultPingPeriod = 20 * time.Second
	defaultPongWait   = 45 * time.Second
	defaultWriteWait  = 10 * time.Second
	// closeWait is how long a closing stream waits for the client's reply
	// to its close frame.
	closeWait = time.Second
)

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

	tokenSum  [sha256.Size]byte
	hasToken  bool
	tokenWarn sync.Once

	e        *echo.Echo
	openapi  []byte
	upgrader websocket.Upgrader

	pingPeriod, pongWait, writeWait time.Duration

	mu      sync.Mutex
	httpSrv *http.Server
	closed  bool
	closing chan struct{} // closed by Shutdown: streams say goodbye
	streams streamGroup
	metrics http.Handler
}

// New builds the server and its routes.
func New(d Deps) *Server {
	log := d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{engine: d.Engine, store: d.Store, hub: d.Hub, wake: d.Wake, ready: d.Ready, log: log, metrics: d.Metrics,
		version: d.Version, closing: make(chan struct{}),
		pingPeriod: defaultPingPeriod, pongWait: defaultPongWait, writeWait: defaultWriteWait}
	if d.BootstrapToken != "" {
		s.tokenSum, s.hasToken = sha256.Sum256([]byte(d.BootstrapToken)), true
	}
	s.openapi = openAPIDocument(d.Version)
	s.upgrader = websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		ReadBufferSize:   1024,
		WriteBufferSize:  4096,
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			code := CodeBadRequest
			if status == http.StatusForbidden {
				code = CodeForbidden
			}
			b, _ := json.Marshal(errorBody{Error: errorJSON{Code: code, Message: reason.Error()}})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(append(b, '\n'))
		},
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	// Pre-routing, so that authentication precedes everything about an API
	// request (an unknown API route is 401 before it is 404) without a
	// group catch-all that would turn 405s into 404s.
	e.Pre(s.logRequests, s.recoverPanics, onAPI(s.authenticate), onAPI(limitBody))
	s.e = e
	s.routes()
	return s
}

func (s *Server) routes() {
	e := s.e
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	if s.metrics != nil {
		e.GET("/metrics", echo.WrapHandler(s.metrics))
	}

	api := e.Group(apiPrefix)
	api.GET("/openapi.json", s.openAPI)
	api.GET("/workflows", s.listWorkflows)
	api.POST("/tasks", s.createTask)
	api.GET("/tasks", s.listTasks)
	api.GET("/tasks/:id", s.getTask)
	api.GET("/tasks/:id/state", s.getState)
	api.GET("/tasks/:id/checkpoints", s.listCheckpoints)
	api.GET("/tasks/:id/checkpoints/:step", s.getCheckpoint)
	api.GET("/tasks/:id/events", s.listEvents)
	api.GET("/tasks/:id/artifacts", s.listArtifacts)
	api.GET("/tasks/:id/decisions", s.listDecisions)
	api.POST("/tasks/:id/decisions", s.decide)
	api.POST("/tasks/:id/cancel", s.cancelTask)
	api.POST("/tasks/:id/retry", s.retryTask)
	api.GET("/tasks/:id/stream", s.stream)
	api.GET("/interrupts", s.listInterrupts)

	// The approval desk: pages, their forms and live feeds, static files.
	s.registerDesk()
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
	if !s.closed {
		s.closed = true
		close(s.closing)
	}
	srv := s.httpSrv
	s.mu.Unlock()

	var err error
	if srv != nil {
		err = srv.Shutdown(ctx)
	}
	// Hijacked connections are not the http.Server's to wait for.
	done := make(chan struct{})
	go func() { s.streams.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.Join(err, fmt.Errorf("websockets still open: %w", ctx.Err()))
	}
	return err
}

// beginStream registers a websocket handler for Shutdown to wait for; false
// once shutting down.
func (s *Server) beginStream() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.streams.Add(1)
	return true
}

// OpenWebsockets counts the websocket handlers running now (event streams
// and live pages): the websockets_open gauge.
func (s *Server) OpenWebsockets() int { return int(s.streams.n.Load()) }

// streamGroup is a sync.WaitGroup of websocket handlers that also counts them.
type streamGroup struct {
	wg sync.WaitGroup
	n  atomic.Int64
}

func (g *streamGroup) Add(delta int) {
	g.n.Add(int64(delta))
	g.wg.Add(delta)
}

func (g *streamGroup) Done() {
	g.n.Add(-1)
	g.wg.Done()
}

func (g *streamGroup) Wait() { g.wg.Wait() }
