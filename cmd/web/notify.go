package main

import (
	"log/slog"
	"slices"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/config"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/web"
)

// newSender wires the notifications of serve (SPEC §12): what the store
// writes to the outbox in each event's transaction, and the sender that
// delivers it by webhook, email and Slack, woken by this replica's commits
// and by the NOTIFYs of the others (hub.OnOutbox).
func newSender(cfg config.Config, store *postgres.Store, log *slog.Logger) *notify.Sender {
	n := cfg.Notify
	channels := map[string]notify.Channel{
		notify.ChannelWebhook: notify.NewWebhooks(store, web.WebhookBody(n.PublicURL), n.WebhookAllowPrivate),
	}
	s := notify.NewSender(notify.Config{Store: store, Channels: channels, Scale: n.WebhookBackoffScale,
		Logger: log.With("component", "notify")})
	store.SetOutbox(postgres.Outbox{Email: channels[notify.ChannelEmail] != nil, Slack: channels[notify.ChannelSlack] != nil,
		Audience: audience(cfg.Auth.Policy), Wake: s.Wake})
	return s
}

// audience turns the policy's deciders of a kind, as raised, into the
// store's terms: the roles that satisfy a role: ref (roles are
// cumulative), the users of user: and group: refs, and separation of
// duties.
func audience(p auth.Policy) func(kind string) postgres.Audience {
	return func(kind string) postgres.Audience {
		d := p.Deciders(kind, 0)
		a := postgres.Audience{Everyone: d.Everyone, Users: d.Users(), SoD: p.SeparateDuties(kind)}
		for _, r := range auth.Roles {
			if slices.ContainsFunc(d.Roles(), r.Allows) {
				a.Roles = append(a.Roles, string(r))
			}
		}
		return a
	}
}
