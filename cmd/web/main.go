// Command gatehouse is Gatehouse in one binary: the HTTP API and approval
// desk, the task workers, and the database migrations.
//
// It holds flags and subcommands only: serve is the root package's Server;
// nothing imports it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/internal/config"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/workflows/builtin"
)

// version is set at build time (-ldflags "-X main.version=…").
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

// usageError is a wrong command line or setting: exit status 2, one line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

const usage = `gatehouse — durable graph workflows with a human approval desk

Usage:
  gatehouse [command] [flags]

Commands:
  serve              apply pending migrations, serve HTTP and run task workers (default)
  migrate up         apply pending migrations
  migrate down       roll back the latest migration
  migrate status     list migrations and whether they are applied
  run WORKFLOW --input FILE
                     start a task and follow it in the terminal, answering its
                     interrupts at a prompt (run --attach TASK_ID: an existing one)
  users add NAME --role ROLE [--kinds KINDS] [--email EMAIL]
                     add a user; the password is read from standard input
  users list | disable NAME | enable NAME | passwd NAME | role NAME --role ROLE
  users email NAME EMAIL | slack NAME SLACK_ID
                     where a user is notified, and who they are on Slack
  tokens create NAME --role ROLE
                     make an API token (printed once)
  tokens list | revoke ID
  webhooks add URL [--events TYPES]
                     add a Standard Webhooks endpoint (its secret is printed once)
  webhooks list | remove ID
  prune --older-than DURATION [--dry-run]
                     delete the intermediate checkpoints of tasks that ended
                     more than DURATION (e.g. 720h) ago; keep the first, those
                     at interrupts and decisions, and the last
  policy show        print the effective approval policy (GATEHOUSE_POLICY_FILE
                     with the GATEHOUSE_APPROVALS / GATEHOUSE_SOD_KINDS shorthands)
  tasks check        list the waiting and failed tasks stored under another
                     definition of their workflow; exit 1 when one cannot
                     resume (its node is gone)
  version            print the version

Every command takes --help. Settings come from the environment:
`

func printUsage(w io.Writer) {
	fmt.Fprint(w, usage)
	printSettings(w)
}

// printSettings lists the environment variables with their meaning and
// default.
func printSettings(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, v := range config.Vars {
		fmt.Fprintf(tw, "  %s\t%s\t(default %s)\n", v.Name, v.Meaning, v.Default)
	}
	tw.Flush()
}

// run is main without the process: testable, and deferred cleanups run.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && (!strings.HasPrefix(args[0], "-") || args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = cmdServe(ctx, args, getenv, stdout, stderr)
	case "migrate":
		err = cmdMigrate(ctx, args, getenv, stdout, stderr)
	case "run":
		err = cmdRun(ctx, args, getenv, stdin, stdout, stderr)
	case "users":
		err = cmdUsers(ctx, args, getenv, stdin, stdout)
	case "tokens":
		err = cmdTokens(ctx, args, getenv, stdout, stderr)
	case "webhooks":
		err = cmdWebhooks(ctx, args, getenv, stdout, stderr)
	case "prune":
		err = cmdPrune(ctx, args, getenv, stdout)
	case "policy":
		err = cmdPolicy(ctx, args, getenv, stdout, stderr)
	case "tasks":
		err = cmdTasks(ctx, args, getenv, stdout)
	case "version":
		fmt.Fprintln(stdout, "gatehouse", version)
	case "help", "-h", "-help", "--help":
		printUsage(stdout)
	default:
		err = usageError{fmt.Sprintf("unknown command %q (try gatehouse --help)", cmd)}
	}
	var ue usageError
	var es exitStatus
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &es):
		return es.code
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "gatehouse:", ue.msg)
		return 2
	default:
		fmt.Fprintln(stderr, "gatehouse:", err)
		return 1
	}
}

// flagSet is a command's flags: a parse error is one line (exit 2), and
// --help prints the command's usage to stdout.
type flagSet struct {
	*flag.FlagSet
	synopsis string
	stdout   io.Writer
}

func newFlags(name, synopsis string, stdout io.Writer) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, synopsis: synopsis, stdout: stdout}
}

func parseFlags(fs *flagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(fs.stdout, "Usage: gatehouse %s\n\n", fs.synopsis)
			fs.SetOutput(fs.stdout)
			fs.PrintDefaults()
			fmt.Fprintln(fs.stdout, "Settings come from the environment; see gatehouse --help.")
			return err
		}
		return usageError{err.Error()}
	}
	return nil
}

func loadConfig(getenv func(string) string) (config.Config, error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return cfg, usageError{strings.ReplaceAll(err.Error(), "\n", "; ")}
	}
	if cfg.DatabaseURL == "" {
		return cfg, usageError{"DATABASE_URL is not set (make run starts a private PostgreSQL and sets it)"}
	}
	if _, err := pgxpool.ParseConfig(cfg.DatabaseURL); err != nil {
		return cfg, usageError{"DATABASE_URL: " + err.Error()}
	}
	return cfg, nil
}

func cmdMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", "migrate up|down|status", stdout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"migrate needs one of: up, down, status"}
	}
	action := fs.Arg(0)
	switch action {
	case "up", "down", "status":
	default:
		return usageError{fmt.Sprintf("migrate %q: want up, down or status", action)}
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	pool, err := postgres.Open(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	switch action {
	case "up":
		if err := postgres.Migrate(ctx, pool); err != nil {
			return err
		}
	case "down":
		if err := postgres.MigrateDown(ctx, pool); err != nil {
			return err
		}
	}
	st, err := postgres.Migrations(ctx, pool)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tAPPLIED\tFILE")
	for _, m := range st {
		fmt.Fprintf(tw, "%d\t%v\t%s\n", m.Version, m.Applied, m.Source)
	}
	return tw.Flush()
}

// settingError is err as a usage error (exit 2, one line) when it is a
// setting that cannot work.
func settingError(err error) error {
	var se *builtin.SettingError
	if errors.As(err, &se) {
		return usageError{se.Error()}
	}
	return err
}
