package postgres

// The outbox of notifications (SPEC §12): deliveries written in the
// transaction of the event that causes them, claimed by the senders of
// package notify on any replica.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

var _ notify.Store = (*Store)(nil)

// ChannelOutbox announces that deliveries were written (package live
// listens; the senders of every replica wake up).
const ChannelOutbox = "gatehouse_outbox"

// Audience is who is mailed when an interrupt of a kind is raised: users
// who may decide it. Everyone: every approver allowed the kind; otherwise
// those holding one of Roles (exactly: a caller expands cumulative roles)
// or named in Users. SoD leaves out the task's creator.
type Audience struct {
	Everyone bool
	Roles    []string
	Users    []string
	SoD      bool
}

// PolicyAudience turns the policy's deciders of a kind, as raised, into
// the store's terms: the roles that satisfy a role: ref (roles are
// cumulative), the users of user: and group: refs, and separation of
// duties.
func PolicyAudience(p auth.Policy) func(kind string) Audience {
	return func(kind string) Audience {
		d := p.Deciders(kind, 0)
		a := Audience{Everyone: d.Everyone, Users: d.Users(), SoD: p.SeparateDuties(kind)}
		for _, r := range auth.Roles {
			if slices.ContainsFunc(d.Roles(), r.Allows) {
				a.Roles = append(a.Roles, string(r))
			}
		}
		return a
	}
}

// Outbox configures what the store writes to the outbox besides webhook
// deliveries (written whenever endpoints exist).
type Outbox struct {
	// Email: mail the users who are to hear of an event (SMTP is set).
	Email bool
	// Audience says who may decide an interrupt of kind when raised
	// (nil: every approver allowed the kind).
	Audience func(kind string) Audience
	// Slack: post raised interrupts to Slack.
	Slack bool
	// Wake is called after a commit that wrote deliveries (this replica's
	// senders); other replicas hear of it through NOTIFY.
	Wake func()
	// Take, when set, is this replica's sender taking the deliveries of
	// its commits as they are written: they are born claimed by it for
	// Lease (attempt 1) and handed over after the commit, instead of
	// Wake. Saved: a claim statement (which rewrites every row and its
	// index entries) and a wait for a wake-up per burst. A crash before
	// the attempt is recorded leaves the rows to any sender once Lease
	// lapses.
	Take  func([]notify.Delivery)
	Lease time.Duration
}

// WithSender is o delivered by s, this replica's sender: woken by the
// commits that write deliveries, and handed them born claimed.
func (o Outbox) WithSender(s *notify.Sender) Outbox {
	o.Wake, o.Take, o.Lease = s.Wake, s.Take, s.HandLease()
	return o
}

// outboxEvent is what one commit tells the outbox.
type outboxEvent struct {
	event       string
	interruptID *uuid.UUID
	kind        string
	mode        string // deciders, creator, users, none
	users       []string
	ifDecided   bool
}

// commitEvent is the outbox event of an engine commit: a raised interrupt,
// or the end of the task; nil for the rest.
func commitEvent(c *graph.Commit) *outboxEvent {
	if r := c.Raise; r != nil && r.Ruled == nil {
		id, ok := parseID(r.ID)
		if !ok {
			return nil
		}
		return &outboxEvent{event: notify.EventRaised, interruptID: &id, kind: r.Kind, mode: "deciders"}
	}
	switch c.Status {
	case graph.StatusSucceeded:
		return &outboxEvent{event: notify.EventSucceeded, mode: "creator"}
	case graph.StatusFailed:
		return &outboxEvent{event: notify.EventFailed, mode: "creator"}
	case graph.StatusCancelled:
		return &outboxEvent{event: notify.EventCancelled, mode: "creator"}
	}
	return nil
}

