// Package runner executes tasks durably inside the server process: it
// claims runnable tasks under a lease, keeps the lease alive while a node
// runs, hands it back on shutdown, and takes over tasks whose lease expired
// on a dead replica. Wake-ups arrive through LISTEN/NOTIFY (package live);
// a sweep timed to the next lease expiry is the fallback.
//
// It declares the Store and Engine it uses and imports graph only: never
// postgres (internal/deps' test keeps it so).
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
)

// Store is what the runner needs of storage.
type Store interface {
	Claim(ctx context.Context, owner string, max int, ttl time.Duration) ([]graph.Claim, error)
	Heartbeat(ctx context.Context, c graph.Claim, ttl time.Duration) error
	Release(ctx context.Context, c graph.Claim) error
	NextExpiry(ctx context.Context) (time.Time, error)
}

// Engine is what the runner needs of the engine.
type Engine interface {
	RunUntil(ctx context.Context, taskID string, fence int64, drain <-chan struct{}) (graph.Outcome, error)
	RunFrom(ctx context.Context, snap *graph.Snapshot, fence int64, drain <-chan struct{}) (graph.Outcome, error)
	Fail(ctx context.Context, taskID string, fence int64, cause error) error
}

// maxClaimedAt bounds the memory of recent claims.
const maxClaimedAt = 4096

// Config configures a Runner.
type Config struct {
	Owner    string        // this replica's name in lease_owner
	Workers  int           // concurrent tasks
	LeaseTTL time.Duration // lease length
	// MaxSweep caps the time between two looks for work without a wake-up
	// (default 10s).
	MaxSweep time.Duration
	Logger   *slog.Logger
}

// Runner runs tasks. Start it once; Stop it (again: a no-op) after Start.
type Runner struct {
	store  Store
	engine Engine
	cfg    Config
	log    *slog.Logger

	wake   chan struct{}
	freed  chan struct{}
	stopCh chan struct{}
	done   chan struct{}
	// drain closes at Stop: runs finish their node in flight, start no other.
	drain chan struct{}

	runCtx    context.Context
	cancelRun context.CancelFunc
	wg        sync.WaitGroup
	stopOnce  sync.Once

	mu       sync.Mutex
	inflight map[string]graph.Claim
	executed int
	reserved int  // slots promised to handoffs not yet settled
	stopping bool // Stop began: no run starts any more
	// claimedAt: each task this runner claimed lately, with its last event
	// seq at the claim (see WakeFor).
	claimedAt map[string]int64
}

// New returns a runner.
func New(store Store, engine Engine, cfg Config) *Runner {
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 15 * time.Second
	}
	if cfg.MaxSweep <= 0 {
		cfg.MaxSweep = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Runner{store: store, engine: engine, cfg: cfg, log: cfg.Logger,
		wake: make(chan struct{}, 1), freed: make(chan struct{}, 1), stopCh: make(chan struct{}), done: make(chan struct{}),
		drain:  make(chan struct{}),
		runCtx: ctx, cancelRun: cancel, inflight: map[string]graph.Claim{}, claimedAt: map[string]int64{}}
}

// Wake asks the runner to look for work now. It never blocks.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// WakeFor is Wake for a task announced runnable by the event with seq
// (0: unknown). When this runner claimed the task after that event, the
// claim already consumed the announcement and there is nothing to look
// for: a replica hears of its own decisions twice, from the handler that
// took them and from NOTIFY, and would otherwise claim in vain each time.
func (r *Runner) WakeFor(taskID string, seq int64) {
	if seq > 0 {
		r.mu.Lock()
		at, ok := r.claimedAt[taskID]
		r.mu.Unlock()
		if ok && at >= seq {
			return
		}
	}
	r.Wake()
}

