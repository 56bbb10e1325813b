package gatehouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/config"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/llm/scripted"
	"github.com/gatehousehq/gatehouse/internal/maintenance"
	"github.com/gatehousehq/gatehouse/internal/metrics"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/notify/email"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/preflight"
	"github.com/gatehousehq/gatehouse/internal/requests"
	"github.com/gatehousehq/gatehouse/internal/runner"
	"github.com/gatehousehq/gatehouse/internal/timekeeper"
	"github.com/gatehousehq/gatehouse/internal/web"
	"github.com/gatehousehq/gatehouse/internal/web/api"
	"github.com/gatehousehq/gatehouse/internal/workflows/builtin"
	"github.com/gatehousehq/gatehouse/internal/workflows/request"
)

// Server is Gatehouse in a program: made by New, run by Run. A Server runs
// once.
type Server struct {
	cfg      config.Config
	log      *slog.Logger
	provider llm.Provider
	builtins bool
	// builtinNames are the built-in workflows' names (none WithoutBuiltins).
	builtinNames []string
	custom       []graph.Workflow
	version      string
	passwordCmd  string

	started atomic.Bool
	ready   chan struct{}
	addr    net.Addr
	mu      sync.Mutex
}

// Addr is the address the server listens on, once Ready is closed (nil
// before): with GATEHOUSE_ADDR's port 0, the port it picked.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Ready is closed once the server listens and its workers run.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Workflows lists the names of the workflows the server runs, built-in
// ones first.
func (s *Server) Workflows() []string {
	names := slices.Clone(s.builtinNames)
	for _, w := range s.custom {
		names = append(names, w.Name())
	}
	return names
}