func (s *Store) outboxParams(taskID uuid.UUID, ev *outboxEvent) dbsqlc.OutboxEnqueueParams {
	p := dbsqlc.OutboxEnqueueParams{TaskID: taskID, Event: ev.event, InterruptID: ev.interruptID, Mode: ev.mode,
		ToUsers: orNoKinds(ev.users), Kind: ev.kind, AnyDecider: true, DeciderRoles: []string{}, DeciderUsers: []string{},
		Email: s.opts.Outbox.Email && ev.mode != "none", Slack: s.opts.Outbox.Slack && ev.event == notify.EventRaised,
		IfDecided: ev.ifDecided}
	if s.opts.Outbox.Take != nil && s.opts.Outbox.Lease > 0 {
		p.BornLease = s.opts.Outbox.Lease.Seconds()
	}
	if ev.mode == "deciders" && s.opts.Outbox.Audience != nil {
		a := s.opts.Outbox.Audience(ev.kind)
		p.AnyDecider, p.Sod = a.Everyone, a.SoD
		p.DeciderRoles, p.DeciderUsers = orNoKinds(a.Roles), orNoKinds(a.Users)
	}
	return p
}

// queueOutbox queues the outbox rows of ev behind the statements of the
// event in b (one transaction); *out receives those written.
func (s *Store) queueOutbox(ctx context.Context, b *pgx.Batch, taskID uuid.UUID, ev *outboxEvent, out *[]notify.Delivery) {
	p := s.outboxParams(taskID, ev)
	queue(b, func(q *dbsqlc.Queries) error { _, err := outboxEnqueue(ctx, q, p); return err }).
		Query(func(rows pgx.Rows) error {
			// Both statements return outbox rows.
			rs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[dbsqlc.Outbox])
			*out = enqueued(rs)
			return err
		})
}

// enqueueTx writes the outbox rows of ev in the caller's transaction.
func (s *Store) enqueueTx(ctx context.Context, q *dbsqlc.Queries, taskID uuid.UUID, ev *outboxEvent) ([]notify.Delivery, error) {
	rs, err := outboxEnqueue(ctx, q, s.outboxParams(taskID, ev))
	return enqueued(rs), err
}

// outboxEnqueue writes the outbox rows of p: with OutboxEnqueueWebhooks
// when neither Slack nor email takes the event (PostgreSQL builds the
// executor state of OutboxEnqueue's three inserts on every execution).
func outboxEnqueue(ctx context.Context, q *dbsqlc.Queries, p dbsqlc.OutboxEnqueueParams) ([]dbsqlc.Outbox, error) {
	if !p.Slack && !p.Email {
		return q.OutboxEnqueueWebhooks(ctx, dbsqlc.OutboxEnqueueWebhooksParams{TaskID: p.TaskID, IfDecided: p.IfDecided,
			InterruptID: p.InterruptID, Event: p.Event, BornLease: p.BornLease})
	}
	rs, err := q.OutboxEnqueue(ctx, p)
	out := make([]dbsqlc.Outbox, len(rs))
	for i, r := range rs {
		out[i] = dbsqlc.Outbox(r)
	}
	return out, err
}

// outboxWritten hands this replica's sender the deliveries a commit wrote,
// or wakes the senders of every replica.
func (s *Store) outboxWritten(ctx context.Context, ds []notify.Delivery) {
	if len(ds) == 0 {
		return
	}
	if s.opts.Outbox.Take != nil && ds[0].Attempt > 0 {
		// Nothing for the other replicas: these are not due before
		// their lease lapses, which only a crash lets happen; then the
		// senders' poll finds them.
		s.opts.Outbox.Take(ds)
		return
	}
	s.outboxDue(ctx)
}

// outboxDue wakes the senders of every replica: deliveries are due.
func (s *Store) outboxDue(ctx context.Context) {
	if s.opts.Outbox.Wake != nil {
		s.opts.Outbox.Wake()
	}
	s.announce(ctx, note{ch: ChannelOutbox})
}