// Handoff offers a free worker for a task the caller is about to make
// runnable itself — a decision taken by this replica. lease goes with the
// decision (graph.DecisionInput.Lease), which then leases the task to this
// runner in its own transaction; settle must be called once afterwards,
// whatever happened: it starts the run when lease.Fence was granted and
// frees the slot otherwise. Handoff returns nil, nil when no worker is
// free or the runner is stopping; the caller then wakes the runner as for
// any runnable task.
func (r *Runner) Handoff() (lease *graph.Lease, settle func(taskID string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping || r.cfg.Workers-len(r.inflight)-r.reserved <= 0 {
		return nil, nil
	}
	r.reserved++
	lease = &graph.Lease{Owner: r.cfg.Owner, TTL: r.cfg.LeaseTTL}
	var once sync.Once
	return lease, func(taskID string) { once.Do(func() { r.adopt(lease, taskID) }) }
}

func (r *Runner) adopt(lease *graph.Lease, taskID string) {
	r.mu.Lock()
	r.reserved--
	if lease.Fence == 0 {
		r.mu.Unlock()
		return
	}
	c := graph.Claim{TaskID: taskID, Fence: lease.Fence}
	if r.stopping {
		r.mu.Unlock()
		// Too late to run it here: hand it back for another replica.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.store.Release(ctx, c); err != nil {
			r.log.Warn("handing back a lease taken with a decision", "task", taskID, "error", err)
		}
		return
	}
	r.startLocked(c, lease.Snapshot)
	r.mu.Unlock()
}

// Executed counts the task runs this runner started.
func (r *Runner) Executed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.executed
}

// Start begins claiming work.
func (r *Runner) Start() {
	go r.loop()
}

// Stop stops claiming and lets each run in flight finish its node run
// until ctx ends; then it cancels what is left (losing only the node runs
// in flight). Either way the leases are handed back, so another replica
// continues the tasks at once.
func (r *Runner) Stop(ctx context.Context) {
	// Once: a second call (a shutdown path and a deferred cleanup) waits
	// for the first to finish instead of closing the channels again.
	r.stopOnce.Do(func() { r.stop(ctx) })
}

func (r *Runner) stop(ctx context.Context) {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	close(r.stopCh)
	<-r.done
	close(r.drain)
	finished := make(chan struct{})
	go func() { r.wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		r.mu.Lock()
		n := len(r.inflight)
		r.mu.Unlock()
		r.log.Warn("shutdown grace period over; handing back leases of runs in flight", "runs", n)
		r.cancelRun()
		<-finished
	}
	r.cancelRun()
}

