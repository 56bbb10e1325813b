// Package timekeeper fires the durable timers of interrupts (SPEC §11:
// deadlines, reminders, escalation steps). Each replica runs one keeper;
// it sleeps until the earliest timer in the database is due (one query
// per wake-up, none per interrupt), wakes earlier when an interrupt with an
// earlier timer is raised (here, or on another replica through
// LISTEN/NOTIFY), and fires what is due in batches. The firing itself is
// the store's: a timer row is deleted by the transaction that applies it,
// so it fires exactly once whichever replica takes it, and a timer that
// fell due while every replica was down fires at the next start.
//
// It declares the Store it uses and imports auth (its TimerPolicy) only:
// never postgres (internal/deps' test keeps it so).
package timekeeper

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/gatehousehq/gatehouse/internal/auth"
)

// Store is what the keeper needs of the database.
type Store interface {
	NextTimer(ctx context.Context) (time.Time, bool, error)
	FireTimers(ctx context.Context, limit int, pol auth.TimerPolicy) (int, error)
}

// Fallback is the longest a keeper sleeps without looking: a hint lost
// with a dead replica's connection costs at most this much delay.
const Fallback = time.Minute

// Keeper fires due timers.
type Keeper struct {
	store Store
	pol   auth.TimerPolicy
	log   *slog.Logger
	batch int
	poke  chan time.Time

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	fired   int64
	wakeups int64
}

// New returns a keeper over store, asking policy who reminders and
// escalations name.
func New(store Store, policy auth.Policy, log *slog.Logger) *Keeper {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Keeper{store: store, pol: policyAdapter{policy}, log: log, batch: 1000, poke: make(chan time.Time, 1)}
}

type policyAdapter struct{ p auth.Policy }

func (a policyAdapter) Added(kind string, level int) []string { return a.p.AddedNames(kind, level) }

// Poke tells the keeper a timer due at due was scheduled (zero: something
// may have been missed, look again). It never blocks.
func (k *Keeper) Poke(due time.Time) {
	for {
		select {
		case k.poke <- due:
			return
		default:
		}
		// A poke is pending: keep the earlier of the two.
		select {
		case old := <-k.poke:
			if !old.IsZero() && (due.IsZero() || old.Before(due)) {
				due = old
			}
		default:
		}
	}
}

// PokePayload is Poke for a ChannelTimers notification's payload (Unix
// nanoseconds; "" after a reconnect).
func (k *Keeper) PokePayload(p string) {
	if n, err := strconv.ParseInt(p, 10, 64); err == nil {
		k.Poke(time.Unix(0, n))
		return
	}
	k.Poke(time.Time{})
}

// Start runs the keeper until Stop.
func (k *Keeper) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	k.mu.Lock()
	k.cancel, k.done = cancel, make(chan struct{})
	done := k.done
	k.mu.Unlock()
	go func() {
		defer close(done)
		k.Run(ctx)
	}()
}

// Stop ends the keeper and waits for a firing in flight.
func (k *Keeper) Stop() {
	k.mu.Lock()
	cancel, done := k.cancel, k.done
	k.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// Stats reports how many timers this keeper fired and how often it woke.
func (k *Keeper) Stats() (fired, wakeups int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fired, k.wakeups
}

// Run fires timers until ctx ends.
func (k *Keeper) Run(ctx context.Context) {
	for ctx.Err() == nil {
		k.mu.Lock()
		k.wakeups++
		k.mu.Unlock()
		// Fire everything due, a batch per transaction.
		var idle bool
		for ctx.Err() == nil {
			n, err := k.store.FireTimers(ctx, k.batch, k.pol)
			if err != nil {
				if ctx.Err() == nil {
					k.log.Error("firing timers", "error", err)
					sleep(ctx, time.Second)
				}
				break
			}
			k.mu.Lock()
			k.fired += int64(n)
			k.mu.Unlock()
			if n > 0 {
				k.log.Debug("timers fired", "n", n)
			}
			if n < k.batch {
				idle = n == 0
				break
			}
		}
		wait := Fallback
		next, ok, err := k.store.NextTimer(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			k.log.Error("reading the next timer", "error", err)
			wait = time.Second
		} else if ok {
			wait = min(time.Until(next), Fallback)
			if wait <= 0 {
				if !idle {
					continue
				}
				// Due by our clock but not by the database's (clocks
				// differ), or held by another replica: do not spin.
				wait = 50 * time.Millisecond
			}
		}
		t := time.NewTimer(wait)
	sleeping:
		for {
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
				break sleeping
			case due := <-k.poke:
				if due.IsZero() || !ok || due.Before(next) {
					t.Stop()
					if d := time.Until(due); !due.IsZero() && d > 0 {
						next, ok = due, true
						t = time.NewTimer(d)
						continue
					}
					break sleeping
				}
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (a policyAdapter) Recipients(kind string, level int, creator string, candidates []auth.Principal) []auth.Principal {
	return a.p.Recipients(kind, level, creator, candidates)
}

func (a policyAdapter) EscalationRecipients(kind string, level int, creator string, candidates []auth.Principal) []auth.Principal {
	return a.p.EscalationRecipients(kind, level, creator, candidates)
}
