package postgres

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

// Group commit. Every node run of every task ends in one commit. With many
// tasks running, PostgreSQL spends more on each transaction than on its
// rows: a backend woken per commit, a commit record, a WAL flush to wait
// for, a round trip, and on a small machine the context switches between
// a dozen busy backends. So commits do not go to the database one by one:
// at most `lanes` batches are in flight, and the commits that arrive while
// they are busy travel together in the next batch — one transaction, one
// round trip, one flush for all of them. An idle store sends a commit at
// once; batches grow only under load, as PostgreSQL's own group commit does.
//
// A batch is all or nothing. When it fails (a lease lost by one of its
// tasks raises and aborts the whole transaction), nothing of it was
// written, and each of its commits is sent again alone, so that only the
// commit at fault sees the error.

const (
	// maxGroup bounds a batch: past a few dozen commits the round trip is
	// already amortised, and a long batch holds its row locks longer.
	maxGroup = 32
	// groupTimeout bounds a batch sent for several callers, whose contexts
	// may not cancel it, and a commit sent alone for a caller whose context
	// cannot end (the engine's: a commit is finished even when its run is
	// cancelled).
	groupTimeout = time.Minute
)

// unit is one Commit: its statements, queued with the callbacks that read
// their results. queue may run more than once (the second time alone, after
// its batch failed), so the callbacks must overwrite, not append.
type unit struct {
	redoable bool
	// settles: the unit's statements settle on their generic plans on
	// their own (TaskCommit, TaskCommitQuiet, TaskInsert: PostgreSQL plans
	// them 5 times on a connection, then never again), so a batch of such
	// units needs no TxGenericPlans, whose statement was a third of a
	// plain commit's batch: its own bind, execute and results, in pgx and
	// in PostgreSQL.
	settles bool
	queue   func(b *pgx.Batch)
	done    chan error
}

type committer struct {
	pool  *pgxpool.Pool
	lanes int
	// timeout: groupTimeout, shorter in tests.
	timeout time.Duration

	mu      sync.Mutex
	pending []*unit
	active  int // batches in flight

	batches, commits, splits atomic.Int64
}

// CommitStats counts what the store's group commit did.
type CommitStats struct {
	Batches int64 // batches sent
	Commits int64 // commits they carried: Commits/Batches is the mean group size
	Splits  int64 // batches that failed and were sent again commit by commit
}

// CommitStats returns the counts since the store was made.
func (s *Store) CommitStats() CommitStats {
	g := s.group
	return CommitStats{Batches: g.batches.Load(), Commits: g.commits.Load(), Splits: g.splits.Load()}
}

// lanes is how many batches may be in flight: one per core PostgreSQL may
// use (the server usually shares the machine's cores with it), at least two
// so that a batch in flight never holds back the next one entirely.
func lanes() int { return max(2, runtime.GOMAXPROCS(0)) }

func newCommitter(pool *pgxpool.Pool, lanes int) *committer {
	return &committer{pool: pool, lanes: max(lanes, 1), timeout: groupTimeout}
}

// commit sends u, alone or with others, and returns its outcome. When ctx
// ends first, commit returns ctx.Err() and u may still be committed, as a
// batch cancelled in flight may or may not have been; a fenced write makes
// either outcome safe for the engine, which reloads before it runs again.
func (g *committer) commit(ctx context.Context, u *unit) error {
	g.mu.Lock()
	if g.active < g.lanes && len(g.pending) == 0 {
		// Idle: send it from here, alone, without a hop to another
		// goroutine. It travels alone, so the caller's ctx may cancel it.
		g.active++
		g.mu.Unlock()
		g.batches.Add(1)
		g.commits.Add(1)
		// A ctx that cannot end (the engine's) gets the connection's
		// deadline as its bound instead of a timeout context, which pgx
		// would watch (context.AfterFunc) besides its timer.
		err := g.exec(ctx, []*unit{u}, ctx.Done() == nil)
		g.mu.Lock()
		if len(g.pending) == 0 {
			g.active--
			g.mu.Unlock()
		} else {
			// Commits queued meanwhile: this lane goes on sending them.
			g.mu.Unlock()
			go g.drive()
		}
		return err
	}
	u.done = doneChans.Get().(chan error)
	g.pending = append(g.pending, u)
	start := g.active < g.lanes
	if start {
		g.active++
	}
	g.mu.Unlock()
	if start {
		go g.drive()
	}
	select {
	case err := <-u.done:
		doneChans.Put(u.done) // empty, and no one sends on it again
		return err
	case <-ctx.Done():
		return ctx.Err() // u.done is left to its batch, which still sends on it
	}
}

// doneChans are units' result channels (capacity 1), reused: a queued
// commit made one per node run.
var doneChans = sync.Pool{New: func() any { return make(chan error, 1) }}

// drive sends batches until nothing is pending.
func (g *committer) drive() {
	for {
		g.mu.Lock()
		n := min(len(g.pending), maxGroup)
		if n == 0 {
			g.active--
			g.mu.Unlock()
			return
		}
		batch := make([]*unit, n)
		copy(batch, g.pending)
		g.pending = append(g.pending[:0], g.pending[n:]...)
		g.mu.Unlock()
		g.send(batch)
	}
}

func (g *committer) send(units []*unit) {
	g.batches.Add(1)
	g.commits.Add(int64(len(units)))
	// A batch serves several callers: no one caller's ctx may cancel it;
	// the connection's deadline bounds it.
	ctx := context.Background()
	err := g.exec(ctx, units, true)
	if err != nil && len(units) > 1 {
		// Find the commit at fault: nothing of the batch was written.
		g.splits.Add(1)
		for _, u := range units {
			u.done <- g.exec(ctx, []*unit{u}, true)
		}
		return
	}
	for _, u := range units {
		u.done <- err
	}
}

// exec sends units in one batch; bound: with the connection's deadline
// g.timeout away (a deadline that passes breaks the connection, which
// the pool then drops, as a cancelled ctx does).
func (g *committer) exec(ctx context.Context, units []*unit, bound bool) error {
	b := &pgx.Batch{}
	for _, u := range units {
		if !u.settles {
			queue(b, func(q *dbsqlc.Queries) error { return q.TxGenericPlans(ctx) })
			break
		}
	}
	redoable := true
	for _, u := range units {
		redoable = redoable && u.redoable
	}
	if redoable {
		// Only redoable commits: none needs its flush waited for. WAL is
		// flushed in order, so the task's next synchronous commit makes
		// these durable too, and a crash before it loses only what the
		// engine redoes.
		queue(b, func(q *dbsqlc.Queries) error { return q.TxAsyncCommit(ctx) })
	}
	for _, u := range units {
		u.queue(b)
	}
	c, err := g.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	if bound {
		nc := c.Conn().PgConn().Conn()
		if err := nc.SetDeadline(time.Now().Add(g.timeout)); err != nil {
			return err
		}
		defer nc.SetDeadline(time.Time{}) //nolint:errcheck // a broken connection is dropped at Release
	}
	return translate(c.SendBatch(ctx, b).Close())
}