func (r *Runner) loop() {
	defer close(r.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	// backlog: the last claim filled every free slot, so runnable tasks may
	// be waiting for a worker to free up. Without it, a freed worker has
	// nothing to look for: every task that became runnable since sent a
	// wake-up of its own.
	backlog := false
	var expiry time.Time // earliest lease expiry, as last read
	var expiryRead time.Time
	for {
		var full bool
		backlog, full = r.claim()
		wait := r.cfg.MaxSweep
		if backlog && !full {
			wait = 0
		} else {
			// Wake just after the earliest lease expires: a dead replica's
			// task moves on without delay beyond its TTL. A reading a second
			// old is good enough (leases last many seconds) and spares a
			// query per claim when tasks come and go quickly.
			if time.Since(expiryRead) > time.Second {
				if next, err := r.store.NextExpiry(r.runCtx); err == nil {
					expiry, expiryRead = next, time.Now()
				}
			}
			if !expiry.IsZero() {
				if d := time.Until(expiry) + 50*time.Millisecond; d < wait {
					wait = max(d, 50*time.Millisecond)
				}
			}
		}
		timer.Reset(wait)
	wait:
		for {
			select {
			case <-r.stopCh:
				return
			case <-r.wake:
			case <-r.freed:
				if !backlog {
					continue wait
				}
			case <-timer.C:
				expiryRead = time.Time{} // the sweep reads it afresh
			}
			break
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// claim fills free worker slots. more reports whether runnable tasks may
// be left waiting; full, that no slot was free to look.
func (r *Runner) claim() (more, full bool) {
	r.mu.Lock()
	free := r.cfg.Workers - len(r.inflight) - r.reserved
	r.mu.Unlock()
	if free <= 0 {
		return true, true
	}
	claims, err := r.store.Claim(r.runCtx, r.cfg.Owner, free, r.cfg.LeaseTTL)
	if err != nil {
		if r.runCtx.Err() == nil {
			r.log.Error("claiming tasks", "error", err)
		}
		return false, false
	}
	for _, c := range claims {
		r.mu.Lock()
		r.startLocked(c, c.Snapshot)
		r.mu.Unlock()
	}
	return len(claims) == free, false
}

// startLocked runs c in a worker of its own; r.mu is held. Every run,
// claimed or handed over, starts here; snap, when set, is the task as its
// lease was taken (a handover's Lease.Snapshot), and the run starts from
// it instead of loading the task.
func (r *Runner) startLocked(c graph.Claim, snap *graph.Snapshot) {
	r.inflight[c.TaskID] = c
	r.executed++
	if c.Seq > 0 {
		if len(r.claimedAt) >= maxClaimedAt {
			clear(r.claimedAt) // forgetting costs only a claim in vain
		}
		r.claimedAt[c.TaskID] = c.Seq
	}
	r.wg.Add(1)
	go r.execute(c, snap)
}

func (r *Runner) execute(c graph.Claim, snap *graph.Snapshot) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		delete(r.inflight, c.TaskID)
		r.mu.Unlock()
		select {
		case r.freed <- struct{}{}:
		default:
		}
	}()
	ctx, cancel := context.WithCancel(r.runCtx)
	defer cancel()
	hb := r.startHeartbeat(ctx, c, cancel)
	start := time.Now()
	var out graph.Outcome
	var err error
	if snap != nil && snap.Task.ID == c.TaskID {
		out, err = r.engine.RunFrom(ctx, snap, c.Fence, r.drain)
	} else {
		out, err = r.engine.RunUntil(ctx, c.TaskID, c.Fence, r.drain)
	}
	cancel()
	leaseLost := hb.stop()
	if err == nil && !r.log.Enabled(ctx, slog.LevelDebug) {
		return // the common end: nothing to log, nothing to hand back
	}
	log := r.log.With("task", c.TaskID, "fence", c.Fence)
	switch {
	case err == nil:
		log.Debug("task run ended", "status", out.Status, "duration", time.Since(start))
	case errors.Is(err, graph.ErrLeaseLost) || leaseLost:
		log.Info("lease lost; another worker continues the task", "error", err)
	case errors.Is(err, graph.ErrDrained) || r.runCtx.Err() != nil:
		// Shutting down: hand the lease back so another replica continues.
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer rcancel()
		if rerr := r.store.Release(rctx, c); rerr != nil {
			log.Warn("handing back lease", "error", rerr)
		} else {
			log.Info("lease handed back at shutdown")
		}
	case isTaskFault(err):
		log.Error("task cannot run; failing it", "error", err)
		if ferr := r.engine.Fail(context.Background(), c.TaskID, c.Fence, err); ferr != nil {
			log.Error("failing task", "error", ferr)
		}
	default:
		// Probably the database: hand the task back; it is retried.
		log.Error("task run interrupted", "error", err)
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer rcancel()
		_ = r.store.Release(rctx, c)
	}
}

// isTaskFault: errors that running the task again will not cure.
func isTaskFault(err error) bool {
	var se *graph.StateError
	return errors.As(err, &se) || errors.Is(err, graph.ErrUnknownWorkflow)
}

// heartbeat keeps a run's lease alive: a timer, not a goroutine per run
// (most runs end long before their first heartbeat is due).
type heartbeat struct {
	r      *Runner
	ctx    context.Context
	c      graph.Claim
	cancel context.CancelFunc
	every  time.Duration

	mu      sync.Mutex // held while a heartbeat is sent: stop waits for it
	stopped bool
	lost    bool
	t       *time.Timer
}

func (r *Runner) startHeartbeat(ctx context.Context, c graph.Claim, cancel context.CancelFunc) *heartbeat {
	h := &heartbeat{r: r, ctx: ctx, c: c, cancel: cancel, every: r.cfg.LeaseTTL / 3}
	h.mu.Lock()
	h.t = time.AfterFunc(h.every, h.beat)
	h.mu.Unlock()
	return h
}

func (h *heartbeat) beat() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	hctx, hcancel := context.WithTimeout(h.ctx, h.every)
	err := h.r.store.Heartbeat(hctx, h.c, h.r.cfg.LeaseTTL)
	hcancel()
	switch {
	case errors.Is(err, graph.ErrLeaseLost):
		h.lost = true
		h.cancel()
		return
	case err != nil && h.ctx.Err() == nil:
		h.r.log.Warn("lease heartbeat failed", "task", h.c.TaskID, "error", err)
	}
	if h.ctx.Err() == nil {
		h.t.Reset(h.every)
	}
}

// stop ends the heartbeats, after the one in flight (its ctx is cancelled
// first, so that it ends soon): none extends the lease after stop, which
// may hand it back. It reports whether a heartbeat found the lease lost.
func (h *heartbeat) stop() (lost bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	h.t.Stop()
	return h.lost
}

// String describes the runner for logs.
func (r *Runner) String() string {
	return fmt.Sprintf("runner %s (%d workers, lease %s)", r.cfg.Owner, r.cfg.Workers, r.cfg.LeaseTTL)
}
