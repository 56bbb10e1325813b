package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Channel sends one attempt of a delivery.
type Channel interface {
	Send(ctx context.Context, d *Delivery, s *Subject) Outcome
}

// Outcome is what one attempt did.
type Outcome struct {
	OK         bool
	StatusCode int
	Err        error
	// Payload is kept with the delivery, and sent again on retries.
	Payload json.RawMessage
	// RetryAfter, when > 0, is when the receiver asked to be tried again
	// (429 Retry-After), instead of the schedule.
	RetryAfter time.Duration
	// Permanent: no retry will do better (410 Gone, no address).
	Permanent bool
	// Disable, when set, disables the delivery's endpoint with this reason.
	Disable string
}

// DefaultSchedule is the retry schedule of Standard Webhooks (and of every
// channel here): the waits after the 1st, 2nd, … failed attempt.
var DefaultSchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour}

// Config configures a Sender.
type Config struct {
	Store    Store
	Channels map[string]Channel
	// Schedule is the retry schedule (default DefaultSchedule); Scale
	// multiplies it (GATEHOUSE_WEBHOOK_BACKOFF_SCALE; default 1).
	Schedule []time.Duration
	Scale    float64
	// Lease is how long a claimed delivery is this sender's before
	// another may take it (default 2 min: longer than any attempt).
	Lease time.Duration
	// HandLease is the lease of deliveries born claimed for this sender
	// (Take; default 30 s): a crash between their commit and their
	// attempt delays them by that much, and an attempt ends 5 s before
	// its lease does.
	HandLease time.Duration
	// InFlight bounds the deliveries sent at once (default 64), and
	// PerDestination those to one endpoint or channel (default 16).
	InFlight       int
	PerDestination int
	// Poll is the longest wait without a wake-up (default 1 min): a
	// fallback in case a notification was missed.
	Poll time.Duration
	// Linger is how long a wake-up waits for more deliveries before it
	// claims (default 20 ms; negative: not at all): under load one claim
	// takes a batch instead of one row a commit, and the results of a
	// batch are recorded in one statement.
	Linger time.Duration
	// RecordLinger is how long the attempts that finished wait for more
	// before they are recorded, in one statement (default 50 ms;
	// negative: not at all). Their slots are free at once.
	RecordLinger time.Duration
	Logger       *slog.Logger
}

// Sender delivers the outbox.
type Sender struct {
	cfg  Config
	log  *slog.Logger
	wake chan struct{}

	mu       sync.Mutex
	inflight map[string]int
	total    int
	// handed holds deliveries taken (Take) and not yet sent for want of
	// a slot; taken is signalled when some are.
	handed []Delivery
	taken  chan struct{}
	// closed: Stop began; what is handed now is handed back.
	closed bool
	// reclaim: a claim is owed once slots free up: the last one left due
	// rows behind (no free slot, or a saturated destination), or an
	// attempt failed (the timer must learn of its retry).
	reclaim bool

	// results carries finished attempts to the recorder, which writes
	// what has gathered in one statement.
	results  chan Finished
	recorded chan struct{}

	cancel context.CancelFunc
	loop   chan struct{}
	sends  sync.WaitGroup
}

// NewSender returns a Sender; Start runs it.
func NewSender(cfg Config) *Sender {
	if cfg.Schedule == nil {
		cfg.Schedule = DefaultSchedule
	}
	if cfg.Scale <= 0 {
		cfg.Scale = 1
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 2 * time.Minute
	}
	if cfg.HandLease <= 0 {
		cfg.HandLease = 30 * time.Second
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = 64
	}
	if cfg.PerDestination <= 0 {
		cfg.PerDestination = 16
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Minute
	}
	if cfg.Linger == 0 {
		cfg.Linger = 20 * time.Millisecond
	}
	if cfg.RecordLinger == 0 {
		cfg.RecordLinger = 50 * time.Millisecond
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sender{cfg: cfg, log: log, wake: make(chan struct{}, 1), taken: make(chan struct{}, 1), inflight: map[string]int{}}
}

// HandLease is the lease deliveries handed to Take are born with.
func (s *Sender) HandLease() time.Duration { return s.cfg.HandLease }

// Take hands the sender deliveries that were born claimed for it (attempt
// 1, leased for HandLease) by a commit of this replica: they are sent
// without a claim, in batches as wake-ups are. Those still waiting for a
// slot when half their lease is gone are left to it: any sender claims
// them once it lapses. It never blocks.
func (s *Sender) Take(ds []Delivery) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.handBack(ds)
		return
	}
	s.handed = append(s.handed, ds...)
	s.mu.Unlock()
	poke(s.taken)
}

// Wake tells the sender that deliveries may be due (a local commit, a
// NOTIFY from another replica). It never blocks.
func (s *Sender) Wake() { poke(s.wake) }

// poke signals ch (capacity 1) without blocking: a signal already pending
// stands for this one.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Start runs the sender until Stop.
func (s *Sender) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.loop = make(chan struct{})
	s.results = make(chan Finished, s.cfg.InFlight)
	s.recorded = make(chan struct{})
	go func() { defer close(s.recorded); s.record() }()
	go func() { defer close(s.loop); s.run(ctx) }()
}

