// Package postgres stores Gatehouse tasks in PostgreSQL: the engine's
// Checkpointer, migrations and the read side used by the API. SQL lives in
// db/queries and reaches Go through sqlc (package dbsqlc); rows become
// engine types before they leave this package.
//
// It implements the interfaces graph, auth, notify, runner, timekeeper and
// the handler packages declare; it must not import runner, timekeeper, live
// nor anything of internal/web.
package postgres

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/jcs"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
	"github.com/gatehousehq/gatehouse/internal/requests"
)

// Store is the PostgreSQL Checkpointer. It is safe for concurrent use and
// holds no per-task state: any number of Stores, in any number of
// processes, may serve one database.
type Store struct {
	*core
	// opts say what this Store's commits write to the outbox and whom they
	// tell; With makes a Store with other Options over the same core.
	opts Options
}

// core is what the Stores made With from one NewStore share: the pool, the
// group committer, the notifier and the blob cache.
type core struct {
	pool     *pgxpool.Pool
	q        *dbsqlc.Queries
	notifier *notifier
	group    *committer
	blobs    blobCache
	folding  atomic.Bool // a count fold in flight (observe.go)
}

// Options are a Store's settings, fixed when it is made: what its commits
// write to the outbox, and whom in this replica they tell. The zero
// Options write the deliveries every commit owes to webhooks and tell
// no one.
type Options struct {
	// Outbox says which notifications commits write and who takes them
	// (outbox.go).
	Outbox Outbox
	// Sinks hear of the events the store commits on its own, outside the
	// engine: task.cancelled (Cancel), task.retried (Retry) and approvals
	// short of a decision. The engine publishes the rest (graph.WithSink).
	Sinks []graph.EventSink
	// OnTimer hears of each interrupt raised with timers, with its earliest
	// due time (the timekeeper of this replica wakes earlier for it).
	OnTimer func(due time.Time)
}

var _ graph.Checkpointer = (*Store)(nil)

// NewStore returns a Store over pool with opts.
func NewStore(pool *pgxpool.Pool, opts Options) *Store {
	return &Store{core: &core{pool: pool, q: dbsqlc.New(pool), group: newCommitter(pool, lanes())}, opts: opts}
}

// With returns a Store over the same pool, committer, notifier and blob
// cache as s, with opts instead of s's. It is how a replica wires the
// parts that its store tells of its commits and that work through a
// store themselves: the sender, the timekeeper and the metrics are built
// over a Store without them, and the Store the engine and the server use
// is made With them (see the root package's Server.Run).
func (s *Store) With(opts Options) *Store { return &Store{core: s.core, opts: opts} }

// Pool returns the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// SQLSTATEs raised by gatehouse_lease_lost.
const (
	codeLeaseLost    = "GH409"
	codeTaskNotFound = "GH404"
	codeUniqueViol   = "23505"
)

func translate(err error) error {
	if err == nil {
		return nil // before errors.As, whose target escapes: an allocation per commit
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeLeaseLost:
			return fmt.Errorf("%w: %s", graph.ErrLeaseLost, pgErr.Message)
		case codeTaskNotFound:
			return graph.ErrTaskNotFound
		}
		if keyUsed(pgErr) {
			return requests.ErrKeyUsed
		}
	}
	return err
}

func parseID(id string) (uuid.UUID, bool) {
	if !graph.ValidID(id) {
		return uuid.UUID{}, false
	}
	u, err := uuid.Parse(id)
	return u, err == nil
}

// parseIDs parses the ids that are well formed and leaves out the others
// (a malformed id names nothing, so it matches no row).
func parseIDs(ids []string) []uuid.UUID {
	out := make([]uuid.UUID, 0, len(ids))
	for _, i := range ids {
		if id, ok := parseID(i); ok {
			out = append(out, id)
		}
	}
	return out
}

// Load implements graph.Checkpointer.
func (s *Store) Load(ctx context.Context, taskID string) (*graph.Snapshot, error) {
	return s.load(ctx, taskID, false)
}

// LoadRun implements graph.FieldCheckpointer: the large fields of the
// state come apart, each the very value this store holds when it holds
// it, so that a run's commits recognise the fields it did not change.
func (s *Store) LoadRun(ctx context.Context, taskID string) (*graph.Snapshot, error) {
	return s.load(ctx, taskID, true)
}

