package main

// gatehouse webhooks add|list|remove: Standard Webhooks endpoints (SPEC §12).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

const webhooksSynopsis = `webhooks add URL [--events TYPES]   (prints the signing secret once: store it)
       gatehouse webhooks list
       gatehouse webhooks remove ID

Each event is POSTed to URL as JSON, signed per Standard Webhooks 1.0
(headers webhook-id, webhook-timestamp, webhook-signature), retried with
backoff (5s, 5m, 30m, 2h, 5h, 10h, 14h, 20h, 24h, scaled by
GATEHOUSE_WEBHOOK_BACKOFF_SCALE) until it answers 2xx; 410 disables the
endpoint. Types: interrupt.raised, interrupt.decided, interrupt.reminder,
interrupt.escalated, interrupt.expired, task.succeeded, task.failed,
task.cancelled (default: all). URLs resolving to loopback, private or
link-local addresses are refused unless GATEHOUSE_WEBHOOK_ALLOW_PRIVATE=true.

Flags:`

func cmdWebhooks(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var events string
	fs := newFlags("webhooks", webhooksSynopsis, stdout)
	fs.StringVar(&events, "events", "", "event `TYPES` to deliver, comma-separated (default: every type)")
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) == 0 {
		return usageError{"webhooks needs one of: add, list, remove (try gatehouse webhooks --help)"}
	}
	sub, rest := pos[0], pos[1:]
	var types []string
	switch sub {
	case "add":
		if len(rest) != 1 {
			return usageError{"webhooks add takes one URL"}
		}
		for _, e := range strings.Split(events, ",") {
			if e = strings.TrimSpace(e); e != "" {
				types = append(types, e)
			}
		}
		if err := notify.CheckEvents(types); err != nil {
			return usageError{"--events: " + err.Error()}
		}
	case "list":
		if len(rest) > 0 || events != "" {
			return usageError{"webhooks list takes no arguments"}
		}
	case "remove":
		if len(rest) != 1 || events != "" {
			return usageError{"webhooks remove takes one ID (see gatehouse webhooks list)"}
		}
	default:
		return usageError{fmt.Sprintf("webhooks %q: want add, list or remove", sub)}
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	if sub == "add" {
		// Checked before the database is opened: a refused URL changes nothing.
		if err := notify.CheckURL(ctx, rest[0], cfg.Notify.WebhookAllowPrivate); err != nil {
			return usageError{"URL: " + err.Error()}
		}
	}
	pool, err := postgres.OpenMigrated(ctx, cfg.DatabaseURL, 2, "run")
	if err != nil {
		return err
	}
	defer pool.Close()
	store := postgres.NewStore(pool, postgres.Options{})
	actor := cliActor(getenv)
	switch sub {
	case "add":
		secret := notify.NewSecret()
		ep, err := store.AddEndpoint(ctx, notify.Endpoint{URL: strings.TrimSpace(rest[0]), Secret: secret, Events: types}, actor)
		if err != nil {
			return err
		}
		// The secret alone on stdout (SECRET=$(gatehouse webhooks add …)).
		fmt.Fprintln(stdout, secret)
		fmt.Fprintf(stderr, "webhook %s → %s (%s) added: its signing secret is shown this once\n", ep.ID, ep.URL, eventsOf(ep.Events))
	case "list":
		eps, err := store.Endpoints(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tURL\tEVENTS\tSTATE")
		for _, e := range eps {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.ID, e.URL, eventsOf(e.Events), endpointState(e))
		}
		return tw.Flush()
	case "remove":
		if err := store.RemoveEndpoint(ctx, rest[0], actor); err != nil {
			if errors.Is(err, notify.ErrNotFound) {
				return usageError{fmt.Sprintf("no webhook has id %q (see gatehouse webhooks list)", rest[0])}
			}
			return err
		}
		fmt.Fprintf(stdout, "webhook %s removed\n", rest[0])
	}
	return nil
}

func eventsOf(events []string) string {
	if len(events) == 0 {
		return "all"
	}
	return strings.Join(events, ",")
}

func endpointState(e notify.Endpoint) string {
	if e.DisabledAt != nil {
		return "disabled since " + e.DisabledAt.UTC().Format(time.RFC3339)
	}
	return "active"
}
