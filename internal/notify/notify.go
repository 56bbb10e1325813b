// Package notify tells people what waits for them (SPEC §12): it sends the
// deliveries of the outbox — rows the store writes in the transaction of
// the event that causes them — by email, to webhooks and to Slack. Senders
// on every replica claim due rows with SKIP LOCKED; each row is sent at
// least once under a stable id (webhook-id, Message-ID), retried with
// backoff and jitter, and every attempt is logged. A slow or dead receiver
// holds up only its own deliveries: each destination has its own bound on
// deliveries in flight.
//
// The package knows no HTTP routing and no SQL: the store implements
// Store, cmd/web wires the channels.
//
// It must not import postgres nor any HTTP handler package.
package notify

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
)

// Event types of deliveries (the webhook "type").
const (
	EventRaised    = "interrupt.raised"
	EventDecided   = "interrupt.decided"
	EventReminder  = "interrupt.reminder"
	EventEscalated = "interrupt.escalated"
	EventExpired   = "interrupt.expired"
	EventSucceeded = "task.succeeded"
	EventFailed    = "task.failed"
	EventCancelled = "task.cancelled"
)

// EventTypes lists every event type, in the order of SPEC §12.
var EventTypes = []string{EventRaised, EventDecided, EventReminder, EventEscalated, EventExpired,
	EventSucceeded, EventFailed, EventCancelled}

// Channels of deliveries.
const (
	ChannelEmail   = "email"
	ChannelWebhook = "webhook"
	ChannelSlack   = "slack"
)

// Delivery states.
const (
	StatePending   = "pending"
	StateDelivered = "delivered"
	StateFailed    = "failed" // gave up: retries exhausted, endpoint gone, no address
)

// Delivery is one row of the outbox: one event for one recipient or
// endpoint.
type Delivery struct {
	ID          string
	Event       string
	TaskID      string
	InterruptID string // "" for task events
	Seq         int64
	Channel     string
	EndpointID  string // webhooks
	Recipient   string // email: the user name
	State       string
	// Attempt is the number of this attempt (from 1) once claimed.
	Attempt     int
	NextAt      time.Time
	Payload     json.RawMessage // a webhook's body as first sent
	LastError   string
	CreatedAt   time.Time
	DeliveredAt *time.Time
	// Attempts is the delivery log, when asked for.
	Attempts []Attempt
}

// Destination is what a delivery's in-flight bound counts against: its
// endpoint, or its channel.
func (d *Delivery) Destination() string {
	if d.EndpointID != "" {
		return d.EndpointID
	}
	return d.Channel
}

// Attempt is one entry of the delivery log.
type Attempt struct {
	Attempt    int
	At         time.Time
	DurationMS int64
	StatusCode int
	OK         bool
	Error      string
}

// Result is the outcome of one attempt, as the store records it.
type Result struct {
	State      string
	NextAt     time.Time // when State is pending: the next attempt
	Payload    json.RawMessage
	Error      string
	DurationMS int64
	StatusCode int
}

// Finished is an attempt at a delivery with its result.
type Finished struct {
	Delivery *Delivery
	Result   Result
}

// Endpoint is a webhook endpoint.
type Endpoint struct {
	ID             string
	URL            string
	Secret         string // whsec_…
	Events         []string
	CreatedBy      string
	CreatedAt      time.Time
	DisabledAt     *time.Time
	DisabledReason string
}

// Subject is what a delivery is about, read when it is sent.
type Subject struct {
	Task      *graph.Task
	Interrupt *graph.Interrupt // nil for task events
	Decision  *graph.Decision  // the interrupt's decision, if any
	Artifacts []graph.Artifact
}

// ErrNotFound: a Store's thing is not there.
var ErrNotFound = errors.New("not found")

// Store is what a Sender needs of the database.
type Store interface {
	// ClaimDeliveries takes up to max due deliveries whose destination is
	// not in busy, leasing them for lease.
	ClaimDeliveries(ctx context.Context, max int, lease time.Duration, busy []string) ([]Delivery, error)
	// FinishDeliveries records the results of attempts, all in one
	// commit, and returns the ids of those it did not record because
	// their deliveries were claimed again by another sender (their claim
	// lapsed).
	FinishDeliveries(ctx context.Context, fs []Finished) (lost []string, err error)
	// ReleaseDeliveries hands back claimed deliveries that were not
	// attempted: due at once, for any sender, their attempt not counted.
	ReleaseDeliveries(ctx context.Context, ds []Delivery) error
	// NextDue is when the earliest pending delivery to a destination not
	// in busy is due (false: none).
	NextDue(ctx context.Context, busy []string) (time.Time, bool, error)
	// Subjects reads what each of ds is about: nil where the task (or
	// the interrupt) is gone.
	Subjects(ctx context.Context, ds []Delivery) ([]*Subject, error)
	// Endpoint errors: ErrNotFound.
	Endpoint(ctx context.Context, id string) (*Endpoint, error)
	DisableEndpoint(ctx context.Context, id, reason string) error
}

// ActionLink is an email's one-click link as stored: never its token, only
// the token's SHA-256.
type ActionLink struct {
	InterruptID string
	TaskID      string
	Recipient   string
	CreatedAt   time.Time
	ExpiresAt   time.Time
	UsedAt      *time.Time
}

// LinkTTL is the longest an action link lives (the interrupt's deadline,
// when sooner, ends it first).
const LinkTTL = 72 * time.Hour
