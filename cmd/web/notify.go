package main

import (
	"log/slog"

	"github.com/gatehousehq/gatehouse/internal/config"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/notify/email"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/requests"
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
	store.SetOutbox(postgres.Outbox{Email: channels[notify.ChannelEmail] != nil, Slack: channels[notify.ChannelSlack] != nil,
		Audience: postgres.PolicyAudience(cfg.Auth.Policy)}.WithSender(s))
	return s
}
