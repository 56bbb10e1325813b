package postgres

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

// Channels of the announcements (package live listens to them).
const (
	ChannelEvents   = "gatehouse_events"
	ChannelRunnable = "gatehouse_runnable"
	// ChannelTimers carries the due time (Unix nanoseconds) of a timer
	// just scheduled: keepers sleeping past it wake earlier.
	ChannelTimers = "gatehouse_timers"
	// ChannelPresence carries "<task id>" when who has the task open
	// changed on some replica.
	ChannelPresence = "gatehouse_presence"
)

// notifyWindow is how long the notifier gathers announcements before it
// sends them: live views lag by at most this much more.
const notifyWindow = 2 * time.Millisecond

// note is one announcement: a task's committed event range, or a task
// that became runnable.
type note struct {
	// ch, when set, is the channel (payload empty): ChannelOutbox.
	ch          string
	task        string
	first, last int64 // events; 0 for a runnable note
	// at: for a runnable note, the seq of the event that made the task
	// runnable (0 when none did, as for a lease handed back): a worker
	// that claimed the task at that seq or later need not look again.
	at int64
	// timer, when set, makes this a timer note (ChannelTimers).
	timer time.Time
	// presence makes this a presence note for task (ChannelPresence).
	presence bool
}

func (n note) channel() string {
	switch {
	case n.ch != "":
		return n.ch
	case !n.timer.IsZero():
		return ChannelTimers
	case n.presence:
		return ChannelPresence
	}
	if n.last == 0 {
		return ChannelRunnable
	}
	return ChannelEvents
}

func (n note) payload() string {
	switch {
	case n.ch != "":
		return ""
	case !n.timer.IsZero():
		return strconv.FormatInt(n.timer.UnixNano(), 10)
	case n.presence:
		return n.task
	}
	if n.last == 0 {
		if n.at > 0 {
			return n.task + "@" + strconv.FormatInt(n.at, 10)
		}
		return n.task
	}
	return string(n.appendRange(make([]byte, 0, len(n.task)+24)))
}

// appendRange appends an event note's "<task>:<first>:<last>".
func (n note) appendRange(b []byte) []byte {
	b = append(b, n.task...)
	b = append(b, ':')
	b = strconv.AppendInt(b, n.first, 10)
	b = append(b, ':')
	return strconv.AppendInt(b, n.last, 10)
}

// maxEventsPayload bounds the ranges joined in one ChannelEvents payload
// (PostgreSQL takes payloads shorter than 8000 bytes).
const maxEventsPayload = 7000

// notifier sends announcements from one goroutine, coalescing what piles
// up while a send is in flight. Announcements are hints: subscribers
// catch up from the tables, so one lost in a crash costs nothing.
//
// Notes wait in a slice, not a channel: a channel send to the parked
// notifier woke it (and, on an idle core, a thread with a futex call) on
// every commit, on the committing goroutine's critical path. Now only the
// first note of a window wakes it; the others are an append under a lock.
type notifier struct {
	store *Store
	log   *slog.Logger
	wake  chan struct{} // capacity 1: a note is pending
	done  chan struct{}

	mu      sync.Mutex
	pending []note
	spare   []note // the previous batch's array, reused
}

// maxNotes bounds one NotifyMany: a longer backlog goes in several.
const maxNotes = 1000

// Notifier sends a Store's announcements from a background goroutine,
// instead of one extra round trip after each commit: a service that Start
// starts and Stop stops, waiting for what is queued to be sent.
type Notifier struct {
	n      *notifier
	mu     sync.Mutex
	cancel context.CancelFunc
}

// Notifier returns the store's notifier service, installed on the store:
// once it started, commits queue their announcements for it. Call it once,
// before the Store is used concurrently.
func (s *Store) Notifier(log *slog.Logger) *Notifier {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := &notifier{store: s, log: log, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.notifier = n
	return &Notifier{n: n}
}

// Start runs the notifier until Stop.
func (x *Notifier) Start() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	x.cancel = cancel
	go x.n.run(ctx)
}

