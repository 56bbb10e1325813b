package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/config"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/llm/ollama"
	"github.com/gatehousehq/gatehouse/internal/llm/openai"
	"github.com/gatehousehq/gatehouse/internal/llm/scripted"
	"github.com/gatehousehq/gatehouse/internal/metrics"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/requests"
	"github.com/gatehousehq/gatehouse/internal/runner"
	"github.com/gatehousehq/gatehouse/internal/timekeeper"
	"github.com/gatehousehq/gatehouse/internal/web"
	"github.com/gatehousehq/gatehouse/internal/workflows/analyze"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
	"github.com/gatehousehq/gatehouse/internal/workflows/pm"
	"github.com/gatehousehq/gatehouse/internal/workflows/request"
	"github.com/gatehousehq/gatehouse/internal/workflows/sdd"
	"github.com/gatehousehq/gatehouse/internal/workflows/slogan"
)

const serveSynopsis = `serve

Applies pending migrations, serves HTTP (API, desk, action links, Slack
callbacks) and runs the task workers, the timers of deadlines, reminders and
escalations, and the notification senders. Hourly, one replica at a time, it
prunes what GATEHOUSE_HISTORY_RETENTION (checkpoint history; default off) and
GATEHOUSE_OUTBOX_RETENTION (finished deliveries with their attempts, ended
action links; default 720h, 0 keeps them) say. The settings are below.`

func cmdServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", serveSynopsis, stdout)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printSettings(stdout)
		}
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("serve takes no arguments, got %q", fs.Arg(0))}
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	provider, err := newProvider(cfg.LLM, log.With("component", "llm"))
	if err != nil {
		return err
	}
	if sp, ok := provider.(*scripted.Provider); ok {
		for _, role := range sp.UnknownRoles() {
			log.Warn("LLM_SCRIPT_FILE names a role no workflow of this build has", "role", role)
		}
	}

	pool, err := openMigrated(ctx, cfg.DatabaseURL, 2*cfg.Workers+16, "start")
	if err != nil {
		return err
	}
	defer pool.Close()
	store := postgres.NewStore(pool)
	authSvc := auth.NewService(auth.Config{Store: store, BootstrapToken: cfg.BootstrapToken,
		SessionIdle: cfg.Auth.SessionIdle, SessionMax: cfg.Auth.SessionMax, Logger: log.With("component", "auth")})
	generated, err := authSvc.EnsureAdmin(ctx, cfg.AdminPassword)
	if err != nil {
		return fmt.Errorf("admin user: %w", err)
	}
	if generated != "" {
		// Shown this once: only its hash is stored.
		log.Warn("created the admin user with a generated password, shown this once; sign in at the url below "+
			"and change it (click admin at the top right), or run: "+passwdCommand(cfg.DatabaseURL)+
			"; or set GATEHOUSE_ADMIN_PASSWORD", "username", auth.AdminUser, "password", generated)
	}
	pruneCtx, stopPrune := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPrune()
	go pruneAuth(pruneCtx, authSvc, log.With("component", "auth"))
	go foldAnalytics(pruneCtx, store, log.With("component", "analytics"))
	// The history prune has its own context: shutdown stops it first, and
	// waits for it, so no statement of it is in flight when the pool closes.
	retentionCtx, stopRetention := context.WithCancel(context.WithoutCancel(ctx))
	retentionDone := make(chan struct{})
	if cfg.HistoryRetention > 0 {
		log.Info("checkpoint history retention", "retention", cfg.HistoryRetention)
		go func() {
			defer close(retentionDone)
			pruneHistory(retentionCtx, store, cfg.HistoryRetention, log.With("component", "retention"))
		}()
	} else {
		close(retentionDone)
	}
	defer func() { stopRetention(); <-retentionDone }()
	outboxPruneDone := make(chan struct{})
	if cfg.OutboxRetention > 0 {
		log.Info("notification retention", "retention", cfg.OutboxRetention)
		go func() {
			defer close(outboxPruneDone)
			pruneNotifications(retentionCtx, store, cfg.OutboxRetention, log.With("component", "retention"))
		}()
	} else {
		close(outboxPruneDone)
	}
	defer func() { stopRetention(); <-outboxPruneDone }()
	notifyCtx, stopNotify := context.WithCancel(context.WithoutCancel(ctx))
	defer stopNotify()
	store.StartNotifier(notifyCtx, log.With("component", "notify"))
	// Metrics come from the events the engine and the store commit, the
	// provider's calls and the checkpoint writes (internal/metrics).
	met := metrics.New(metrics.Config{Reader: store, PendingInterrupts: store.PendingInterruptCounts,
		PendingStats: pendingStats(store), Logger: log.With("component", "metrics")})
	metCtx, stopMetrics := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMetrics()
	go met.Run(metCtx)
	store.AddSink(met)
	provider = met.Provider(provider)
	workflows, err := buildWorkflows(provider, cfg.LLM)
	if err != nil {
		return err
	}

	// The hub and the workers outlive ctx (the signal): they stop in order
	// below.
	hubCtx, stopHub := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHub()
	hub := live.NewHub(cfg.DatabaseURL, store, log.With("component", "live"))
	// Deadlines, reminders and escalations (SPEC §11) fire on whichever
	// replica's keeper takes them first; each wakes for timers raised here
	// at once, and for those raised elsewhere through the hub.
	keeper := timekeeper.New(store, cfg.Auth.Policy, log.With("component", "timers"))
	store.OnTimer(keeper.Poke)
	hub.OnNotify(postgres.ChannelTimers, keeper.PokePayload)
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(hubCtx) }()
	// Notifications: configured on the store before anything commits.
	sender := newSender(cfg, store, log)
	hub.OnOutbox(sender.Wake)
	sender.Start()
	// The hub is the engine's sink too: this replica's own events reach its
	// websockets straight from the commit.
	engine, err := graph.NewEngine(met.Checkpointer(store), workflows, graph.WithLogger(log), graph.WithSink(hub),
		graph.WithRaiseHook(cfg.Auth.Policy.Schedule),
		graph.WithSink(met))
	if err != nil {
		return err
	}
	met.AddInterruptKinds(interruptKinds(workflows)...)
	// Tasks stored under another definition of their workflow: said at
	// once, before a decision on one meets a 409.
	warnDefinitions(ctx, store, workflows, log.With("component", "definitions"))

	owner := replicaName()
	run := runner.New(store, engine, runner.Config{Owner: owner, Workers: cfg.Workers, LeaseTTL: cfg.LeaseTTL,
		Logger: log.With("component", "runner")})
	if cfg.Workers > 0 {
		hub.OnRunnable(run.WakeFor)
		run.Start()
	}

	// A decision taken here hands its task to a worker here, when one is
	// free: leased in the decision's transaction, run without a claim.
	decider := newDecider(cfg, engine, store, run, log)
	warnPolicyUsers(ctx, store, cfg.Auth.Policy, log)
	// Approval requests (SPEC §16): their tasks are created waiting; those
	// whose process stopped between the two writes are made now.
	reqs := requests.NewService(requests.Config{Store: store, Engine: engine, Events: hub, Wake: run.Wake,
		PublicURL: cfg.Notify.PublicURL, AllowPrivate: cfg.Notify.WebhookAllowPrivate, Logger: log.With("component", "requests")})
	if err := reqs.Recover(ctx); err != nil {
		log.Warn("creating the tasks of requests made before a stop", "error", err)
	}
	srv := web.New(web.Deps{Engine: engine, Store: store, Hub: hub, Wake: run.Wake, Auth: authSvc, Decider: decider, Requests: reqs,
		TrustProxy: cfg.Auth.TrustProxy, CORSOrigins: cfg.CORSOrigins, ClaimTTL: cfg.Auth.ClaimTTL,
		Ready: func(ctx context.Context) error { return postgres.Ready(ctx, pool) }, Logger: log.With("component", "http"),
		Version: version, Metrics: met.Handler(), LLMProvider: provider.Name(),
		SlackSigningSecret:  cfg.Notify.SlackSigningSecret,
		WebhookAllowPrivate: cfg.Notify.WebhookAllowPrivate, OutboxRetention: cfg.OutboxRetention})
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
	log.Info("gatehouse serving", "addr", addr.String(), "url", "http://"+addr.String(), "replica", owner,
		"workers", cfg.Workers, "lease_ttl", cfg.LeaseTTL, "llm", provider.Name(), "version", version)

	<-ctx.Done()
	log.Info("shutting down", "grace", cfg.ShutdownGrace)
	stopRetention()
	<-retentionDone
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

