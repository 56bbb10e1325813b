// Package desk is the approval desk of SPEC §8: the server-rendered pages
// (dashboard, inbox, task pages, the new-task and fork forms, analytics,
// the admin pages of users, tokens, policy, audit and webhooks), their
// forms, the desk's sign-in (password and SSO), sessions, CSRF tokens and
// flashes, the live feeds of its pages (websockets) and who has a task
// page open (presence). The server (internal/web) mounts it; the desk
// guards its own routes (session, least role, CSRF) and records each
// route's role in the server's table. It declares the Store it uses and
// imports the request, response and socket kernels, auth, graph, live,
// views and static; never another handler package (api, act, slack) nor
// internal/web.
package desk

import (
	"context"
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/analytics"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/sso"
	"github.com/gatehousehq/gatehouse/internal/web/socket"
	"github.com/gatehousehq/gatehouse/static"
)

// Store is what the desk reads and writes besides the engine
// (postgres.Store; its read-model types are postgres's).
type Store interface {
	Task(ctx context.Context, taskID string) (*graph.Task, error)
	CurrentCheckpoint(ctx context.Context, taskID string) (*graph.Checkpoint, error)
	Artifacts(ctx context.Context, taskID string) ([]graph.Artifact, error)
	Interrupts(ctx context.Context, taskID string) ([]graph.Interrupt, error)
	Decisions(ctx context.Context, taskID string) ([]graph.Decision, error)
	TaskApprovals(ctx context.Context, taskID string) (map[string][]string, error)
	ListTasks(ctx context.Context, f postgres.TaskFilter) ([]graph.Task, *postgres.TaskCursor, error)
	TaskCounts(ctx context.Context) (map[string]int, error)
	PendingInterrupts(ctx context.Context, taskIDs ...string) (map[string]graph.Interrupt, error)
	PendingInterruptCounts(ctx context.Context) (map[string]int, error)
	InboxPage(ctx context.Context, f postgres.InboxFilter) ([]postgres.InboxEntry, *postgres.InboxCursor, error)
	Events(ctx context.Context, taskID string, after int64, limit int) ([]graph.Event, error)
	History(ctx context.Context, taskID string) ([]postgres.HistoryEntry, error)
	ForkPoint(ctx context.Context, taskID string, step int) (*graph.Snapshot, error)
	Forks(ctx context.Context, taskID string) ([]graph.Task, error)
	DecisionSubject(ctx context.Context, taskID, interruptID string) (*graph.Task, *graph.Interrupt, error)
	Cancel(ctx context.Context, taskID, actor string) error
	Retry(ctx context.Context, taskID, actor string) error
	ClaimInterrupt(ctx context.Context, req postgres.ClaimRequest) (*graph.Interrupt, error)
	ReleaseInterrupt(ctx context.Context, interruptID, who string, admin bool) (*graph.Interrupt, error)
	RecordInterruptView(ctx context.Context, interruptID, viewer string) error
	PresenceCounts(ctx context.Context, taskIDs []string) (map[string]int, error)
	DeadlineActions(ctx context.Context, interruptIDs []string) (map[string]string, error)
	Presence(ctx context.Context, taskID string) ([]string, error)
	PresenceTouch(ctx context.Context, taskID, viewer, username string) error
	PresenceLeave(ctx context.Context, taskID, viewer string) error
	RenewClaims(ctx context.Context, taskID, who string, ttl time.Duration) (int64, error)
	Analytics(ctx context.Context, f analytics.Filter) (*analytics.Report, error)
	AnalyticsBehind(ctx context.Context, b postgres.Behind) ([]postgres.BehindRow, error)
	Endpoints(ctx context.Context) ([]notify.Endpoint, error)
	AddEndpoint(ctx context.Context, e notify.Endpoint, actor string) (*notify.Endpoint, error)
	RemoveEndpoint(ctx context.Context, id, actor string) error
	EndpointDeliveries(ctx context.Context, endpointID string, max int) ([]notify.Delivery, error)
	Redeliver(ctx context.Context, id string) error
}

// Router is the server's route table as the desk adds to it: the route
// is served as given (the desk checks the session, the role and the CSRF
// token itself) and its least role ("" public) is recorded.
type Router interface {
	Handle(method, path string, role auth.Role, h echo.HandlerFunc)
}