var _ graph.FieldCheckpointer = (*Store)(nil)

func (s *Store) load(ctx context.Context, taskID string, apart bool) (*graph.Snapshot, error) {
	id, ok := parseID(taskID)
	if !ok {
		return nil, graph.ErrTaskNotFound
	}
	// The values held are taken now: the query leaves them out, and the
	// cache may let go of them meanwhile.
	held, have := s.blobs.held(taskID)
	row, err := s.q.TaskSnapshot(ctx, dbsqlc.TaskSnapshotParams{ID: id, Have: have})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, graph.ErrTaskNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load task %s: %w", taskID, err)
	}
	return s.snapshot(taskID, held, row, apart)
}

// snapshot makes a TaskSnapshot row a Snapshot; held are the blob values
// the cache held when the query was made (its have).
func (s *Store) snapshot(taskID string, held []blob, row dbsqlc.TaskSnapshotRow, apart bool) (*graph.Snapshot, error) {
	blobs, ok := loadedBlobs(held, row.StateRefs, row.BlobKeys, row.BlobValues)
	if !ok {
		return nil, &graph.StateError{TaskID: taskID, Err: fmt.Errorf("state_refs %.200s: unreadable", row.StateRefs)}
	}
	var state json.RawMessage
	var fields []graph.StateField
	var err error
	if apart {
		state, fields, err = apartState(row.State, row.StateRefs, blobs)
	} else {
		state, err = joinState(row.State, row.StateRefs, row.BlobKeys, row.BlobValues)
	}
	if err != nil {
		return nil, &graph.StateError{TaskID: taskID, Err: err}
	}
	if !graph.TaskStatus(row.Status).Terminal() {
		s.blobs.put(taskID, row.LeaseFence, blobs)
	}
	snap := &graph.Snapshot{
		Task: graph.Task{ID: row.ID.String(), Workflow: row.Workflow, Title: row.Title, Input: row.Input,
			Options: row.Options, Status: graph.TaskStatus(row.Status), CurrentNode: row.CurrentNode,
			Result: row.Result, Error: row.Error, CreatedBy: row.CreatedBy, CreatedAt: row.CreatedAt,
			UpdatedAt: row.UpdatedAt, CompletedAt: row.CompletedAt, Fence: row.LeaseFence},
		Checkpoint: graph.Checkpoint{TaskID: row.ID.String(), Step: int(row.Step), LastNode: row.LastNodeID,
			NextNode: row.NextNodeID, State: state, Fields: fields, UpdatedAt: row.CheckpointUpdatedAt},
	}
	if err := json.Unmarshal(row.Iterations, &snap.Checkpoint.Iterations); err != nil {
		return nil, &graph.StateError{TaskID: taskID, Err: fmt.Errorf("iterations: %w", err)}
	}
	if err := json.Unmarshal(row.Answers, &snap.Checkpoint.Answers); err != nil {
		return nil, &graph.StateError{TaskID: taskID, Err: fmt.Errorf("answers: %w", err)}
	}
	if row.PendingInterruptID != nil {
		pid := row.PendingInterruptID.String()
		snap.Checkpoint.PendingInterrupt = pid
		if row.ITaskID != nil {
			itr := &graph.Interrupt{ID: pid, TaskID: row.ITaskID.String(), Node: deref(row.INode), Kind: deref(row.IKind),
				Iteration: int(deref(row.IIteration)), Status: deref(row.IStatus), ResolvedAt: row.IResolvedAt}
			if row.ICreatedAt != nil {
				itr.CreatedAt = *row.ICreatedAt
			}
			if err := json.Unmarshal(row.IPayload, &itr.Payload); err != nil {
				return nil, &graph.StateError{TaskID: taskID, Err: fmt.Errorf("interrupt %s payload: %w", pid, err)}
			}
			snap.Interrupt = itr
		}
		if row.DID != nil {
			snap.Decision = &graph.Decision{ID: row.DID.String(), InterruptID: pid, TaskID: taskID,
				Action: deref(row.DAction), Feedback: deref(row.DFeedback), Value: row.DValue,
				DecidedBy: deref(row.DDecidedBy), DecidedAt: deref(row.DDecidedAt)}
		}
	}
	return snap, nil
}