// enqueued are the deliveries OutboxEnqueue wrote (nil for none).
func enqueued(rs []dbsqlc.Outbox) []notify.Delivery {
	if len(rs) == 0 {
		return nil
	}
	out := make([]notify.Delivery, len(rs))
	for i, r := range rs {
		out[i] = deliveryFromRow(r)
	}
	return out
}

func deliveryFromRow(r dbsqlc.Outbox) notify.Delivery {
	d := notify.Delivery{ID: r.ID.String(), Event: r.Event, TaskID: r.TaskID.String(), Seq: r.Seq, Channel: r.Channel,
		Recipient: r.Recipient, State: r.State, Attempt: int(r.Attempts), NextAt: r.NextAt, Payload: r.Payload,
		LastError: r.LastError, CreatedAt: r.CreatedAt, DeliveredAt: r.DeliveredAt}
	if r.InterruptID != nil {
		d.InterruptID = r.InterruptID.String()
	}
	if r.EndpointID != nil {
		d.EndpointID = r.EndpointID.String()
	}
	return d
}

// ClaimDeliveries implements notify.Store.
func (s *Store) ClaimDeliveries(ctx context.Context, max int, lease time.Duration, busy []string) ([]notify.Delivery, error) {
	if busy == nil {
		busy = []string{} // <> ALL (NULL) would match nothing
	}
	// Committed without waiting for its WAL flush, as task claims are: a
	// claim lost in a database crash leaves the row due, to be claimed
	// again under its id.
	var rows []dbsqlc.Outbox
	b := asyncBatch(ctx, true)
	queue(b, func(q *dbsqlc.Queries) error {
		_, err := q.OutboxClaim(ctx, dbsqlc.OutboxClaimParams{LeaseSeconds: lease.Seconds(), Busy: busy, MaxRows: int32(max)})
		return err
	}).Query(func(r pgx.Rows) error {
		var err error
		rows, err = pgx.CollectRows(r, pgx.RowToStructByPos[dbsqlc.Outbox])
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	out := make([]notify.Delivery, 0, len(rows))
	for _, r := range rows {
		out = append(out, deliveryFromRow(r))
	}
	return out, nil
}

// FinishDeliveries implements notify.Store: one statement for the batch,
// committed without waiting for its WAL flush. A database crash may lose
// the record of an attempt, never a delivery: the row is then sent again
// under the same id after its claim lapses (at least once, as always),
// and the receiver tells the repeat by its webhook-id or Message-ID.
func (s *Store) FinishDeliveries(ctx context.Context, fs []notify.Finished) ([]string, error) {
	p := dbsqlc.OutboxDoneManyParams{Ids: make([]uuid.UUID, 0, len(fs)), Attempts: make([]int32, 0, len(fs)),
		States: make([]string, 0, len(fs)), NextAts: make([]time.Time, 0, len(fs)), Payloads: make([]string, 0, len(fs)),
		Errors: make([]string, 0, len(fs)), DurationMs: make([]int64, 0, len(fs)), StatusCodes: make([]int32, 0, len(fs))}
	var lost []string
	for _, f := range fs {
		id, ok := parseID(f.Delivery.ID)
		if !ok {
			lost = append(lost, f.Delivery.ID)
			continue
		}
		r := f.Result
		p.Ids = append(p.Ids, id)
		p.Attempts = append(p.Attempts, int32(f.Delivery.Attempt))
		p.States = append(p.States, r.State)
		p.NextAts = append(p.NextAts, r.NextAt)
		p.Payloads = append(p.Payloads, string(r.Payload))
		p.Errors = append(p.Errors, r.Error)
		p.DurationMs = append(p.DurationMs, r.DurationMS)
		p.StatusCodes = append(p.StatusCodes, int32(r.StatusCode))
	}
	if len(p.Ids) == 0 {
		return lost, nil
	}
	var done []uuid.UUID
	b := asyncBatch(ctx, true)
	queue(b, func(q *dbsqlc.Queries) error { _, err := q.OutboxDoneMany(ctx, p); return err }).
		Query(func(rows pgx.Rows) error {
			var err error
			done, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			return err
		})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("finish %d deliveries: %w", len(p.Ids), err)
	}
	for _, id := range p.Ids {
		if !slices.Contains(done, id) {
			lost = append(lost, id.String())
		}
	}
	return lost, nil
}

// ReleaseDeliveries implements notify.Store; the senders of every replica
// are woken.
func (s *Store) ReleaseDeliveries(ctx context.Context, ds []notify.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	p := dbsqlc.OutboxReleaseParams{Ids: make([]uuid.UUID, 0, len(ds)), Attempts: make([]int32, 0, len(ds))}
	for _, d := range ds {
		if id, ok := parseID(d.ID); ok {
			p.Ids = append(p.Ids, id)
			p.Attempts = append(p.Attempts, int32(d.Attempt))
		}
	}
	if _, err := s.q.OutboxRelease(ctx, p); err != nil {
		return fmt.Errorf("release %d deliveries: %w", len(p.Ids), err)
	}
	s.announce(ctx, note{ch: ChannelOutbox})
	return nil
}

// NextDue implements notify.Store.
func (s *Store) NextDue(ctx context.Context, busy []string) (time.Time, bool, error) {
	if busy == nil {
		busy = []string{}
	}
	at, err := s.q.OutboxNextDue(ctx, busy)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next delivery: %w", err)
	}
	return at, true, nil
}