func newProvider(c config.LLM, log *slog.Logger) (llm.Provider, error) {
	switch c.Provider {
	case "scripted":
		var script *scripted.Script
		if c.ScriptFile != "" {
			s, err := scripted.LoadScript(c.ScriptFile)
			if err != nil {
				return nil, usageError{"LLM_SCRIPT_FILE: " + err.Error()}
			}
			script = s
		}
		return scripted.New(scripted.Chain(feature.Builtin, sdd.Builtin, pm.Builtin,
			slogan.Builtin, analyze.Builtin), script), nil
	case ollama.Name:
		return ollama.New(ollama.Config{BaseURL: c.OllamaBaseURL, Model: c.OllamaModel, Temperature: c.OllamaTemp,
			Timeout: c.OllamaTimeout, Logger: log}), nil
	case openai.Name:
		return openai.New(openai.Config{BaseURL: c.OpenAIBaseURL, APIKey: c.OpenAIAPIKey, Model: c.OpenAIModel,
			Timeout: c.OpenAITimeout, MaxTokens: c.OpenAIMaxTokens, Logger: log}), nil
	default:
		return nil, usageError{fmt.Sprintf("LLM_PROVIDER=%q: want scripted, ollama or openai", c.Provider)}
	}
}

// buildWorkflows compiles every workflow over p: feature, sdd, pm, slogan
// (its default max_turns is OLLAMA_MAX_TURNS) and analyze.
func buildWorkflows(p llm.Provider, c config.LLM) ([]graph.Workflow, error) {
	f, err := feature.New(feature.LLMExecutor(p))
	if err != nil {
		return nil, err
	}
	d, err := sdd.New(p)
	if err != nil {
		return nil, err
	}
	m, err := pm.New(p)
	if err != nil {
		return nil, err
	}
	var sloganOpts []slogan.Option
	if c.OllamaMaxTurns > 0 {
		sloganOpts = append(sloganOpts, slogan.WithMaxTurns(min(c.OllamaMaxTurns, slogan.MaxMaxTurns)))
	}
	s, err := slogan.New(p, sloganOpts...)
	if err != nil {
		return nil, err
	}
	a, err := analyze.New(p)
	if err != nil {
		return nil, err
	}
	r, err := request.New()
	if err != nil {
		return nil, err
	}
	return []graph.Workflow{f, d, m, s, a, r}, nil
}

// pruneAuth deletes ended sessions and old login attempts, hourly.
func pruneAuth(ctx context.Context, svc *auth.Service, log *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if err := svc.Prune(ctx); err != nil && ctx.Err() == nil {
			log.Warn("pruning sessions and login attempts", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// foldAnalytics moves the analytics deltas into the rollups once a
// minute (reports fold too): deltas are a row per decision.
func foldAnalytics(ctx context.Context, store *postgres.Store, log *slog.Logger) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := store.FoldAnalytics(ctx); err != nil && ctx.Err() == nil {
			log.Warn("folding analytics", "error", err)
		} else if n > 0 {
			log.Debug("folded analytics", "decisions_and_closings", n)
		}
	}
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

// passwdCommand is the command that changes the admin's password, spelt
// so it works when pasted into a shell where this process was started:
// this binary's own path (bin/gatehouse under make run; go run's
// temporary binary is no use after it exits), and DATABASE_URL given
// inline when it carries no password (the private cluster of make run,
// whose URL the shell does not have); otherwise the reader's own.
func passwdCommand(databaseURL string) string {
	bin := os.Args[0]
	switch {
	case bin == "":
		bin = "gatehouse"
	case strings.Contains(bin, "go-build"):
		bin = "go run ./cmd/web"
	}
	if u, err := url.Parse(databaseURL); err == nil && databaseURL != "" {
		if _, hasPassword := u.User.Password(); !hasPassword {
			return "DATABASE_URL='" + databaseURL + "' " + bin + " users passwd admin"
		}
	}
	return bin + " users passwd admin (with DATABASE_URL set)"
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