// Commit implements graph.Checkpointer: every write of c travels in one
// batch, which PostgreSQL runs as one implicit transaction — one round trip
// and one commit per node run, shared with the commits of other tasks that
// arrive while the store is busy (group.go). A commit held back and merged
// into c (c.Before) is written first in the same batch: two fenced
// statements, one transaction.
func (s *Store) Commit(ctx context.Context, c *graph.Commit) error {
	w, err := s.prepareCommit(ctx, c)
	if err != nil {
		return err
	}
	u := &unit{redoable: c.Redoable, settles: w.settles, queue: w.queue}
	var before *commitWork
	if b := c.Before; b != nil {
		if b.TaskID != c.TaskID || b.Fence != c.Fence {
			return fmt.Errorf("commit task %s: a commit merged before it must have its task and fence", c.TaskID)
		}
		if before, err = s.prepareCommit(ctx, b); err != nil {
			return err
		}
		// Every writer that locks both rows of a task takes the task row
		// first (a claim, a cancel, a commit that writes the row); a quiet
		// commit locks the checkpoint row only. Ahead of a commit that
		// writes the task row, in its transaction, the quiet one takes the
		// task row's share lock first too: checkpoint then task row would
		// deadlock with a cancel that came in between.
		before.lockTask = !c.Quiet
		u.redoable = u.redoable && b.Redoable
		u.settles = u.settles && before.settles
		u.queue = func(batch *pgx.Batch) {
			before.queue(batch)
			w.queue(batch)
		}
	}
	if err := s.group.commit(ctx, u); err != nil {
		return err
	}
	var notes []note
	var notices []notify.Delivery
	if before != nil {
		notes, notices = before.finish(nil, nil)
	}
	notes, notices = w.finish(notes, notices)
	s.announce(ctx, notes...)
	s.outboxWritten(ctx, notices)
	return nil
}