// Stop stops claiming, hands back the deliveries handed to it and not yet
// sent (and those handed from now on), and waits for the deliveries in
// flight until ctx ends; those still unfinished are taken again after
// their lease.
func (s *Sender) Stop(ctx context.Context) {
	s.mu.Lock()
	s.closed = true
	left := s.handed
	s.handed = nil
	s.mu.Unlock()
	s.handBack(left)
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.loop
	done := make(chan struct{})
	go func() { s.sends.Wait(); close(s.results); <-s.recorded; close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (s *Sender) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.taken:
			// Handed deliveries need no claim, and change nothing the
			// timer waits for.
			s.linger(ctx)
			s.sendHanded(ctx)
			continue
		case <-s.wake:
			s.linger(ctx)
		case <-timer.C:
		}
		n, full, busy, err := s.claim(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.log.Warn("claiming deliveries", "error", err)
		}
		wait := s.cfg.Poll
		if err != nil {
			wait = time.Second
		} else if !full && n == 0 {
			// Nothing more is due now: sleep until the next one is.
			// Busy destinations are left out: their own completions
			// wake the loop, so a saturated receiver is not polled.
			if at, ok, err := s.cfg.Store.NextDue(ctx, busy); err != nil {
				wait = time.Second
			} else if ok {
				wait = min(max(time.Until(at), 5*time.Millisecond), s.cfg.Poll)
			}
		}
		// Go 1.23 timers: Reset leaves no stale tick behind.
		timer.Reset(wait)
	}
}

