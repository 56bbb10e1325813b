package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// ChannelCallback is the channel of approval requests' callbacks (SPEC
// §16): one delivery to the request's callback_url when it leaves
// pending, signed with the request's own secret.
const ChannelCallback = "callback"

// Callback event types (the body's "type").
const (
	EventRequestDecided   = "request.decided"
	EventRequestExpired   = "request.expired"
	EventRequestCancelled = "request.cancelled"
)

// CallbackTarget is a request's callback as its delivery needs it.
type CallbackTarget struct {
	URL    string
	Secret string // whsec_…
	// Body is {"type","timestamp","data":{"request"}} for the delivery.
	Body json.RawMessage
}

// CallbackSource reads a delivery's callback target: the request of its
// task. Errors: ErrNotFound when the request is gone.
type CallbackSource func(ctx context.Context, d *Delivery) (CallbackTarget, error)

// Callbacks is the callback channel: Standard Webhooks deliveries with
// §12's retries and address rules, each to its request's URL and signed
// with its request's secret.
type Callbacks struct {
	source CallbackSource
	client *http.Client
}

// NewCallbacks returns the callback channel; allowPrivate lifts the SSRF
// guard (GATEHOUSE_WEBHOOK_ALLOW_PRIVATE).
func NewCallbacks(source CallbackSource, allowPrivate bool) *Callbacks {
	return &Callbacks{source: source, client: guardedClient(allowPrivate)}
}

// Send implements Channel. The body is built at the first attempt (the
// request as it then is) and kept for the retries.
func (c *Callbacks) Send(ctx context.Context, d *Delivery, _ *Subject) Outcome {
	t, err := c.source(ctx, d)
	if errors.Is(err, ErrNotFound) {
		return Outcome{Err: errors.New("the request is gone"), Permanent: true}
	}
	if err != nil {
		return Outcome{Err: fmt.Errorf("reading the request: %w", err)}
	}
	if t.URL == "" || t.Secret == "" {
		return Outcome{Err: errors.New("the request has no callback"), Permanent: true}
	}
	body := d.Payload
	if len(body) == 0 {
		body = t.Body
	}
	out := post(ctx, c.client, t.URL, t.Secret, d.ID, body)
	out.Disable = "" // a 410 ends this delivery only: there is no endpoint to disable
	return out
}