// prepareCommit turns c into the statements of its commit (w.queue) and
// what is done once they are committed (w.finish).
func (s *Store) prepareCommit(ctx context.Context, c *graph.Commit) (*commitWork, error) {
	id, ok := parseID(c.TaskID)
	if !ok {
		return nil, graph.ErrTaskNotFound
	}
	n := len(c.Events)
	if n == 0 {
		// The fence check rides on the first event's seq (TaskCommit).
		return nil, fmt.Errorf("commit task %s: a commit needs at least one event", c.TaskID)
	}
	p := dbsqlc.TaskCommitParams{ID: id, Fence: c.Fence, Status: string(c.Status),
		CurrentNode: c.CurrentNode, Result: c.Result, Error: c.Error, Events: eventsJSON(c.Events),
		Touch: !c.Quiet, FirstCommit: c.Create != nil}
	var blobs *dbsqlc.StateBlobsPutParams
	var allBlobs []blob
	if cp := c.Checkpoint; cp != nil {
		p.SaveCheckpoint, p.Reason = true, c.Reason
		p.LastNodeID, p.CpUpdatedAt = cp.LastNode, cp.UpdatedAt
		p.Step, p.NextNodeID = int32(cp.Step), cp.NextNode
		var put []blob
		var err error
		if p.State, p.StateRefs, put, allBlobs, err = s.prepareState(c.TaskID, c.Fence, cp.State, cp.Fields); err != nil {
			return nil, err
		}
		if len(put) > 0 {
			blobs = &dbsqlc.StateBlobsPutParams{TaskID: id, Hashes: make([][]byte, len(put)), BlobValues: make([]string, len(put))}
			for i, b := range put {
				// b.val is never modified: spare a copy of a large value
				blobs.Hashes[i], blobs.BlobValues[i] = b.hash[:], unsafe.String(unsafe.SliceData(b.val), len(b.val))
			}
		}
		p.Iterations = iterationsJSON(cp.Iterations)
		if len(cp.Answers) == 0 {
			p.Answers = emptyArray
		} else if p.Answers, err = json.Marshal(cp.Answers); err != nil {
			return nil, err
		}
		if cp.PendingInterrupt != "" {
			pid, ok := parseID(cp.PendingInterrupt)
			if !ok {
				return nil, fmt.Errorf("commit task %s: bad pending interrupt id %q", c.TaskID, cp.PendingInterrupt)
			}
			p.PendingInterruptID = &pid
		}
	}
	var ap *dbsqlc.ArtifactInsertManyParams
	if n := len(c.Artifacts); n > 0 {
		ap = &dbsqlc.ArtifactInsertManyParams{TaskID: id, Names: make([]string, n), Nodes: make([]string, n),
			Iterations: make([]int32, n), ContentTypes: make([]string, n), Contents: make([]string, n), Ats: make([]time.Time, n)}
		for i, a := range c.Artifacts {
			ap.Names[i], ap.Nodes[i], ap.Iterations[i] = a.Name, a.Node, int32(a.Iteration)
			ap.ContentTypes[i], ap.Contents[i], ap.Ats[i] = a.ContentType, a.Content, a.CreatedAt
		}
	}
	var rq *requestCreation
	if c.With != nil {
		var err error
		if rq, err = newRequestCreation(c); err != nil {
			return nil, err
		}
	}
	var ip *dbsqlc.InterruptInsertParams
	var tp *dbsqlc.TimersInsertParams
	if r := c.Raise; r != nil {
		rid, ok := parseID(r.ID)
		if !ok {
			return nil, fmt.Errorf("commit task %s: bad interrupt id %q", c.TaskID, r.ID)
		}
		payload, err := json.Marshal(r.Payload)
		if err != nil {
			return nil, err
		}
		sha, err := jcs.SHA256Hex(payload)
		if err != nil {
			return nil, fmt.Errorf("commit task %s: payload hash: %w", c.TaskID, err)
		}
		r.PayloadSHA256 = sha
		ip = &dbsqlc.InterruptInsertParams{ID: rid, TaskID: id, Node: r.Node, Kind: r.Kind,
			Iteration: int32(r.Iteration), Payload: payload, CreatedAt: r.CreatedAt, DeadlineAt: r.Deadline,
			PayloadSha256: sha}
		if n := len(r.Timers); n > 0 {
			tp = &dbsqlc.TimersInsertParams{InterruptID: rid, TaskID: id, Whats: make([]string, n), Steps: make([]int32, n),
				DueAts: make([]time.Time, n), Actions: make([]string, n), Offsets: make([]float64, n)}
			for i, t := range r.Timers {
				tp.Whats[i], tp.Steps[i], tp.DueAts[i] = t.What, int32(t.Step), t.DueAt
				tp.Actions[i], tp.Offsets[i] = t.Action, t.Offset.Seconds()
			}
		}
	}

	// The statements of one commit; results are read in queue order, and
	// the callbacks fill in w's seqs and versions. One allocation holds
	// what the callbacks share (each variable they captured was one).
	w := &commitWork{s: s, c: c, p: p, seqs: make([]int64, 0, n), allBlobs: allBlobs}
	oev := commitEvent(c)
	if tp != nil {
		w.due = slices.MinFunc(tp.DueAts, func(a, b time.Time) int { return a.Compare(b) })
	}
	w.settles = blobs == nil && ap == nil && ip == nil && oev == nil && tp == nil && rq == nil
	w.queue = func(b *pgx.Batch) {
		if rq != nil {
			// First: a repeat waits here for the request holding its
			// key, then fails the commit, before it has locked anything.
			rq.insert(ctx, b)
		}
		if t := c.Create; t != nil {
			// The row as the commit leaves it: TaskCommitFirst does not
			// write it again.
			ip := taskInsertParams(id, t)
			ip.Status, ip.CurrentNode = string(c.Status), c.CurrentNode
			queue(b, func(q *dbsqlc.Queries) error { return q.TaskInsert(ctx, ip) })
		}
		if blobs != nil {
			// Before the fenced update, in the same transaction: a lost
			// lease aborts it, blobs included.
			queue(b, func(q *dbsqlc.Queries) error { return q.StateBlobsPut(ctx, *blobs) })
		}
		queue(b, w.taskCommit).Query(w.readSeqs)
		if ap != nil {
			queue(b, func(q *dbsqlc.Queries) error { _, err := q.ArtifactInsertMany(ctx, *ap); return err }).
				Query(func(rows pgx.Rows) error {
					var err error
					w.versions, err = pgx.CollectRows(rows, pgx.RowTo[int32])
					return err
				})
		}
		if ip != nil {
			queue(b, func(q *dbsqlc.Queries) error { return q.InterruptInsert(ctx, *ip) })
			if r := c.Raise.Ruled; r != nil {
				rp := dbsqlc.InterruptDecideByRuleParams{ID: ip.ID, DecidedAt: ip.CreatedAt, Action: r.Action, Feedback: r.Feedback,
					DecidedBy: r.By}
				queue(b, func(q *dbsqlc.Queries) error { return q.InterruptDecideByRule(ctx, rp) })
			}
		}
		if oev != nil {
			// The notifications of a raise or an end: the same
			// transaction, so none is lost and none is sent for a commit
			// that did not happen.
			s.queueOutbox(ctx, b, id, oev, &w.notices)
		}
		if tp != nil {
			queue(b, func(q *dbsqlc.Queries) error { return q.TimersInsert(ctx, *tp) })
		}
		if rq != nil {
			rq.readBack(ctx, b)
		}
	}
	return w, nil
}

