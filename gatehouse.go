// Package gatehouse runs the whole Gatehouse product — the approval desk,
// the HTTP API, the task workers, the timers of deadlines and reminders,
// the notification senders and the database migrations — inside a Go
// program of your own, with your own workflows beside (or instead of) the
// five built-in ones.
//
// Workflows are graphs written with package
// github.com/gatehousehq/gatehouse/graph. A program compiles them, reads
// its settings from the environment and runs a Server until its context
// ends:
//
//	cfg, err := gatehouse.ConfigFromEnv(os.Getenv)
//	if err != nil {
//		log.Fatal(err)
//	}
//	srv, err := gatehouse.New(cfg, gatehouse.WithWorkflows(refund))
//	if err != nil {
//		log.Fatal(err)
//	}
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	if err := srv.Run(ctx); err != nil {
//		log.Fatal(err)
//	}
//
// The settings are those of `gatehouse serve` (DATABASE_URL,
// GATEHOUSE_ADDR, GATEHOUSE_POLICY_FILE, …); the most common ones are
// fields of Config that a program may set after ConfigFromEnv. A graph's
// gate kinds are ordinary interrupt kinds: the inbox, the policy file, the
// analytics, the notifications and the LangGraph API serve them like the
// built-in ones.
//
// The module is at v0: this package and package graph are its public API
// and may still change between minor versions; docs/embedding.md says
// what is expected to stay. Everything under internal/ is private.
//
// It is the composition root: it imports the internal packages it wires
// (store, workers, timers, notifications, chores, the server); nothing of
// the module imports it but cmd/web and the examples.
package gatehouse

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/config"
	"github.com/gatehousehq/gatehouse/internal/workflows/builtin"
)

// Config is the configuration of a Server. ConfigFromEnv reads it from the
// environment variables of `gatehouse serve`; a program may then change
// the exported fields. The zero Config with a DatabaseURL is a valid one:
// every other setting then has its default.
type Config struct {
	// DatabaseURL is the PostgreSQL connection string (DATABASE_URL);
	// required.
	DatabaseURL string
	// Addr is the address the desk and the API listen on
	// (GATEHOUSE_ADDR, default 127.0.0.1:8080; port 0 picks a free one,
	// which Server.Addr reports).
	Addr string
	// Workers is the number of concurrent task executors of this replica
	// (GATEHOUSE_WORKERS): 0 means the default, 8; a negative number runs
	// no task on this replica (GATEHOUSE_WORKERS=0 reads as -1).
	Workers int
	// LeaseTTL is how long a task's lease lasts; a dead replica's tasks
	// move after it (GATEHOUSE_LEASE_TTL, default 15s).
	LeaseTTL time.Duration
	// ShutdownGrace bounds the graceful shutdown: requests and node runs in
	// flight get this long to finish (GATEHOUSE_SHUTDOWN_GRACE, default
	// 10s).
	ShutdownGrace time.Duration
	// BootstrapToken, when set, is an admin API token acting as its own
	// principal "bootstrap" (GATEHOUSE_BOOTSTRAP_TOKEN).
	BootstrapToken string
	// AdminPassword, when set, is the admin user's password
	// (GATEHOUSE_ADMIN_PASSWORD); when unset on first start a random one
	// is generated and logged once.
	AdminPassword string
	// Logger receives the server's logs. Nil: a text (or JSON, with
	// GATEHOUSE_LOG_FORMAT=json) handler on standard error at
	// GATEHOUSE_LOG_LEVEL.
	Logger *slog.Logger

	// env holds every other setting, as ConfigFromEnv read it; nil: the
	// defaults.
	env *config.Config
}

// ConfigFromEnv reads the settings of `gatehouse serve` through getenv
// (os.Getenv, or a map's lookup in tests) and checks them as a whole. The
// error names every bad variable, one per line. A missing DATABASE_URL is
// not an error here (New reports it), so a program may set it afterwards.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c, err := config.Load(getenv)
	if err != nil {
		return Config{}, err
	}
	workers := c.Workers
	if workers == 0 {
		workers = -1
	}
	return Config{DatabaseURL: c.DatabaseURL, Addr: c.Addr, Workers: workers, LeaseTTL: c.LeaseTTL,
		ShutdownGrace: c.ShutdownGrace, BootstrapToken: c.BootstrapToken, AdminPassword: c.AdminPassword,
		env: &c}, nil
}

// ConfigError is a setting New cannot work with. Its message names the
// setting (the environment variable, or the Config field it comes from).
type ConfigError struct {
	// Setting is the environment variable, e.g. "DATABASE_URL".
	Setting string
	// Problem says what is wrong.
	Problem string
}

// Error says what was refused or went wrong, for people.
func (e *ConfigError) Error() string { return e.Setting + ": " + e.Problem }