// linger lets deliveries gather after a wake-up.
func (s *Sender) linger(ctx context.Context) {
	if s.cfg.Linger <= 0 {
		return
	}
	t := time.NewTimer(s.cfg.Linger)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// claim takes what the free slots allow and sends it: n deliveries; full
// reports that the slots (not the due rows) were the limit; busy lists
// the saturated destinations.
func (s *Sender) claim(ctx context.Context) (n int, full bool, busy []string, err error) {
	s.mu.Lock()
	free := s.cfg.InFlight - s.total
	for dest, n := range s.inflight {
		if n >= s.cfg.PerDestination {
			busy = append(busy, dest)
		}
	}
	s.mu.Unlock()
	if busy == nil {
		busy = []string{}
	}
	if free <= 0 {
		return 0, true, busy, nil
	}
	ds, err := s.cfg.Store.ClaimDeliveries(ctx, free, s.cfg.Lease, busy)
	if err != nil {
		return 0, false, busy, err
	}
	s.mu.Lock()
	for i := range ds {
		s.occupy(ds[i].Destination())
	}
	s.reclaim = len(ds) == free || len(busy) > 0
	s.mu.Unlock()
	s.send(ctx, ds)
	return len(ds), len(ds) == free, busy, nil
}

// handBack makes ds due for any sender, at once rather than when their
// lease lapses.
func (s *Sender) handBack(ds []Delivery) {
	if len(ds) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.cfg.Store.ReleaseDeliveries(ctx, ds); err != nil {
		s.log.Warn("handing back deliveries", "deliveries", len(ds), "error", err)
	}
}

// sendHanded sends the handed deliveries that have a slot.
func (s *Sender) sendHanded(ctx context.Context) {
	now := time.Now()
	s.mu.Lock()
	var ds []Delivery
	keep := s.handed[:0]
	for _, d := range s.handed {
		dest := d.Destination()
		switch {
		case now.After(d.NextAt.Add(-s.cfg.HandLease / 2)):
			// Left to its lease.
		case s.total >= s.cfg.InFlight || s.inflight[dest] >= s.cfg.PerDestination:
			keep = append(keep, d)
		default:
			s.occupy(dest)
			ds = append(ds, d)
		}
	}
	clear(s.handed[len(keep):])
	s.handed = keep
	s.mu.Unlock()
	s.send(ctx, ds)
}

// send reads what ds are about, in one statement, and makes an attempt at
// each; their slots are taken.
func (s *Sender) send(ctx context.Context, ds []Delivery) {
	var subjs []*Subject
	var subjErr error
	if len(ds) > 0 {
		// Claimed rows are sent even when Stop comes now.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		subjs, subjErr = s.cfg.Store.Subjects(rctx, ds)
		cancel()
	}
	for i := range ds {
		d := ds[i]
		var subj *Subject
		if subjErr == nil {
			subj = subjs[i]
		}
		s.sends.Add(1)
		go func() {
			defer s.sends.Done()
			s.results <- Finished{Delivery: &d, Result: s.deliver(&d, subj, subjErr)}
		}()
	}
}

// record writes the results of attempts as they come, each time all that
// have gathered in one statement, and frees their slots.
func (s *Sender) record() {
	const most = 256
	batch := make([]Finished, 0, most)
	// Go 1.23 timers: Reset after Stop or a fire leaves no stale tick.
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for f := range s.results {
		s.release(&f)
		batch = append(batch[:0], f)
		var late <-chan time.Time
		if s.cfg.RecordLinger > 0 {
			linger.Reset(s.cfg.RecordLinger)
			late = linger.C
		}
		for len(batch) < most {
			f, ok := s.next(late)
			if !ok {
				break
			}
			s.release(&f)
			batch = append(batch, f)
		}
		linger.Stop()
		s.finish(batch)
	}
}

// next is the next finished attempt, waiting for it until late fires (a
// nil late: only one already there); false when there is none.
func (s *Sender) next(late <-chan time.Time) (Finished, bool) {
	if late == nil {
		select {
		case f, ok := <-s.results:
			return f, ok
		default:
			return Finished{}, false
		}
	}
	select {
	case f, ok := <-s.results:
		return f, ok
	case <-late:
		return Finished{}, false
	}
}

// occupy takes a slot for an attempt to dest; s.mu is held.
func (s *Sender) occupy(dest string) {
	s.inflight[dest]++
	s.total++
}

// release frees the slot of a finished attempt, for a handed delivery
// that waits for one, or for a claim when the last one left rows behind:
// once half the slots of the destination, or of the sender, are free
// (claims come in batches, not one per completion).
func (s *Sender) release(f *Finished) {
	dest := f.Delivery.Destination()
	s.mu.Lock()
	n := s.inflight[dest] - 1
	if n <= 0 {
		delete(s.inflight, dest)
	} else {
		s.inflight[dest] = n
	}
	s.total--
	wake := s.reclaim && (n <= s.cfg.PerDestination/2 || s.total <= s.cfg.InFlight/2)
	handed := len(s.handed) > 0
	s.mu.Unlock()
	if wake {
		s.Wake()
	}
	if handed {
		poke(s.taken)
	}
}

func (s *Sender) finish(batch []Finished) {
	// Recording is not cut short by Stop: the attempts were made.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lost, err := s.cfg.Store.FinishDeliveries(ctx, batch)
	if err != nil {
		// Unrecorded attempts are made again after their claims lapse,
		// under the same ids.
		s.log.Warn("recording deliveries", "deliveries", len(batch), "error", err)
	}
	for _, f := range batch {
		d, r := f.Delivery, f.Result
		switch {
		case err != nil:
		case slices.Contains(lost, d.ID):
			s.log.Warn("recording a delivery", "delivery", d.ID, "error", "claimed again by another sender")
		default:
			lvl := slog.LevelDebug
			if r.State != StateDelivered {
				lvl = slog.LevelInfo
			}
			s.log.Log(ctx, lvl, "delivery", "delivery", d.ID, "event", d.Event, "channel", d.Channel, "attempt", d.Attempt,
				"state", r.State, "status", r.StatusCode, "error", r.Error)
		}
	}
	// An attempt to be retried, now on record: the loop's timer must
	// learn when.
	for _, f := range batch {
		if f.Result.State == StatePending {
			s.Wake()
			break
		}
	}
}

// deliver makes one attempt at d, about subj (nil: gone, or not read
// because of subjErr).
func (s *Sender) deliver(d *Delivery, subj *Subject, subjErr error) Result {
	// An attempt is not cut short by Stop: it ends within its lease.
	ctx, cancel := context.WithTimeout(context.Background(), min(s.cfg.Lease, s.cfg.HandLease)-5*time.Second)
	defer cancel()
	start := time.Now()
	var out Outcome
	ch := s.cfg.Channels[d.Channel]
	switch {
	case subjErr != nil:
		out = Outcome{Err: fmt.Errorf("reading the task: %w", subjErr)}
	case subj == nil:
		out = Outcome{Err: errors.New("the task is gone"), Permanent: true}
	case ch == nil:
		out = Outcome{Err: fmt.Errorf("channel %s is not configured on this replica", d.Channel)}
	default:
		out = ch.Send(ctx, d, subj)
	}
	r := Result{Payload: out.Payload, StatusCode: out.StatusCode, DurationMS: time.Since(start).Milliseconds()}
	switch {
	case out.OK:
		r.State = StateDelivered
	case out.Permanent || d.Attempt > len(s.cfg.Schedule):
		r.State = StateFailed
	default:
		r.State = StatePending
		r.NextAt = time.Now().Add(s.backoff(d.Attempt, out.RetryAfter))
	}
	if out.Err != nil {
		r.Error = out.Err.Error()
	}
	if out.Disable != "" && d.EndpointID != "" {
		if err := s.cfg.Store.DisableEndpoint(ctx, d.EndpointID, out.Disable); err != nil {
			s.log.Warn("disabling webhook endpoint", "endpoint", d.EndpointID, "error", err)
		}
	}
	return r
}

// backoff is the wait after failed attempt n (from 1): the receiver's
// Retry-After when it gave one, else the schedule's, scaled, with ±20 %
// jitter so that retries of many deliveries do not arrive together.
func (s *Sender) backoff(n int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, 24*time.Hour)
	}
	base := s.cfg.Schedule[min(n, len(s.cfg.Schedule))-1]
	d := float64(base) * s.cfg.Scale
	d *= 0.8 + 0.4*rand.Float64()
	return time.Duration(d)
}