// Run migrates the database, then serves the desk and the API, runs the
// task workers, the timers (deadlines, reminders, escalations), the
// notification senders and the periodic chores until ctx ends. Then it
// shuts down gracefully within Config.ShutdownGrace: no new requests,
// node runs in flight finish or hand their leases back, pending
// notifications are handed to the other replicas. It returns nil after a
// shutdown that ctx asked for, or the error that stopped it (the database
// cannot be reached, its schema is newer than this program, the address
// is taken).
func (s *Server) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("gatehouse: Server.Run called twice")
	}
	cfg, log := s.cfg, s.log
	if sp, ok := s.provider.(*scripted.Provider); ok && s.builtins {
		for _, role := range sp.UnknownRoles() {
			log.Warn("LLM_SCRIPT_FILE names a role no workflow of this build has", "role", role)
		}
	}

	pool, err := postgres.OpenMigrated(ctx, cfg.DatabaseURL, 2*cfg.Workers+16, "start")
	if err != nil {
		return err
	}
	defer pool.Close()
	// base is the store without hooks. The parts of the replica its
	// commits tell (the metrics, the sender, the timekeeper) work through
	// a store themselves, so they are built over base (or a Store With
	// fewer hooks), and the store the engine, the workers and the server
	// use is base With all of them (below): no setter, no cycle.
	base := postgres.NewStore(pool, postgres.Options{})
	authSvc := auth.NewService(auth.Config{Store: base, BootstrapToken: cfg.BootstrapToken,
		SessionIdle: cfg.Auth.SessionIdle, SessionMax: cfg.Auth.SessionMax, Logger: log.With("component", "auth"),
		LocalLoginOff: !cfg.SSO.LocalLogin, BreakGlassUser: cfg.SSO.BreakGlassUser})
	generated, err := authSvc.EnsureAdmin(ctx, cfg.AdminPassword)
	if err != nil {
		return fmt.Errorf("admin user: %w", err)
	}
	if generated != "" {
		// Shown this once: only its hash is stored.
		how := "sign in at the url below and change it (click admin at the top right)"
		if s.passwordCmd != "" {
			how += ", or run: " + s.passwordCmd
		}
		log.Warn("created the admin user with a generated password, shown this once; "+how+
			"; or set GATEHOUSE_ADMIN_PASSWORD", "username", auth.AdminUser, "password", generated)
	}
	ssoClient := startSSO(ctx, cfg, base, log.With("component", "sso"))
	defer ssoClient.Stop()
	// The chores run until shutdown stops them, first, and waits for
	// them: no statement of theirs is in flight when the pool closes.
	chores := maintenance.Group{
		maintenance.SessionPrune(authSvc, log.With("component", "auth")),
		maintenance.AnalyticsFold(base, log.With("component", "analytics")),
	}
	if cfg.HistoryRetention > 0 {
		log.Info("checkpoint history retention", "retention", cfg.HistoryRetention)
		chores = append(chores, maintenance.HistoryRetention(base, cfg.HistoryRetention, log.With("component", "retention")))
	}
	if cfg.OutboxRetention > 0 {
		log.Info("notification retention", "retention", cfg.OutboxRetention)
		chores = append(chores, maintenance.OutboxRetention(base, cfg.OutboxRetention, log.With("component", "retention")))
	}
	chores.Start(context.WithoutCancel(ctx))
	defer chores.Stop()
	notifier := base.Notifier(log.With("component", "notify"))
	notifier.Start()
	defer func() {
		grace, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := notifier.Stop(grace); err != nil {
			log.Warn("announcements not sent at shutdown", "error", err)
		}
	}()
	// Metrics come from the events the engine and the store commit, the
	// provider's calls and the checkpoint writes (internal/metrics).
	met := metrics.New(metrics.Config{Reader: base, PendingInterrupts: base.PendingInterruptCounts,
		PendingStats: pendingStats(base), Logger: log.With("component", "metrics")})
	metCtx, stopMetrics := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMetrics()
	go met.Run(metCtx)
	provider := met.Provider(s.provider)
	workflows, err := s.builtinWorkflows(provider)
	if err != nil {
		return err
	}
	// The demo model's banner belongs on the pages of the workflows that
	// call it: the built-in ones, not a request's (nor a library user's).
	var modelWorkflows []string
	for _, w := range workflows {
		if w.Name() != request.Name {
			modelWorkflows = append(modelWorkflows, w.Name())
		}
	}
	workflows = append(workflows, s.custom...)

	// The hub and the workers outlive ctx (the signal): they stop in order
	// below.
	hubCtx, stopHub := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHub()
	hub := live.NewHub(cfg.DatabaseURL, base, log.With("component", "live"))
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(hubCtx) }()
	defer func() { stopHub(); <-hubDone }()
	// Notifications: the sender reads and records through base; the
	// commits of the keeper's store and of store write deliveries and hand
	// them to it.
	sender, outbox := newSender(cfg, base, log)
	hub.OnOutbox(sender.Wake)
	sender.Start()
	// Deadlines, reminders and escalations (SPEC §11) fire on whichever
	// replica's keeper takes them first; each wakes for timers raised here
	// at once (store's OnTimer), and for those raised elsewhere through the
	// hub. The keeper's own store writes its firings' notifications and
	// needs no poke: the keeper reads the next timer after firing.
	keeper := timekeeper.New(base.With(postgres.Options{Outbox: outbox}), cfg.Auth.Policy, log.With("component", "timers"))
	hub.OnNotify(postgres.ChannelTimers, keeper.PokePayload)
	store := base.With(postgres.Options{Outbox: outbox, Sinks: []graph.EventSink{met}, OnTimer: keeper.Poke})
	// The hub is the engine's sink too: this replica's own events reach its
	// websockets straight from the commit.
	engine, err := graph.NewEngine(met.Checkpointer(store), workflows, graph.WithLogger(log), graph.WithSink(hub),
		graph.WithRaiseHook(cfg.Auth.Policy.Raise),
		graph.WithSink(met))
	if err != nil {
		sender.Stop(context.Background())
		return err
	}
	met.AddInterruptKinds(interruptKinds(workflows)...)
	// Tasks stored under another definition of their workflow: said at
	// once, before a decision on one meets a 409.
	preflight.WarnDefinitions(ctx, store, workflows, log.With("component", "definitions"))

	owner := runner.OwnerName()
	run := runner.New(store, engine, runner.Config{Owner: owner, Workers: cfg.Workers, LeaseTTL: cfg.LeaseTTL,
		Logger: log.With("component", "runner")})
	if cfg.Workers > 0 {
		hub.OnRunnable(run.WakeFor)
		run.Start()
	}

	policy := cfg.Auth.Policy
	log.Info("approval policy", "source", policy.Source(), "policy", policy.String())
	// A decision taken here hands its task to a worker here, when one is
	// free: leased in the decision's transaction, run without a claim.
	decider := auth.NewDecider(engine, store, policy, log.With("component", "auth"), builtin.DeciderOptions(run)...)
	preflight.WarnPolicyUsers(ctx, store, policy, log)
	// Approval requests (SPEC §16): each is created with its waiting task
	// in one transaction; the tasks of requests an older version wrote in
	// two, and stopped between them, are made now.
	reqs := requests.NewService(requests.Config{Store: store, Engine: engine, Events: hub, Wake: run.Wake,
		PublicURL: cfg.Notify.PublicURL, AllowPrivate: cfg.Notify.WebhookAllowPrivate, Logger: log.With("component", "requests")})
	if err := reqs.Recover(ctx); err != nil {
		log.Warn("creating the tasks of requests made before a stop", "error", err)
	}
	srv := web.New(web.Deps{Engine: engine, Store: store, Hub: hub, Wake: run.Wake, Auth: authSvc, Decider: decider, Requests: reqs,
		TrustProxy: cfg.Auth.TrustProxy, CORSOrigins: cfg.CORSOrigins, ClaimTTL: cfg.Auth.ClaimTTL,
		Ready: func(ctx context.Context) error { return postgres.Ready(ctx, pool) }, Logger: log.With("component", "http"),
		Version: s.version, Metrics: met.Handler(), LLMProvider: provider.Name(), ModelWorkflows: modelWorkflows,
		SlackSigningSecret:  cfg.Notify.SlackSigningSecret,
		WebhookAllowPrivate: cfg.Notify.WebhookAllowPrivate, OutboxRetention: cfg.OutboxRetention, SSO: ssoClient})
	met.WatchWebsockets(srv.OpenWebsockets)
	keeper.Start()
	defer keeper.Stop()
	addr, err := srv.Start(cfg.Addr)
	if err != nil {
		if cfg.Workers > 0 {
			run.Stop(context.Background())
		}
		sender.Stop(context.Background())
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	s.mu.Lock()
	s.addr = addr
	s.mu.Unlock()
	close(s.ready)
	log.Info("gatehouse serving", "addr", addr.String(), "url", "http://"+addr.String(), "replica", owner,
		"workers", cfg.Workers, "lease_ttl", cfg.LeaseTTL, "llm", provider.Name(), "version", s.version)

	<-ctx.Done()
	log.Info("shutting down", "grace", cfg.ShutdownGrace)
	chores.Stop()
	grace, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	// No new requests; websockets get a close frame.
	if err := srv.Shutdown(grace); err != nil {
		log.Warn("http shutdown", "error", err)
	}
	// Node runs in flight finish within the grace period, or hand their
	// leases back to another replica.
	if cfg.Workers > 0 {
		run.Stop(grace)
	}
	// The keeper's last firings may write deliveries: the sender sends
	// them, or hands them back to the other replicas.
	keeper.Stop()
	sender.Stop(grace)
	stopHub()
	<-hubDone
	log.Info("stopped")
	return nil
}