// resolve merges the exported fields over the other settings and checks
// them.
func (c Config) resolve() (config.Config, error) {
	var r config.Config
	if c.env != nil {
		r = *c.env
	} else {
		// The defaults: Load with nothing set cannot fail.
		r, _ = config.Load(func(string) string { return "" })
	}
	r.DatabaseURL, r.BootstrapToken, r.AdminPassword = c.DatabaseURL, c.BootstrapToken, c.AdminPassword
	if c.Addr != "" {
		r.Addr = c.Addr
	}
	switch {
	case c.Workers < 0:
		r.Workers = 0
	case c.Workers > 0:
		r.Workers = c.Workers
	}
	if c.LeaseTTL != 0 {
		r.LeaseTTL = c.LeaseTTL
	}
	if c.ShutdownGrace != 0 {
		r.ShutdownGrace = c.ShutdownGrace
	}
	var errs []error
	bad := func(setting, format string, args ...any) {
		errs = append(errs, &ConfigError{Setting: setting, Problem: fmt.Sprintf(format, args...)})
	}
	if r.DatabaseURL == "" {
		bad("DATABASE_URL", "is not set (Config.DatabaseURL)")
	} else if _, err := pgxpool.ParseConfig(r.DatabaseURL); err != nil {
		bad("DATABASE_URL", "%v", err)
	}
	if _, _, err := net.SplitHostPort(r.Addr); err != nil {
		bad("GATEHOUSE_ADDR", "%q: want host:port", r.Addr)
	}
	if r.LeaseTTL < 0 {
		bad("GATEHOUSE_LEASE_TTL", "%s: want a positive duration", r.LeaseTTL)
	}
	if r.ShutdownGrace < 0 {
		bad("GATEHOUSE_SHUTDOWN_GRACE", "%s: want a positive duration", r.ShutdownGrace)
	}
	if r.AdminPassword != "" {
		if err := auth.CheckPassword(r.AdminPassword); err != nil {
			bad("GATEHOUSE_ADMIN_PASSWORD", "%v", err)
		}
	}
	return r, errors.Join(errs...)
}

// logger is c.Logger, or one on standard error as the settings say.
func (c Config) logger(r config.Config) *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return r.Logger(os.Stderr)
}

// Option configures New.
type Option func(*options)

type options struct {
	workflows   []graph.Workflow
	graphs      []func() (graph.Workflow, error)
	noBuiltins  bool
	version     string
	passwordCmd string
}

// WithWorkflows adds compiled workflows beside the built-in ones. A
// workflow whose name another one has (a built-in, or one given twice) is
// an error from New.
func WithWorkflows(ws ...graph.Workflow) Option {
	return func(o *options) { o.workflows = append(o.workflows, ws...) }
}

// WithGraph adds the workflow b compiles to; New returns the error of a
// graph that does not compile, naming the workflow. It is WithWorkflows
// for a program that leaves compiling to New.
func WithGraph[S any](b *graph.Builder[S]) Option {
	return func(o *options) {
		o.graphs = append(o.graphs, func() (graph.Workflow, error) {
			g, err := b.Compile()
			if err != nil {
				return nil, err
			}
			return g, nil
		})
	}
}

// WithoutBuiltins leaves out the five built-in workflows (feature, sdd,
// pm, slogan, analyze): the server runs the workflows given to it, and
// "request", the workflow of /api/v1/requests (SPEC §16), which it
// always runs.
func WithoutBuiltins() Option {
	return func(o *options) { o.noBuiltins = true }
}

// WithVersion names the program's version: the OpenAPI document, the
// LangGraph API's /langgraph/info and the start-up log show it (default
// "dev").
func WithVersion(v string) Option {
	return func(o *options) { o.version = v }
}

// WithPasswordCommand names the command that sets the admin's password,
// for the log line that shows a generated one (e.g. "bin/gatehouse users
// passwd admin"); without it the line says to change it in the desk.
func WithPasswordCommand(cmd string) Option {
	return func(o *options) { o.passwordCmd = cmd }
}

// New checks the configuration and the workflows and returns a Server
// ready to Run; it does not touch the database. Errors name the problem:
// a setting (*ConfigError), a workflow name given twice, a graph that does
// not compile, an LLM script that does not parse.
func New(cfg Config, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.version == "" {
		o.version = "dev"
	}
	r, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("gatehouse: %w", err)
	}
	log := cfg.logger(r)
	provider, err := builtin.Provider(r.LLM, log.With("component", "llm"))
	if err != nil {
		var se *builtin.SettingError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("gatehouse: %w", &ConfigError{Setting: se.Name, Problem: se.Problem})
		}
		return nil, fmt.Errorf("gatehouse: %w", err)
	}
	s := &Server{cfg: r, log: log, provider: provider, version: o.version, passwordCmd: o.passwordCmd,
		builtins: !o.noBuiltins, ready: make(chan struct{})}
	// The built-in workflows are compiled in Run, over the provider that
	// Run wraps with metrics; here they are compiled once to claim their
	// names.
	ws, err := s.builtinWorkflows(provider)
	if err != nil {
		return nil, fmt.Errorf("gatehouse: built-in workflows: %w", err)
	}
	names := map[string]string{}
	for _, w := range ws {
		names[w.Name()] = "a built-in workflow"
		s.builtinNames = append(s.builtinNames, w.Name())
	}
	add := func(w graph.Workflow, where string) error {
		if w == nil || reflect.ValueOf(w).IsNil() {
			return fmt.Errorf("gatehouse: %s is nil (did its Compile fail?)", where)
		}
		if prev, ok := names[w.Name()]; ok {
			hint := ""
			if prev == "a built-in workflow" {
				hint = " (WithoutBuiltins leaves the built-in ones out)"
			}
			return fmt.Errorf("gatehouse: workflow %q (%s): %s has this name%s", w.Name(), where, prev, hint)
		}
		names[w.Name()] = where
		s.custom = append(s.custom, w)
		return nil
	}
	for i, w := range o.workflows {
		if err := add(w, fmt.Sprintf("WithWorkflows #%d", i+1)); err != nil {
			return nil, err
		}
	}
	for i, compile := range o.graphs {
		w, err := compile()
		if err != nil {
			return nil, fmt.Errorf("gatehouse: WithGraph #%d does not compile: %w", i+1, err)
		}
		if err := add(w, fmt.Sprintf("WithGraph #%d", i+1)); err != nil {
			return nil, err
		}
	}
	if !s.builtins && len(s.custom) == 0 {
		return nil, errors.New("gatehouse: no workflow to serve: WithoutBuiltins needs WithWorkflows or WithGraph")
	}
	return s, nil
}