// commitWork is one commit prepared: its statements (queue), what their
// result callbacks fill in, and what finish does once they are committed.
type commitWork struct {
	s *Store
	c *graph.Commit
	p dbsqlc.TaskCommitParams
	// lockTask: a quiet commit that must take the task row's share lock
	// all the same (TaskCommit, not TaskCommitQuiet), see Commit.
	lockTask bool
	settles  bool
	queue    func(b *pgx.Batch)
	allBlobs []blob
	due      time.Time // the earliest timer written, if any
	seqs     []int64
	versions []int32
	notices  []notify.Delivery
}

// finish gives the committed c its seqs and artifact versions, keeps the
// blobs it holds, and appends its announcements and deliveries.
func (w *commitWork) finish(notes []note, notices []notify.Delivery) ([]note, []notify.Delivery) {
	s, c := w.s, w.c
	if c.Checkpoint != nil {
		if !c.Status.Terminal() {
			s.blobs.put(c.TaskID, c.Fence, w.allBlobs)
		} else {
			// Ended: its blobs may be pruned, and no run needs them.
			s.blobs.forget(c.TaskID)
		}
	}
	seqs := w.seqs
	for i := range c.Events {
		if i < len(seqs) {
			c.Events[i].Seq = seqs[i]
		}
		c.Events[i].TaskID = c.TaskID
	}
	for i := range c.Artifacts {
		if i < len(w.versions) {
			c.Artifacts[i].Version = int(w.versions[i])
		}
	}
	notes = append(notes, note{task: c.TaskID, first: seqs[0], last: seqs[len(seqs)-1]})
	if !w.due.IsZero() {
		if s.opts.OnTimer != nil {
			s.opts.OnTimer(w.due)
		}
		// Other replicas' keepers may sleep past it.
		notes = append(notes, note{timer: w.due})
	}
	if c.Create != nil || c.Status == graph.StatusQueued {
		// Runnable: created, or raised and decided at once by a rule.
		notes = append(notes, note{task: c.TaskID, at: seqs[len(seqs)-1]})
	}
	return notes, append(notices, w.notices...)
}

// taskCommit queues the commit's TaskCommit, or a lighter statement for
// the usual commits: TaskCommitFirst for a task's first (its row inserted
// as the commit leaves it), TaskCommitQuiet for one with a checkpoint that
// writes neither the task row nor a first checkpoint.
func (w *commitWork) taskCommit(q *dbsqlc.Queries) error {
	p := &w.p
	if p.FirstCommit && p.SaveCheckpoint && w.c.Result == nil && w.c.Error == "" && !w.c.Status.Terminal() {
		_, err := q.TaskCommitFirst(context.Background(), dbsqlc.TaskCommitFirstParams{ID: p.ID, Fence: p.Fence,
			Events: p.Events, State: p.State, StateRefs: p.StateRefs, LastNodeID: p.LastNodeID,
			CpUpdatedAt: p.CpUpdatedAt, Step: p.Step, NextNodeID: p.NextNodeID, Iterations: p.Iterations,
			Answers: p.Answers, PendingInterruptID: p.PendingInterruptID, Reason: p.Reason})
		return err
	}
	if p.Touch || p.FirstCommit || !p.SaveCheckpoint || w.lockTask {
		_, err := q.TaskCommit(context.Background(), *p)
		return err
	}
	_, err := q.TaskCommitQuiet(context.Background(), dbsqlc.TaskCommitQuietParams{ID: p.ID, Fence: p.Fence,
		Events: p.Events, State: p.State, StateRefs: p.StateRefs,
		LastNodeID: p.LastNodeID, CpUpdatedAt: p.CpUpdatedAt, Step: p.Step, NextNodeID: p.NextNodeID,
		Iterations: p.Iterations, Answers: p.Answers, PendingInterruptID: p.PendingInterruptID, Reason: p.Reason})
	return err
}

