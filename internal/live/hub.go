// Package live carries what happens in the database to this replica's
// subscribers: one dedicated connection LISTENs for task events and
// runnable tasks (announced with NOTIFY by every replica), fetches each
// announced range of events once, and fans it out in-process to
// websockets and workers. Slow subscribers are dropped, never waited for.
//
// It imports graph and postgres (the events it fetches); never internal/web
// nor its handler packages.
package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// Channels the hub listens on; the store sends on them.
const (
	ChannelEvents   = postgres.ChannelEvents
	ChannelRunnable = postgres.ChannelRunnable
)

// EventSource reads committed events of a task in seq order.
type EventSource interface {
	Events(ctx context.Context, taskID string, after int64, limit int) ([]graph.Event, error)
}

// Hub fans events out to subscribers of one replica.
type Hub struct {
	connString string
	src        EventSource
	log        *slog.Logger

	mu     sync.Mutex
	byTask map[string]map[*Sub]struct{}
	all    map[*Sub]struct{}
	// published holds, per task, the recent seq spans this hub published
	// from local commits, so announcements of them cost no fetch.
	published map[string][]span
	wake      []func(taskID string, seq int64)
	outbox    []func()
	// others hears the payloads of channels registered with OnNotify.
	others   map[string][]func(payload string)
	ready    bool
	readyCh  chan struct{}
	fetchBuf int
}

// Sub is one subscription. Events arrive on C in seq order per task. C is
// closed when the subscriber was too slow, when the hub lost its listening
// connection (events may have been missed: catch up from the table), or on
// Close.
type Sub struct {
	C      <-chan graph.Event
	c      chan graph.Event
	hub    *Hub
	task   string // "" for every task
	closed bool
	// Dropped reports why C was closed by the hub ("slow", "resync"); empty
	// after Close.
	Dropped string
}

// NewHub returns a hub that listens through its own connection to connString.
func NewHub(connString string, src EventSource, log *slog.Logger) *Hub {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Hub{connString: connString, src: src, log: log, byTask: map[string]map[*Sub]struct{}{}, published: map[string][]span{},
		all: map[*Sub]struct{}{}, readyCh: make(chan struct{}), fetchBuf: 256}
}

// OnRunnable registers f to be called (on the hub's goroutine: keep it
// short) with the id of each task announced runnable and the seq of the
// event that made it so (0 when unknown), and with "" after a reconnect,
// when announcements may have been missed.
func (h *Hub) OnRunnable(f func(taskID string, seq int64)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wake = append(h.wake, f)
}

// OnOutbox registers f to be called (on the hub's goroutine: keep it
// short) when any replica wrote notification deliveries, and after a
// reconnect.
func (h *Hub) OnOutbox(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.outbox = append(h.outbox, f)
}

// OnNotify registers f to be called (on the hub's goroutine: keep it
// short) with the payload of each notification on channel
// (postgres.ChannelTimers or postgres.ChannelPresence), and with "" after
// a reconnect, when some may have been missed.
func (h *Hub) OnNotify(channel string, f func(payload string)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.others == nil {
		h.others = map[string][]func(string){}
	}
	h.others[channel] = append(h.others[channel], f)
}

// Ready is closed once the hub listens for the first time.
func (h *Hub) Ready() <-chan struct{} { return h.readyCh }

// Subscribe follows one task's events.
func (h *Hub) Subscribe(taskID string) *Sub { return h.subscribe(taskID) }

// SubscribeAll follows the events of every task.
func (h *Hub) SubscribeAll() *Sub { return h.subscribe("") }

// Watch follows one task's events through a small buffer, for a waiter
// that needs only to hear that something happened (an approval request's
// long poll holds no database connection and little memory while it
// waits). The channel is closed when the hub dropped the watch (too slow,
// or a reconnect: read the task again); stop ends it.
func (h *Hub) Watch(taskID string) (events <-chan graph.Event, stop func()) {
	s := h.subscribeN(taskID, watchBuf)
	return s.C, s.Close
}

