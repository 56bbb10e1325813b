package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/gatehousehq/gatehouse"
)

const serveSynopsis = `serve

Applies pending migrations, serves HTTP (API, desk, action links, Slack
callbacks) and runs the task workers, the timers of deadlines, reminders and
escalations, and the notification senders. Hourly, one replica at a time, it
prunes what GATEHOUSE_HISTORY_RETENTION (checkpoint history; default off) and
GATEHOUSE_OUTBOX_RETENTION (finished deliveries with their attempts, ended
action links; default 720h, 0 keeps them) say. The settings are below.`

// cmdServe is gatehouse serve: the root package's Server with the
// built-in workflows, until the signal.
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
	settings, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	cfg, err := gatehouse.ConfigFromEnv(getenv)
	if err != nil {
		return usageError{strings.ReplaceAll(err.Error(), "\n", "; ")}
	}
	cfg.Logger = settings.Logger(stderr)
	srv, err := gatehouse.New(cfg, gatehouse.WithVersion(version),
		gatehouse.WithPasswordCommand(passwdCommand(cfg.DatabaseURL)))
	var ce *gatehouse.ConfigError
	if errors.As(err, &ce) {
		return usageError{strings.ReplaceAll(strings.TrimPrefix(err.Error(), "gatehouse: "), "\n", "; ")}
	}
	if err != nil {
		return err
	}
	return srv.Run(ctx)
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
