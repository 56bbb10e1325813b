package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

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
		return fmt.Sprint(n.timer.UnixNano())
	case n.presence:
		return n.task
	}
	if n.last == 0 {
		if n.at > 0 {
			return fmt.Sprintf("%s@%d", n.task, n.at)
		}
		return n.task
	}
	return fmt.Sprintf("%s:%d:%d", n.task, n.first, n.last)
}

// notifier sends announcements from one goroutine, coalescing what piles
// up while a send is in flight. Announcements are hints: subscribers
// catch up from the tables, so one lost in a crash costs nothing.
type notifier struct {
	store *Store
	log   *slog.Logger
	ch    chan note
	done  chan struct{}
}

// StartNotifier sends this Store's announcements from a background
// goroutine until ctx ends, instead of one extra round trip after each
// commit. Call it once, before the Store is used concurrently.
func (s *Store) StartNotifier(ctx context.Context, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := &notifier{store: s, log: log, ch: make(chan note, 4096), done: make(chan struct{})}
	s.notifier = n
	go n.run(ctx)
}

func (n *notifier) run(ctx context.Context) {
	defer close(n.done)
	for {
		var batch []note
		select {
		case <-ctx.Done():
			// Send what is queued, then stop.
			for {
				select {
				case x := <-n.ch:
					batch = append(batch, x)
					continue
				default:
				}
				break
			}
			if len(batch) > 0 {
				n.send(context.WithoutCancel(ctx), batch)
			}
			return
		case x := <-n.ch:
			batch = append(batch, x)
		}
		// Gather what arrives within a short window: one transaction then
		// announces many commits, and a task's consecutive ranges merge.
		window := time.NewTimer(notifyWindow)
	fill:
		for len(batch) < 1000 {
			select {
			case x := <-n.ch:
				batch = append(batch, x)
			case <-window.C:
				break fill
			case <-ctx.Done():
				break fill
			}
		}
		window.Stop()
		n.send(context.WithoutCancel(ctx), batch)
	}
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
	idx := map[string]int{}
	for _, x := range batch {
		key := x.channel() + x.task
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

// announce hands notes to the notifier, or sends them now when none runs.
func (s *Store) announce(ctx context.Context, notes ...note) {
	if n := s.notifier; n != nil {
		for _, x := range notes {
			select {
			case n.ch <- x:
			case <-n.done:
				return
			case <-ctx.Done():
				return
			}
		}
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
	p := dbsqlc.NotifyManyParams{Channels: make([]string, len(notes)), Payloads: make([]string, len(notes))}
	for i, x := range notes {
		p.Channels[i], p.Payloads[i] = x.channel(), x.payload()
	}
	b := &pgx.Batch{}
	dbsqlc.Queue(b, func(q *dbsqlc.Queries) error { return q.TxAsyncCommit(ctx) })
	dbsqlc.Queue(b, func(q *dbsqlc.Queries) error { return q.NotifyMany(ctx, p) })
	return s.pool.SendBatch(ctx, b).Close()
}