// builtinWorkflows are the built-in workflows over p, or, WithoutBuiltins,
// the request workflow alone: /api/v1/requests always needs it.
func (s *Server) builtinWorkflows(p llm.Provider) ([]graph.Workflow, error) {
	if !s.builtins {
		r, err := builtin.Request()
		if err != nil {
			return nil, err
		}
		return []graph.Workflow{r}, nil
	}
	return builtin.Workflows(p, s.cfg.LLM)
}

// newSender wires the notifications (SPEC §12): the sender that delivers
// the outbox by webhook, email and Slack, woken by this replica's commits
// and by the NOTIFYs of the others (hub.OnOutbox), and what the store's
// commits write to the outbox in each event's transaction, handed to it.
func newSender(cfg config.Config, store *postgres.Store, log *slog.Logger) (*notify.Sender, postgres.Outbox) {
	n := cfg.Notify
	channels := map[string]notify.Channel{
		notify.ChannelWebhook: notify.NewWebhooks(store, api.WebhookBody(n.PublicURL), n.WebhookAllowPrivate),
		// Approval requests' callbacks: each to its request's URL, with its
		// secret; the body is the request as it then is.
		notify.ChannelCallback: notify.NewCallbacks(requests.NewService(requests.Config{Store: store, PublicURL: n.PublicURL}).Callback,
			n.WebhookAllowPrivate),
	}
	if n.SMTPURL != "" {
		// Checked by config.Load: the URL parses.
		sm, _ := config.ParseSMTPURL(n.SMTPURL)
		channels[notify.ChannelEmail] = email.New(store, email.SMTP{Host: sm.Host, Port: sm.Port,
			Username: sm.Username, Password: sm.Password, TLS: sm.TLS}, n.SMTPFrom, n.PublicURL)
		log.Info("email notifications", "smtp", sm.Host, "port", sm.Port, "from", n.SMTPFrom)
	}
	if n.SlackWebhookURL != "" {
		channels[notify.ChannelSlack] = notify.NewSlack(n.SlackWebhookURL, n.PublicURL)
		log.Info("slack notifications", "callback", n.PublicURL+"/integrations/slack/actions")
	}
	s := notify.NewSender(notify.Config{Store: store, Channels: channels, Scale: n.WebhookBackoffScale,
		Logger: log.With("component", "notify")})
	return s, postgres.Outbox{Email: channels[notify.ChannelEmail] != nil, Slack: channels[notify.ChannelSlack] != nil,
		Audience: postgres.PolicyAudience(cfg.Auth.Policy)}.WithSender(s)
}

// interruptKinds lists the kinds of the workflows' gates, and questions.
func interruptKinds(workflows []graph.Workflow) []string {
	kinds := []string{graph.InterruptQuestion}
	for _, w := range workflows {
		for _, g := range w.Describe().Gates {
			kinds = append(kinds, g.Kind)
		}
	}
	return kinds
}

// pendingStats adapts the store's backlog reading to the metrics' type.
func pendingStats(store *postgres.Store) func(context.Context) (map[string]metrics.PendingStat, error) {
	return func(ctx context.Context) (map[string]metrics.PendingStat, error) {
		st, err := store.PendingInterruptStats(ctx)
		if err != nil {
			return nil, err
		}
		out := make(map[string]metrics.PendingStat, len(st))
		for k, v := range st {
			out[k] = metrics.PendingStat{Pending: v.Pending, OldestSeconds: v.OldestSeconds}
		}
		return out, nil
	}
}
