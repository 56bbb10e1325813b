// Package api serves the JSON API of SPEC §7 under /api/v1: tasks, their
// state, checkpoints, events, artifacts, decisions, forks and event
// stream (a websocket), the inbox of interrupts and their claims, the
// audit trail, analytics, approval requests (SPEC §16), the OpenAPI
// document, and the wire types these answer with (also the webhooks'
// body). Authentication and each route's
// least role are the server's (internal/web); decisions go through the
// Decider. It declares the Store it uses and imports the request,
// response and socket kernels, never another handler package nor
// internal/web.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/analytics"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/requests"
	"github.com/gatehousehq/gatehouse/internal/web/socket"
)

// Prefix is where the JSON API lives.
const Prefix = "/api/v1"

// Store is what the API reads and writes besides the engine
// (postgres.Store; its read-model types are postgres's).
type Store interface {
	Task(ctx context.Context, taskID string) (*graph.Task, error)
	TaskWithPending(ctx context.Context, taskID string) (*graph.Task, *graph.Interrupt, error)
	ListTasks(ctx context.Context, f postgres.TaskFilter) ([]graph.Task, *postgres.TaskCursor, error)
	PendingInterrupts(ctx context.Context, taskIDs ...string) (map[string]graph.Interrupt, error)
	CurrentCheckpoint(ctx context.Context, taskID string) (*graph.Checkpoint, error)
	History(ctx context.Context, taskID string) ([]postgres.HistoryEntry, error)
	CheckpointAt(ctx context.Context, taskID string, step int) (*postgres.HistoryCheckpoint, error)
	Events(ctx context.Context, taskID string, after int64, limit int) ([]graph.Event, error)
	Artifacts(ctx context.Context, taskID string) ([]graph.Artifact, error)
	Decisions(ctx context.Context, taskID string) ([]graph.Decision, error)
	DecisionSubject(ctx context.Context, taskID, interruptID string) (*graph.Task, *graph.Interrupt, error)
	Forks(ctx context.Context, taskID string) ([]graph.Task, error)
	Cancel(ctx context.Context, taskID, actor string) error
	Retry(ctx context.Context, taskID, actor string) error
	Interrupt(ctx context.Context, id string) (*graph.Interrupt, error)
	ListInterrupts(ctx context.Context, f postgres.InterruptFilter) ([]postgres.InboxEntry, error)
	ClaimInterrupt(ctx context.Context, req postgres.ClaimRequest) (*graph.Interrupt, error)
	ReleaseInterrupt(ctx context.Context, interruptID, who string, admin bool) (*graph.Interrupt, error)
	Approvals(ctx context.Context, interruptID string) ([]string, error)
	Analytics(ctx context.Context, f analytics.Filter) (*analytics.Report, error)
}

// Follower follows a task's events (live.Hub).
type Follower interface {
	Follow(ctx context.Context, taskID string, after int64, fn func(graph.Event) error) (int64, error)
}

// AuditTrail reads the audit trail (auth.Service).
type AuditTrail interface {
	AuditTrail(ctx context.Context, f auth.AuditFilter) ([]auth.AuditEvent, error)
}

// Router adds a route under its least role ("" public): the server's,
// which authenticates the API's requests and refuses a principal below
// the role.
type Router interface {
	Route(method, path string, role auth.Role, h echo.HandlerFunc)
}

// Deps is what the API needs.
type Deps struct {
	Engine  *graph.Engine
	Store   Store
	Hub     Follower // nil: no event stream (503)
	Audit   AuditTrail
	Decider *auth.Decider
	// Wake is called after a task became runnable here other than by a
	// decision (create, fork, retry). May be nil.
	Wake    func()
	Sockets *socket.Group
	// Recheck is how a stream checks, now and then, that the credentials
	// it was opened with still hold.
	Recheck  func(c echo.Context) func(context.Context) error
	ClaimTTL time.Duration
	// Requests serves /api/v1/requests (SPEC §16).
	Requests *requests.Service
	Version  string
	Logger   *slog.Logger
}

// Handler serves the API.
type Handler struct {
	engine   *graph.Engine
	store    Store
	hub      Follower
	auth     AuditTrail
	decider  *auth.Decider
	wake     func()
	sockets  *socket.Group
	recheck  func(c echo.Context) func(context.Context) error
	claimTTL time.Duration
	requests *requests.Service
	openapi  []byte
	log      *slog.Logger
}

// New returns the API.
func New(d Deps) *Handler {
	h := &Handler{engine: d.Engine, store: d.Store, hub: d.Hub, auth: d.Audit, decider: d.Decider, wake: d.Wake,
		sockets: d.Sockets, recheck: d.Recheck, claimTTL: d.ClaimTTL, requests: d.Requests, openapi: openAPIDocument(d.Version), log: d.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h
}

// Register adds the API's routes, each with the least role it needs (roles
// are cumulative).
func (h *Handler) Register(r Router) {
	get, post := http.MethodGet, http.MethodPost
	viewer, operator, approver, admin := auth.RoleViewer, auth.RoleOperator, auth.RoleApprover, auth.RoleAdmin
	api := func(method, path string, role auth.Role, hf echo.HandlerFunc) {
		r.Route(method, Prefix+path, role, hf)
	}
	api(get, "/openapi.json", viewer, h.openAPI)
	api(get, "/workflows", viewer, h.listWorkflows)
	api(post, "/tasks", operator, h.createTask)
	api(get, "/tasks", viewer, h.listTasks)
	api(get, "/tasks/:id", viewer, h.getTask)
	api(get, "/tasks/:id/state", viewer, h.getState)
	api(get, "/tasks/:id/checkpoints", viewer, h.listCheckpoints)
	api(get, "/tasks/:id/checkpoints/:step", viewer, h.getCheckpoint)
	api(get, "/tasks/:id/events", viewer, h.listEvents)
	api(get, "/tasks/:id/artifacts", viewer, h.listArtifacts)
	api(get, "/tasks/:id/decisions", viewer, h.listDecisions)
	api(post, "/tasks/:id/decisions", approver, h.decide)
	api(post, "/tasks/:id/cancel", operator, h.cancelTask)
	api(post, "/tasks/:id/retry", operator, h.retryTask)
	api(post, "/tasks/:id/fork", operator, h.forkTask)
	api(get, "/tasks/:id/forks", viewer, h.listForks)
	api(get, "/tasks/:id/stream", viewer, h.stream)
	api(get, "/interrupts", viewer, h.listInterrupts)
	api(get, "/interrupts/:id", viewer, h.getInterrupt)
	api(post, "/interrupts/:id/claim", approver, h.claimInterrupt)
	api(http.MethodDelete, "/interrupts/:id/claim", approver, h.releaseInterrupt)
	api(post, "/requests", operator, h.createRequest)
	api(get, "/requests", viewer, h.listRequests)
	api(get, "/requests/:id", viewer, h.getRequest)
	api(post, "/requests/:id/cancel", operator, h.cancelRequest)
	api(get, "/audit", admin, h.auditAPI)
	api(get, "/analytics", viewer, h.analyticsAPI)
}

// wakeRunner hands work to this replica's runner (NOTIFY tells others).
func (h *Handler) wakeRunner() {
	if h.wake != nil {
		h.wake()
	}
}