// Subjects implements notify.Store: the tasks, interrupts and decisions
// of a batch in one statement; the artifacts only for the channels that
// show them.
func (s *Store) Subjects(ctx context.Context, ds []notify.Delivery) ([]*notify.Subject, error) {
	var p dbsqlc.OutboxSubjectsParams
	for i := range ds {
		if id, ok := parseID(ds[i].TaskID); ok {
			p.TaskIds = append(p.TaskIds, id)
		}
		if id, ok := parseID(ds[i].InterruptID); ok {
			p.InterruptIds = append(p.InterruptIds, id)
		}
	}
	if p.InterruptIds == nil {
		p.InterruptIds = []uuid.UUID{}
	}
	rows, err := s.q.OutboxSubjects(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("read the subjects of %d deliveries: %w", len(ds), err)
	}
	type about struct {
		itr *graph.Interrupt
		dec *graph.Decision
	}
	tasks := map[string]*graph.Task{}
	itrs := map[string]about{}
	for _, r := range rows {
		task, itr, err := joinedTask(r.Task, joinedInterrupt{r.IID, r.ITaskID, r.INode, r.IKind, r.IIteration, r.IPayload,
			r.IStatus, r.ICreatedAt, r.IResolvedAt, r.IDeadlineAt, r.IOverdue, r.IEscalationLevel, r.IClaimedBy,
			r.IClaimExpiresAt, r.IPayloadSha256})
		if err != nil {
			return nil, err
		}
		tasks[task.ID] = task
		if itr == nil {
			continue
		}
		a := about{itr: itr}
		if r.DID != nil {
			a.dec = &graph.Decision{ID: r.DID.String(), InterruptID: itr.ID, TaskID: task.ID, Action: deref(r.DAction),
				Feedback: deref(r.DFeedback), Value: r.DValue, DecidedBy: deref(r.DDecidedBy), DecidedAt: deref(r.DDecidedAt),
				PayloadSHA256: deref(r.DPayloadSha256)}
		}
		itrs[itr.ID] = a
	}
	out := make([]*notify.Subject, len(ds))
	// A raise mails each of its deciders: their deliveries share one read
	// of the task's artifacts.
	artifacts := map[string][]graph.Artifact{}
	for i := range ds {
		task := tasks[ds[i].TaskID]
		if task == nil {
			continue // the task is gone
		}
		subj := &notify.Subject{Task: task}
		if ds[i].InterruptID != "" {
			a, ok := itrs[ds[i].InterruptID]
			if !ok {
				continue // the interrupt is gone
			}
			subj.Interrupt, subj.Decision = a.itr, a.dec
		}
		if ch := ds[i].Channel; ch == notify.ChannelEmail || ch == notify.ChannelSlack {
			arts, ok := artifacts[task.ID]
			if !ok {
				if arts, err = s.Artifacts(ctx, task.ID); err != nil {
					return nil, err
				}
				artifacts[task.ID] = arts
			}
			subj.Artifacts = arts
		}
		out[i] = subj
	}
	return out, nil
}