// Deps is what the desk needs.
type Deps struct {
	Engine *graph.Engine
	Store  Store
	// Hub follows tasks' events for the live pages and carries presence
	// notifications; nil: no live pages (503).
	Hub     *live.Hub
	Auth    *auth.Service
	Decider *auth.Decider
	// SSO, when set, offers sign-in with the identity provider.
	SSO *sso.Client
	// Wake is called after a task became runnable here other than by a
	// decision (create, fork, retry). May be nil.
	Wake    func()
	Sockets *socket.Group
	// Recheck is how a live page checks, now and then, that the session
	// it was opened with still holds.
	Recheck func(c echo.Context) func(context.Context) error
	// TrustProxy believes X-Forwarded-Proto and X-Forwarded-For.
	TrustProxy bool
	// ClaimTTL is how long a claim on an interrupt lasts unless renewed.
	ClaimTTL time.Duration
	// LLMProvider is the LLM_PROVIDER in use ("scripted": the demo banner
	// on the pages of ModelWorkflows' tasks).
	LLMProvider string
	// ModelWorkflows names the workflows whose nodes call the model.
	ModelWorkflows []string
	// WebhookAllowPrivate lets /admin/webhooks add endpoints on private
	// addresses; OutboxRetention is what the page says of retention.
	WebhookAllowPrivate bool
	OutboxRetention     time.Duration
	Logger              *slog.Logger
}

// Handler serves the desk.
type Handler struct{ d *desk }

// New returns the desk. It subscribes to the hub's presence
// notifications at once.
func New(deps Deps) *Handler {
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &env{engine: deps.Engine, store: deps.Store, hub: deps.Hub, auth: deps.Auth, decider: deps.Decider,
		sso: deps.SSO, wake: deps.Wake, sockets: deps.Sockets, recheck: deps.Recheck, trustProxy: deps.TrustProxy,
		claimTTL: deps.ClaimTTL, llmProvider: deps.LLMProvider, modelWorkflows: deps.ModelWorkflows, webhookAllowPrivate: deps.WebhookAllowPrivate,
		outboxRetention: deps.OutboxRetention, log: log, presence: newPresenceHub()}
	if deps.Hub != nil {
		deps.Hub.OnNotify(postgres.ChannelPresence, e.presence.changed)
	}
	d := &desk{s: e, assets: static.MustLoad(), render: newRenderer()}
	d.tasks = newTaskCache(d, 256)
	d.feeds = &feeds{d: d, m: map[string]*taskFeed{}}
	d.lists = newListCache()
	d.presences = &presences{d: d, m: map[string]*taskPresence{}}
	return &Handler{d: d}
}

// Page adapts a page handler of another package (the action links): a
// state-changing request from another origin is refused, and an error
// becomes the desk's HTML error page with its status.
func (h *Handler) Page(next echo.HandlerFunc) echo.HandlerFunc { return h.d.page(next) }

// FormErrors is Page without the origin check and without the check of
// the posted form's text, for forms that carry their own credential (an
// action link's token) and check their text themselves, so that they can
// show the form again with the message and what was typed: an error
// becomes the desk's HTML error page.
func (h *Handler) FormErrors(next echo.HandlerFunc) echo.HandlerFunc {
	return h.d.errorPages(next, false)
}

// Assets are the desk's static files (fingerprinted names).
func (h *Handler) Assets() *static.Assets { return h.d.assets }

// env is what the desk's handlers call (d.s): the services and settings
// of Deps, and the cookies of a desk session.
type env struct {
	engine              *graph.Engine
	store               Store
	hub                 *live.Hub
	auth                *auth.Service
	decider             *auth.Decider
	sso                 *sso.Client
	wake                func()
	sockets             *socket.Group
	recheck             func(c echo.Context) func(context.Context) error
	trustProxy          bool
	claimTTL            time.Duration
	llmProvider         string
	modelWorkflows      []string
	webhookAllowPrivate bool
	outboxRetention     time.Duration
	log                 *slog.Logger
	// presence tells open pages that who looks at a task changed.
	presence *presenceHub
}
