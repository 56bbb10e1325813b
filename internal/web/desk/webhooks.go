package desk

// /admin/webhooks: Standard Webhooks endpoints, their delivery log, and
// Redeliver (admin).

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/pgtext"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/views"
)

// deliveriesShown is how many of an endpoint's latest deliveries the page
// lists.
const deliveriesShown = 20

func (d *desk) registerWebhooks() {
	admin := auth.RoleAdmin
	d.route(http.MethodGet, "/admin/webhooks", admin, d.webhooksPage, true)
	d.formRoute(http.MethodPost, "/admin/webhooks", admin, d.addWebhookForm)
	d.route(http.MethodPost, "/admin/webhooks/:id/remove", admin, d.removeWebhookForm, true)
	d.route(http.MethodPost, "/admin/webhooks/deliveries/:id/redeliver", admin, d.redeliverForm, true)
}

func (d *desk) webhooksPage(c echo.Context) error {
	return d.writeWebhooks(c, http.StatusOK, views.WebhooksPage{Message: c.QueryParam("done")})
}

func (d *desk) writeWebhooks(c echo.Context, status int, page views.WebhooksPage) error {
	ctx := c.Request().Context()
	eps, err := d.s.store.Endpoints(ctx)
	if err != nil {
		return err
	}
	page.Page = d.pageMeta(ctx, "Webhooks", "webhooks")
	page.Events = notify.EventTypes
	page.Retention = retentionNote(d.s.outboxRetention)
	for _, e := range eps {
		row := views.EndpointRow{ID: e.ID, URL: e.URL, Events: "all events", State: "active", Disabled: e.DisabledAt != nil}
		if len(e.Events) > 0 {
			row.Events = strings.Join(e.Events, ", ")
		}
		if e.DisabledAt != nil {
			row.State = "disabled: " + e.DisabledReason
		}
		ds, err := d.s.store.EndpointDeliveries(ctx, e.ID, deliveriesShown)
		if err != nil {
			return err
		}
		for _, dl := range ds {
			dr := views.DeliveryRow{ID: dl.ID, Event: dl.Event, State: dl.State, TaskID: dl.TaskID, Created: dl.CreatedAt}
			if dl.State == notify.StatePending {
				dr.NextAt = dl.NextAt
			}
			for _, a := range dl.Attempts {
				dr.Attempts = append(dr.Attempts, views.AttemptRow{N: a.Attempt, At: a.At, DurationMS: a.DurationMS,
					Status: a.StatusCode, OK: a.OK, Error: a.Error})
			}
			row.Deliveries = append(row.Deliveries, dr)
		}
		page.Endpoints = append(page.Endpoints, row)
	}
	return response.Page(c, status, views.WebhooksView(page))
}

// addWebhookForm: POST /admin/webhooks — url, events. The secret is shown
// on the answer, once.
func (d *desk) addWebhookForm(c echo.Context) error {
	ctx := c.Request().Context()
	raw, evRaw := strings.TrimSpace(c.FormValue("url")), c.FormValue("events")
	refuse := func(msg string) error {
		return d.writeWebhooks(c, http.StatusBadRequest, views.WebhooksPage{Error: msg, NewURL: raw, NewEvents: evRaw})
	}
	if msg := unstorable(c); msg != "" {
		raw, evRaw = pgtext.Shown(raw), pgtext.Shown(evRaw)
		return refuse(msg)
	}
	var events []string
	for _, e := range strings.Split(evRaw, ",") {
		if e = strings.TrimSpace(e); e != "" {
			events = append(events, e)
		}
	}
	if err := notify.CheckEvents(events); err != nil {
		return refuse("Events: " + err.Error() + ".")
	}
	var ue *notify.URLError
	if err := notify.CheckURL(ctx, raw, d.s.webhookAllowPrivate); errors.As(err, &ue) {
		return refuse("URL: " + ue.Reason + ".")
	} else if err != nil {
		return err
	}
	secret := notify.NewSecret()
	ep, err := d.s.store.AddEndpoint(ctx, notify.Endpoint{URL: raw, Secret: secret, Events: events}, request.Principal(c).Name)
	if err != nil {
		return err
	}
	return d.writeWebhooks(c, http.StatusOK, views.WebhooksPage{Secret: secret, SecretURL: ep.URL})
}

func (d *desk) removeWebhookForm(c echo.Context) error {
	id := c.Param("id")
	err := d.s.store.RemoveEndpoint(c.Request().Context(), id, request.Principal(c).Name)
	if errors.Is(err, notify.ErrNotFound) {
		return d.writeWebhooks(c, http.StatusNotFound, views.WebhooksPage{Error: "There is no such webhook (any more)."})
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/webhooks?"+url.Values{"done": {"Webhook removed."}}.Encode())
}

// redeliverForm makes a delivery due again under its webhook-id.
func (d *desk) redeliverForm(c echo.Context) error {
	id := c.Param("id")
	err := d.s.store.Redeliver(c.Request().Context(), id)
	if errors.Is(err, notify.ErrNotFound) {
		return d.writeWebhooks(c, http.StatusNotFound, views.WebhooksPage{Error: "There is no such delivery (any more)."})
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/webhooks?"+url.Values{"done": {"Delivery " + id + " is due again."}}.Encode())
}

// retentionNote says how long the delivery log is kept
// (GATEHOUSE_OUTBOX_RETENTION).
func retentionNote(d time.Duration) string {
	if d <= 0 {
		return "Deliveries are kept until their endpoint is removed (GATEHOUSE_OUTBOX_RETENTION=0)."
	}
	span := d.String()
	if d%(24*time.Hour) == 0 {
		span = fmt.Sprintf("%d days", int(d/(24*time.Hour)))
		if d == 24*time.Hour {
			span = "1 day"
		}
	}
	return fmt.Sprintf("Deliveries that were delivered or failed are deleted with their attempts %s after they were last tried "+
		"(GATEHOUSE_OUTBOX_RETENTION); pending ones stay until sent.", span)
}