func endpointFromRow(r dbsqlc.WebhookEndpoint) notify.Endpoint {
	return notify.Endpoint{ID: r.ID.String(), URL: r.Url, Secret: r.Secret, Events: orNoKinds(r.Events), CreatedBy: r.CreatedBy,
		CreatedAt: r.CreatedAt, DisabledAt: r.DisabledAt, DisabledReason: r.DisabledReason}
}

// Endpoint implements notify.Store.
func (s *Store) Endpoint(ctx context.Context, id string) (*notify.Endpoint, error) {
	uid, ok := parseID(id)
	if !ok {
		return nil, notify.ErrNotFound
	}
	r, err := s.q.WebhookGet(ctx, uid)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notify.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get webhook %s: %w", id, err)
	}
	e := endpointFromRow(r)
	return &e, nil
}

// DisableEndpoint implements notify.Store.
func (s *Store) DisableEndpoint(ctx context.Context, id, reason string) error {
	uid, ok := parseID(id)
	if !ok {
		return notify.ErrNotFound
	}
	return s.q.WebhookDisable(ctx, dbsqlc.WebhookDisableParams{ID: uid, Reason: reason})
}

// AddEndpoint stores a webhook endpoint (checked by the caller).
func (s *Store) AddEndpoint(ctx context.Context, e notify.Endpoint, actor string) (*notify.Endpoint, error) {
	r, err := s.q.WebhookInsert(ctx, dbsqlc.WebhookInsertParams{Url: e.URL, Secret: e.Secret, Events: orNoKinds(e.Events), Actor: actor})
	if err != nil {
		return nil, fmt.Errorf("add webhook: %w", err)
	}
	out := endpointFromRow(dbsqlc.WebhookEndpoint(r))
	return &out, nil
}

// Endpoints lists the webhook endpoints, oldest first.
func (s *Store) Endpoints(ctx context.Context) ([]notify.Endpoint, error) {
	rows, err := s.q.WebhookList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	out := make([]notify.Endpoint, 0, len(rows))
	for _, r := range rows {
		out = append(out, endpointFromRow(r))
	}
	return out, nil
}

// RemoveEndpoint deletes an endpoint and its deliveries. Errors:
// notify.ErrNotFound.
func (s *Store) RemoveEndpoint(ctx context.Context, id, actor string) error {
	uid, ok := parseID(id)
	if !ok {
		return notify.ErrNotFound
	}
	_, err := s.q.WebhookDelete(ctx, dbsqlc.WebhookDeleteParams{ID: uid, Actor: actor})
	if errors.Is(err, pgx.ErrNoRows) {
		return notify.ErrNotFound
	}
	return err
}

// EndpointDeliveries lists an endpoint's latest deliveries (at most max)
// with their attempts.
func (s *Store) EndpointDeliveries(ctx context.Context, endpointID string, max int) ([]notify.Delivery, error) {
	uid, ok := parseID(endpointID)
	if !ok {
		return nil, notify.ErrNotFound
	}
	rows, err := s.q.OutboxByEndpoint(ctx, dbsqlc.OutboxByEndpointParams{EndpointID: uid, MaxRows: int32(max)})
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return s.withAttempts(ctx, rows)
}