// readSeqs reads TaskCommit's seqs into w.seqs, overwriting (a batch that
// failed is sent again). A seq in binary, as pgx asks for a bigint, is read
// from its 8 bytes: Scan looked up a plan and allocated for each row.
func (w *commitWork) readSeqs(rows pgx.Rows) error {
	w.seqs = w.seqs[:0]
	raw := false
	for rows.Next() {
		if len(w.seqs) == 0 {
			// Known once a row came: a statement that failed has none.
			fd := rows.FieldDescriptions()
			raw = len(fd) == 1 && fd[0].DataTypeOID == pgtype.Int8OID && fd[0].Format == pgx.BinaryFormatCode
		}
		if v := rows.RawValues(); raw && len(v) == 1 && len(v[0]) == 8 {
			w.seqs = append(w.seqs, int64(binary.BigEndian.Uint64(v[0])))
			continue
		}
		w.seqs = append(w.seqs, 0)
		if err := rows.Scan(&w.seqs[len(w.seqs)-1]); err != nil {
			return err
		}
	}
	return rows.Err()
}

var emptyArray = json.RawMessage(`[]`)

// eventsJSON is TaskCommit's events parameter: one JSON array, written
// without reflection. Event data is JSON already and goes in as it is;
// times with microseconds, truncated as pgx's binary timestamptz does (the
// column holds no more), so that a time reads back as it did before.
func eventsJSON(evs []graph.Event) json.RawMessage {
	size := 2
	for i := range evs {
		size += 160 + len(evs[i].Type) + len(evs[i].Node) + len(evs[i].Phase) + len(evs[i].Data)
	}
	b := make([]byte, 0, size)
	b = append(b, '[')
	for i := range evs {
		e := &evs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = appendJSONString(b, e.Type)
		b = append(b, `,"node":`...)
		b = appendJSONString(b, e.Node)
		b = append(b, `,"iteration":`...)
		b = strconv.AppendInt(b, int64(int32(e.Iteration)), 10)
		b = append(b, `,"phase":`...)
		b = appendJSONString(b, e.Phase)
		if e.DurationMS != nil {
			b = append(b, `,"duration_ms":`...)
			b = strconv.AppendInt(b, *e.DurationMS, 10)
		}
		b = append(b, `,"data":`...)
		if len(e.Data) == 0 {
			b = append(b, "{}"...)
		} else {
			b = append(b, e.Data...)
		}
		b = append(b, `,"at":"`...)
		b = e.At.UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z07:00")
		b = append(b, `"}`...)
	}
	return append(b, ']')
}

// iterationsJSON is json.Marshal of a checkpoint's iteration counters
// (keys sorted, as json.Marshal has them), without its reflection over a
// map: it ran on every commit and was a tenth of a commit's allocations.
func iterationsJSON(m map[string]int) json.RawMessage {
	if len(m) == 0 {
		return emptyRefs
	}
	keys := make([]string, 0, len(m))
	size := 2
	for k := range m {
		keys = append(keys, k)
		size += len(k) + 24
	}
	slices.Sort(keys)
	b := make([]byte, 0, size)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(m[k]), 10)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string: as it is when it needs no
// escaping (node names), else as json.Marshal writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Interrupt implements graph.Checkpointer.
func (s *Store) Interrupt(ctx context.Context, id string) (*graph.Interrupt, error) {
	uid, ok := parseID(id)
	if !ok {
		return nil, graph.ErrInterruptNotFound
	}
	row, err := s.q.InterruptGet(ctx, uid)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, graph.ErrInterruptNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get interrupt %s: %w", id, err)
	}
	return interruptFromRow(row)
}