// watchBuf is a watch's buffer: a waiter reads every event at once.
const watchBuf = 4

func (h *Hub) subscribe(taskID string) *Sub { return h.subscribeN(taskID, h.fetchBuf) }

func (h *Hub) subscribeN(taskID string, buf int) *Sub {
	c := make(chan graph.Event, buf)
	s := &Sub{C: c, c: c, hub: h, task: taskID}
	h.mu.Lock()
	defer h.mu.Unlock()
	if taskID == "" {
		h.all[s] = struct{}{}
	} else {
		if h.byTask[taskID] == nil {
			h.byTask[taskID] = map[*Sub]struct{}{}
		}
		h.byTask[taskID][s] = struct{}{}
	}
	return s
}

// Close ends the subscription.
func (s *Sub) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.hub.drop(s, "")
}

// drop removes s; h.mu is held.
func (h *Hub) drop(s *Sub, why string) {
	if s.closed {
		return
	}
	s.closed = true
	s.Dropped = why
	if s.task == "" {
		delete(h.all, s)
	} else if m := h.byTask[s.task]; m != nil {
		delete(m, s)
		if len(m) == 0 {
			delete(h.byTask, s.task)
		}
	}
	close(s.c)
}

// Subscribers counts the open subscriptions.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.all)
	for _, m := range h.byTask {
		n += len(m)
	}
	return n
}

// Run listens until ctx ends, reconnecting with backoff.
func (h *Hub) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := h.listen(ctx)
		if ctx.Err() != nil {
			break
		}
		h.log.Warn("event listener lost its connection; reconnecting", "error", err, "backoff", backoff)
		h.dropAll("resync")
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	h.dropAll("")
}

func (h *Hub) listen(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, h.connString)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Every channel is listened to from the start, so that OnNotify may
	// register at any time.
	for _, ch := range []string{ChannelEvents, ChannelRunnable, postgres.ChannelOutbox, postgres.ChannelTimers, postgres.ChannelPresence} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	h.mu.Lock()
	if !h.ready {
		h.ready = true
		close(h.readyCh)
	}
	wake, outbox := h.wake, h.outbox
	// A copy: OnNotify may add a channel's callback while this runs.
	others := maps.Clone(h.others)
	h.mu.Unlock()
	// Anything announced while we were not listening is missed: let the
	// workers and senders look for work.
	for _, f := range wake {
		f("", 0)
	}
	for _, f := range outbox {
		f()
	}
	for _, fs := range others {
		for _, f := range fs {
			f("")
		}
	}
	// Waiting with a context that cannot end spares pgx a watch of ctx (a
	// channel and an AfterFunc) for each notification: ~4 of the ~150
	// allocations per node run at 16 tasks. ctx's end interrupts the wait
	// through the connection's deadline instead, as pgx's own watch does.
	stop := context.AfterFunc(ctx, func() { _ = conn.PgConn().Conn().SetDeadline(time.Now()) })
	defer stop()
	for {
		n, err := conn.WaitForNotification(context.Background())
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		switch n.Channel {
		case ChannelRunnable:
			h.mu.Lock()
			wake := h.wake
			h.mu.Unlock()
			task, seq := parseRunnable(n.Payload)
			for _, f := range wake {
				f(task, seq)
			}
		case ChannelEvents:
			h.announce(ctx, n.Payload)
		case postgres.ChannelOutbox:
			h.mu.Lock()
			outbox := h.outbox
			h.mu.Unlock()
			for _, f := range outbox {
				f()
			}
		default:
			h.mu.Lock()
			fs := h.others[n.Channel]
			h.mu.Unlock()
			for _, f := range fs {
				f(n.Payload)
			}
		}
	}
}

// announce handles "<task>:<first>:<last>", or several such ranges joined
// by spaces (a notifier's window, in one notification).
func (h *Hub) announce(ctx context.Context, payload string) {
	for payload != "" {
		var one string
		one, payload, _ = strings.Cut(payload, " ")
		h.announceRange(ctx, one)
	}
}