// Stop ends the notifier and waits until what was queued is sent, or ctx
// ends (its error then). Announcements after it are sent by their commits.
func (x *Notifier) Stop(ctx context.Context) error {
	x.mu.Lock()
	cancel := x.cancel
	x.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-x.n.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// StartNotifier is Notifier(log) started until ctx ends, for callers whose
// context bounds the store's life (tests, benchmarks).
func (s *Store) StartNotifier(ctx context.Context, log *slog.Logger) {
	x := s.Notifier(log)
	go x.n.run(ctx)
}

// add queues notes; the first of a window wakes the notifier.
func (n *notifier) add(notes []note) {
	n.mu.Lock()
	first := len(n.pending) == 0
	n.pending = append(n.pending, notes...)
	n.mu.Unlock()
	if first {
		select {
		case n.wake <- struct{}{}:
		default:
		}
	}
}

// take returns what is pending and leaves an empty queue.
func (n *notifier) take() []note {
	n.mu.Lock()
	defer n.mu.Unlock()
	batch := n.pending
	n.pending = n.spare[:0]
	n.spare = nil
	return batch
}

func (n *notifier) run(ctx context.Context) {
	defer close(n.done)
	window := time.NewTimer(notifyWindow)
	window.Stop()
	for {
		select {
		case <-ctx.Done():
			// Send what is queued, then stop.
			n.flush(context.WithoutCancel(ctx))
			return
		case <-n.wake:
		}
		// Gather what arrives within a short window: one transaction then
		// announces many commits, and a task's consecutive ranges merge.
		window.Reset(notifyWindow)
		select {
		case <-window.C:
		case <-ctx.Done():
			window.Stop()
		}
		n.flush(context.WithoutCancel(ctx))
	}
}

// flush sends what is pending.
func (n *notifier) flush(ctx context.Context) {
	batch := n.take()
	for rest := batch; len(rest) > 0; {
		k := min(len(rest), maxNotes)
		n.send(ctx, rest[:k])
		rest = rest[k:]
	}
	clear(batch) // drop the task ids it holds
	n.mu.Lock()
	if n.spare == nil && cap(batch) <= 4*maxNotes {
		n.spare = batch[:0]
	}
	n.mu.Unlock()
}

func (n *notifier) send(ctx context.Context, batch []note) {
	if err := n.store.sendNotes(ctx, coalesce(batch)); err != nil && ctx.Err() == nil {
		n.log.Warn("sending announcements", "notes", len(batch), "error", err)
	}
}

// coalesce merges consecutive event ranges of a task and repeated
// runnable notes, keeping the order of first appearance.
func coalesce(batch []note) []note {
	out := make([]note, 0, len(batch))
	idx := make(map[noteKey]int, len(batch))
	for _, x := range batch {
		key := noteKey{x.channel(), x.task}
		if i, ok := idx[key]; ok {
			if !x.timer.IsZero() {
				if x.timer.Before(out[i].timer) {
					out[i].timer = x.timer
				}
				continue
			}
			if x.presence {
				continue
			}
			if x.last == 0 {
				// The later cause wins; an unknown one (0) wins over all.
				if y := &out[i]; y.at != 0 {
					y.at = max(y.at, x.at)
					if x.at == 0 {
						y.at = 0
					}
				}
				continue
			}
			if y := &out[i]; x.first == y.last+1 {
				y.last = x.last
				continue
			}
		}
		idx[key] = len(out)
		out = append(out, x)
	}
	return out
}

type noteKey struct{ ch, task string }

// announce hands notes to the notifier, or sends them now when none runs.
func (s *Store) announce(ctx context.Context, notes ...note) {
	if n := s.notifier; n != nil {
		select {
		case <-n.done:
			return
		default:
		}
		n.add(notes)
		return
	}
	if err := s.sendNotes(context.WithoutCancel(ctx), notes); err != nil {
		slog.Default().Warn("sending announcements", "error", err)
	}
}

// sendNotes sends in one asynchronously committed transaction.
func (s *Store) sendNotes(ctx context.Context, notes []note) error {
	if len(notes) == 0 {
		return nil
	}
	// One statement, its own asynchronously committed transaction.
	return s.q.NotifyMany(ctx, notifyParams(notes))
}

// notifyParams makes the NOTIFYs of notes. The event ranges go joined by
// spaces in as few payloads as fit (live.Hub reads each range): one
// notification per window instead of one per task's range, each of which
// PostgreSQL queued and delivered to every listener, and each listener
// decoded and buffered.
func notifyParams(notes []note) dbsqlc.NotifyManyParams {
	p := dbsqlc.NotifyManyParams{Channels: make([]string, 0, len(notes)), Payloads: make([]string, 0, len(notes))}
	var events []byte
	for _, x := range notes {
		ch := x.channel()
		if ch != ChannelEvents {
			p.Channels, p.Payloads = append(p.Channels, ch), append(p.Payloads, x.payload())
			continue
		}
		if len(events) > 0 && len(events)+1+len(x.task)+42 > maxEventsPayload {
			p.Channels, p.Payloads = append(p.Channels, ChannelEvents), append(p.Payloads, string(events))
			events = events[:0]
		}
		if len(events) > 0 {
			events = append(events, ' ')
		} else if events == nil {
			events = make([]byte, 0, min(maxEventsPayload, 64*len(notes)))
		}
		events = x.appendRange(events)
	}
	if len(events) > 0 {
		p.Channels, p.Payloads = append(p.Channels, ChannelEvents), append(p.Payloads, string(events))
	}
	return p
}