// Decide implements graph.Checkpointer. The decision, the resolved
// interrupt, the decision.recorded event and the runnable task are one
// transaction, committed before Decide returns.
func (s *Store) Decide(ctx context.Context, d *graph.Decision, ev *graph.Event) error {
	iid, ok := parseID(d.InterruptID)
	if !ok {
		return graph.ErrInterruptNotFound
	}
	tid, ok := parseID(d.TaskID)
	if !ok {
		return graph.ErrInterruptNotFound
	}
	var value json.RawMessage
	if len(d.Value) > 0 {
		value = d.Value
	}
	data := ev.Data
	if len(data) == 0 {
		data = json.RawMessage(`{}`)
	}
	p := dbsqlc.DecisionRecordParams{InterruptID: iid, TaskID: tid, Action: d.Action,
		Feedback: d.Feedback, Value: value, DecidedBy: d.DecidedBy, PayloadSha256: d.PayloadSHA256, Type: ev.Type, Node: ev.Node,
		Iteration: int32(ev.Iteration), Phase: ev.Phase, Data: data, CreatedAt: ev.At}
	if l := d.Lease; l != nil {
		p.LeaseOwner, p.LeaseTtlSeconds = l.Owner, l.TTL.Seconds()
	}
	// The decision and its notifications: one batch, one transaction.
	var row dbsqlc.DecisionRecordRow
	var notices []notify.Delivery
	b := &pgx.Batch{}
	queue(b, func(q *dbsqlc.Queries) error { return q.TxGenericPlans(ctx) })
	queue(b, func(q *dbsqlc.Queries) error { _, err := q.DecisionRecord(ctx, p); return err }).
		QueryRow(func(r pgx.Row) error {
			var err error
			row, err = fromRow(r).DecisionRecord(ctx, p)
			return err
		})
	s.queueOutbox(ctx, b, tid, &outboxEvent{event: notify.EventDecided, interruptID: &iid, mode: "none", ifDecided: true}, &notices)
	// A task leased to a worker here: the worker's load rides in the
	// decision's transaction, after the decision (it reads what the
	// decision wrote), instead of a round trip of its own once the
	// decision is committed. Nothing else writes the task under the lease.
	// The interrupt and the decision come with DecisionRecord's row.
	var runRow dbsqlc.TaskRunStateRow
	var held []blob
	snapped := false
	if d.Lease != nil {
		var have [][]byte
		held, have = s.blobs.held(d.TaskID)
		sp := dbsqlc.TaskRunStateParams{ID: tid, Have: have}
		queue(b, func(q *dbsqlc.Queries) error { _, err := q.TaskRunState(ctx, sp); return err }).
			QueryRow(func(r pgx.Row) error {
				var err error
				if runRow, err = fromRow(r).TaskRunState(ctx, sp); err == nil {
					snapped = true
				}
				// No row: the decision's own error says why.
				if errors.Is(err, pgx.ErrNoRows) {
					err = nil
				}
				return err
			})
	}
	err := s.pool.SendBatch(ctx, b).Close()
	if errors.Is(err, pgx.ErrNoRows) {
		// Nothing written: say why.
		itr, gerr := s.q.InterruptGet(ctx, iid)
		switch {
		case errors.Is(gerr, pgx.ErrNoRows) || gerr == nil && itr.TaskID != tid:
			return graph.ErrInterruptNotFound
		case gerr != nil:
			return fmt.Errorf("decide: %w", gerr)
		}
		ce := &graph.ConflictError{InterruptID: d.InterruptID, Status: itr.Status}
		if itr.Status == graph.InterruptPending {
			switch {
			case itr.ClaimedBy != nil && *itr.ClaimedBy != d.DecidedBy && itr.ClaimExpiresAt != nil && itr.ClaimExpiresAt.After(time.Now()):
				ce.Holder = *itr.ClaimedBy
			case d.PayloadSHA256 != "" && itr.PayloadSha256 != d.PayloadSHA256:
				ce.Reason = fmt.Sprintf("payload_sha256 %s is not the hash of interrupt %s's payload (%s): what you saw is not what is asked; reload it",
					d.PayloadSHA256, d.InterruptID, itr.PayloadSha256)
			}
		}
		return ce
	}
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == codeUniqueViol {
			return &graph.ConflictError{InterruptID: d.InterruptID, Status: graph.InterruptResolved}
		}
		return fmt.Errorf("decide: %w", err)
	}
	did, at, seq := row.ID, row.DecidedAt, row.Seq
	if row.Leased && d.Lease != nil {
		// Leased to a worker of this replica: no one else need look.
		d.Lease.Fence = row.LeaseFence
		if snapped && runRow.LeaseFence == row.LeaseFence && runRow.PendingInterruptID != nil && *runRow.PendingInterruptID == iid {
			// A snapshot that cannot be read is left to the run's own
			// load, which fails the task as it always has.
			if snap, serr := s.snapshot(d.TaskID, held, decidedSnapshot(runRow, &row, d), true); serr == nil {
				d.Lease.Snapshot = snap
			}
		}
		s.announce(ctx, note{task: d.TaskID, first: seq, last: seq})
	} else {
		s.announce(ctx, note{task: d.TaskID, first: seq, last: seq}, note{task: d.TaskID, at: seq})
	}
	d.ID, d.DecidedAt, d.PayloadSHA256 = did.String(), at, row.PayloadSha256
	ev.Seq, ev.TaskID = seq, d.TaskID
	s.outboxWritten(ctx, notices)
	return nil
}