// announceRange handles one range: fetch it once, hand it to the task's
// subscribers and to those of every task.
func (h *Hub) announceRange(ctx context.Context, payload string) {
	task, first, last, err := parsePayload(payload)
	if err != nil {
		h.log.Warn("bad event announcement", "payload", payload, "error", err)
		return
	}
	h.mu.Lock()
	interested := len(h.byTask[task]) > 0 || len(h.all) > 0
	if covered(h.published[task], first, last) {
		interested = false // published already, straight from a local commit
	}
	h.mu.Unlock()
	if !interested {
		return
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	evs, err := h.src.Events(fctx, task, first-1, int(last-first+1))
	if err != nil {
		h.log.Warn("fetching announced events", "task", task, "error", err)
		// Subscribers will notice the gap on their next event and catch up.
		return
	}
	h.Publish(evs)
}

// Publish hands committed events to subscribers: those fetched for an
// announcement, and those of this replica's own commits (the hub is the
// engine's EventSink), which then need no fetch and no NOTIFY round trip.
func (h *Hub) Publish(evs []graph.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.published) > 100_000 {
		clear(h.published) // a cache: forgetting costs one fetch
	}
	for i, ev := range evs {
		if i == 0 || evs[i-1].TaskID != ev.TaskID || evs[i-1].Seq+1 != ev.Seq {
			h.published[ev.TaskID] = appendSpan(h.published[ev.TaskID], span{ev.Seq, ev.Seq})
		} else {
			sp := h.published[ev.TaskID]
			sp[len(sp)-1].last = ev.Seq
		}
		for s := range h.byTask[ev.TaskID] {
			h.send(s, ev)
		}
		for s := range h.all {
			h.send(s, ev)
		}
	}
}

func (h *Hub) send(s *Sub, ev graph.Event) {
	if s.closed {
		return
	}
	select {
	case s.c <- ev:
	default:
		h.drop(s, "slow")
	}
}

func (h *Hub) dropAll(why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.all {
		h.drop(s, why)
	}
	for _, m := range h.byTask {
		for s := range m {
			h.drop(s, why)
		}
	}
}

// parseRunnable reads "<task>" or "<task>@<seq>"; a seq it cannot read is
// unknown (0), which wakes workers as a plain announcement does.
func parseRunnable(p string) (task string, seq int64) {
	task, at, ok := strings.Cut(p, "@")
	if ok {
		seq, _ = strconv.ParseInt(at, 10, 64)
	}
	return task, max(seq, 0)
}

func parsePayload(p string) (task string, first, last int64, err error) {
	task, rest, ok1 := strings.Cut(p, ":")
	a, z, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || strings.Contains(z, ":") || !graph.ValidID(task) {
		return "", 0, 0, errors.New("want <task>:<first>:<last>")
	}
	if first, err = strconv.ParseInt(a, 10, 64); err != nil {
		return "", 0, 0, err
	}
	if last, err = strconv.ParseInt(z, 10, 64); err != nil {
		return "", 0, 0, err
	}
	if first < 1 || last < first {
		return "", 0, 0, errors.New("bad seq range")
	}
	return task, first, last, nil
}

// span is a range of seqs, inclusive.
type span struct{ first, last int64 }

// appendSpan keeps the 32 most recent spans, merging adjacent ones.
func appendSpan(spans []span, sp span) []span {
	if n := len(spans); n > 0 && spans[n-1].last+1 == sp.first {
		spans[n-1].last = sp.last
		return spans
	}
	spans = append(spans, sp)
	if len(spans) > 32 {
		spans = append(spans[:0:0], spans[len(spans)-32:]...)
	}
	return spans
}

// covered reports whether [first, last] lies within the union of spans.
func covered(spans []span, first, last int64) bool {
	next := first
	for _, sp := range spans {
		if sp.first <= next && sp.last >= next {
			next = sp.last + 1
		}
		if next > last {
			return true
		}
	}
	return false
}