// Delivery reads one delivery with its attempts. Errors: notify.ErrNotFound.
func (s *Store) Delivery(ctx context.Context, id string) (*notify.Delivery, error) {
	uid, ok := parseID(id)
	if !ok {
		return nil, notify.ErrNotFound
	}
	r, err := s.q.OutboxGet(ctx, uid)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notify.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get delivery %s: %w", id, err)
	}
	ds, err := s.withAttempts(ctx, []dbsqlc.Outbox{r})
	if err != nil {
		return nil, err
	}
	return &ds[0], nil
}

func (s *Store) withAttempts(ctx context.Context, rows []dbsqlc.Outbox) ([]notify.Delivery, error) {
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	atts, err := s.q.OutboxAttempts(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("delivery attempts: %w", err)
	}
	by := map[uuid.UUID][]notify.Attempt{}
	for _, a := range atts {
		by[a.OutboxID] = append(by[a.OutboxID], notify.Attempt{Attempt: int(a.Attempt), At: a.At, DurationMS: a.DurationMs,
			StatusCode: int(a.StatusCode), OK: a.Ok, Error: a.Error})
	}
	out := make([]notify.Delivery, len(rows))
	for i, r := range rows {
		out[i] = deliveryFromRow(r)
		out[i].Attempts = by[r.ID]
	}
	return out, nil
}

// Redeliver makes a delivery due again at once, under the same id.
// Errors: notify.ErrNotFound.
func (s *Store) Redeliver(ctx context.Context, id string) error {
	uid, ok := parseID(id)
	if !ok {
		return notify.ErrNotFound
	}
	if _, err := s.q.OutboxRedeliver(ctx, uid); errors.Is(err, pgx.ErrNoRows) {
		return notify.ErrNotFound
	} else if err != nil {
		return fmt.Errorf("redeliver %s: %w", id, err)
	}
	s.outboxDue(ctx)
	return nil
}

// CreateActionLink stores an action link by the SHA-256 of its token.
func (s *Store) CreateActionLink(ctx context.Context, hash []byte, l notify.ActionLink, deliveryID string) error {
	iid, ok := parseID(l.InterruptID)
	if !ok {
		return notify.ErrNotFound
	}
	tid, ok := parseID(l.TaskID)
	if !ok {
		return notify.ErrNotFound
	}
	p := dbsqlc.ActionLinkInsertParams{TokenHash: hash, InterruptID: iid, TaskID: tid, Recipient: l.Recipient, ExpiresAt: l.ExpiresAt}
	if did, ok := parseID(deliveryID); ok {
		p.OutboxID = &did
	}
	if err := s.q.ActionLinkInsert(ctx, p); err != nil {
		return fmt.Errorf("store action link: %w", err)
	}
	return nil
}

// ActionLink reads a link by the SHA-256 of its token. Errors:
// notify.ErrNotFound.
func (s *Store) ActionLink(ctx context.Context, hash []byte) (*notify.ActionLink, error) {
	r, err := s.q.ActionLinkGet(ctx, hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notify.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get action link: %w", err)
	}
	return &notify.ActionLink{InterruptID: r.InterruptID.String(), TaskID: r.TaskID.String(), Recipient: r.Recipient,
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, UsedAt: r.UsedAt}, nil
}

// SpendActionLink marks every link of the token's recipient for its
// interrupt used; false when it was used or had ended already.
func (s *Store) SpendActionLink(ctx context.Context, hash []byte) (bool, error) {
	_, err := s.q.ActionLinkSpend(ctx, hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("spend action link: %w", err)
	}
	return true, nil
}

// RecipientEmail is a user's email address for a delivery: "" when the
// user has none any more, or is disabled. Errors: notify.ErrNotFound.
func (s *Store) RecipientEmail(ctx context.Context, username string) (string, error) {
	r, err := s.q.UserGetByName(ctx, username)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", notify.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("get user %q: %w", username, err)
	}
	if r.Disabled {
		return "", nil
	}
	return r.Email, nil
}