// decidedSnapshot is the TaskSnapshot row of a task whose pending
// interrupt the decision d (row) just resolved: its run state, with the
// interrupt and the decision as DecisionRecord wrote them.
func decidedSnapshot(r dbsqlc.TaskRunStateRow, row *dbsqlc.DecisionRecordRow, d *graph.Decision) dbsqlc.TaskSnapshotRow {
	tid, status := r.ID, graph.InterruptResolved
	return dbsqlc.TaskSnapshotRow{ID: r.ID, Workflow: r.Workflow, Title: r.Title, Input: r.Input, Options: r.Options,
		Status: r.Status, CurrentNode: r.CurrentNode, Result: r.Result, Error: r.Error, CreatedBy: r.CreatedBy,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, CompletedAt: r.CompletedAt, LeaseFence: r.LeaseFence,
		State: r.State, LastNodeID: r.LastNodeID, Step: r.Step, NextNodeID: r.NextNodeID, Iterations: r.Iterations,
		Answers: r.Answers, PendingInterruptID: r.PendingInterruptID, CheckpointUpdatedAt: r.CheckpointUpdatedAt,
		StateRefs: r.StateRefs, BlobKeys: r.BlobKeys, BlobValues: r.BlobValues,
		ITaskID: &tid, INode: &row.INode, IKind: &row.IKind, IIteration: &row.IIteration, IPayload: row.IPayload,
		IStatus: &status, ICreatedAt: &row.ICreatedAt, IResolvedAt: &row.DecidedAt,
		DID: &row.ID, DAction: &d.Action, DFeedback: &d.Feedback, DValue: row.DValue, DDecidedBy: &d.DecidedBy,
		DDecidedAt: &row.DecidedAt}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func interruptFromRow(r dbsqlc.Interrupt) (*graph.Interrupt, error) {
	itr := &graph.Interrupt{ID: r.ID.String(), TaskID: r.TaskID.String(), Node: r.Node, Kind: r.Kind,
		Iteration: int(r.Iteration), Status: r.Status, CreatedAt: r.CreatedAt, ResolvedAt: r.ResolvedAt,
		Deadline: r.DeadlineAt, Overdue: r.Overdue, EscalationLevel: int(r.EscalationLevel), PayloadSHA256: r.PayloadSha256}
	if r.ClaimedBy != nil && r.ClaimExpiresAt != nil && r.ClaimExpiresAt.After(time.Now()) && r.Status == graph.InterruptPending {
		itr.ClaimedBy, itr.ClaimExpiresAt = *r.ClaimedBy, r.ClaimExpiresAt
	}
	if err := json.Unmarshal(r.Payload, &itr.Payload); err != nil {
		return nil, fmt.Errorf("interrupt %s payload: %w", itr.ID, err)
	}
	return itr, nil
}

func decisionFromRow(r dbsqlc.Decision) *graph.Decision {
	return &graph.Decision{ID: r.ID.String(), InterruptID: r.InterruptID.String(), TaskID: r.TaskID.String(),
		Action: r.Action, Feedback: r.Feedback, Value: r.Value, DecidedBy: r.DecidedBy, DecidedAt: r.DecidedAt,
		PayloadSHA256: r.PayloadSha256}
}
