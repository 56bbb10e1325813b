package graph

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// Workflow is a compiled graph of any state type, as the engine and the
// runner see it. Only *Graph[S] implements it.
type Workflow interface {
	// Name is the workflow's name, unique among an engine's workflows.
	Name() string
	// Describe reports the graph as data: nodes, edges, gates, schemas.
	Describe() Description
	// Version is the definition version (version.go).
	Version() string
	// Resumable reports whether a task standing at p can go on under this
	// definition. Errors: *NodeGoneError.
	Resumable(p Position) error
	entryNode() string
	patchState(state, patch json.RawMessage) (json.RawMessage, error)
	initial(input json.RawMessage, opts Options, apart bool) (json.RawMessage, []StateField, error)
	checkEdit(state json.RawMessage, node, content string) error
	run(ctx context.Context, e *Engine, snap *Snapshot, fence int64, drain <-chan struct{}) (Outcome, error)
}

var _ Workflow = (*Graph[struct{}])(nil)

// Outcome is where a Run left the task.
type Outcome struct {
	Status TaskStatus // the task's status after the run
	// Interrupt is the interrupt the task waits on (Status waiting).
	Interrupt *Interrupt
	// Error is the failure recorded on the task (Status failed).
	Error string
}

// Engine runs tasks of registered workflows against a Checkpointer. It holds
// no per-task state: any Engine on the same store can continue any task.
type Engine struct {
	cp        Checkpointer
	workflows map[string]Workflow
	names     []string
	sinks     []EventSink
	log       *slog.Logger
	now       func() time.Time
	raiseHook func(task *Task, itr *Interrupt)
	// startDelay: see startCommitDelay.
	startDelay time.Duration
}

// EngineOption configures an Engine.
type EngineOption func(*Engine)

// WithSink publishes committed events to s (in addition to earlier sinks).
func WithSink(s EventSink) EngineOption { return func(e *Engine) { e.sinks = append(e.sinks, s) } }

// WithRaiseHook sets f, called with each interrupt the engine raises
// before it is committed, and the task raising it: it may set the
// interrupt's Deadline and Timers (the approval policy's schedule).
func WithRaiseHook(f func(task *Task, itr *Interrupt)) EngineOption {
	return func(e *Engine) { e.raiseHook = f }
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) EngineOption { return func(e *Engine) { e.log = l } }

// WithStartCommitDelay sets how long a run's first node.started waits for
// its node before it is committed alone (default startCommitDelay; tests).
func WithStartCommitDelay(d time.Duration) EngineOption {
	return func(e *Engine) { e.startDelay = d }
}

// WithClock sets the clock (tests).
func WithClock(now func() time.Time) EngineOption { return func(e *Engine) { e.now = now } }

// NewEngine returns an engine over cp with the given workflows.
func NewEngine(cp Checkpointer, workflows []Workflow, opts ...EngineOption) (*Engine, error) {
	e := &Engine{cp: cp, workflows: map[string]Workflow{}, log: slog.New(slog.DiscardHandler), now: time.Now,
		startDelay: startCommitDelay}
	for _, o := range opts {
		o(e)
	}
	for _, w := range workflows {
		if _, dup := e.workflows[w.Name()]; dup {
			return nil, fmt.Errorf("workflow %q registered twice", w.Name())
		}
		e.workflows[w.Name()] = w
		e.names = append(e.names, w.Name())
	}
	return e, nil
}

// Workflow returns a registered workflow. Errors: *UnknownWorkflowError.
func (e *Engine) Workflow(name string) (Workflow, error) {
	w, ok := e.workflows[name]
	if !ok {
		return nil, &UnknownWorkflowError{Name: name}
	}
	return w, nil
}

// Workflows lists the registered workflows in registration order.
func (e *Engine) Workflows() []Workflow {
	out := make([]Workflow, 0, len(e.names))
	for _, n := range e.names {
		out = append(out, e.workflows[n])
	}
	return out
}

// NewTask is a request to start a task.
type NewTask struct {
	ID        string          // optional; a fresh uuid when empty
	Workflow  string          // the workflow's name
	Title     string          // shown in the desk; "" titles it from the input (DefaultTitle)
	Input     json.RawMessage // a JSON object, read by the workflow's Init
	Options   json.RawMessage // a JSON object: "gates", "deadlines" and the workflow's own keys
	CreatedBy string          // the principal creating it, for the audit trail
	// Via, when set, is the channel the task was created through ("api",
	// "mcp"), carried by task.created as data.via.
	Via string
	// With, when set, is a write of the caller's that the task's first
	// commit carries (Commit.With): in the same transaction, so that both
	// or neither are written.
	With any
}

// Create validates the input and stores a queued task with its first
// checkpoint. A task without a title (empty or white space) is titled
// DefaultTitle. Errors: *UnknownWorkflowError, *ValidationError.
func (e *Engine) Create(ctx context.Context, nt NewTask) (*Task, error) {
	t, _, err := e.create(ctx, nt, nil)
	return t, err
}

// CreateAsking is Create for a task that starts by asking a person: it
// stores the task waiting on q, raised at its entry node in the same
// commit (the raise hook applies, as to every raise), as if the entry
// node's first run had asked q. Once q is answered, the entry node runs
// for the first time and its first NodeRun.Ask returns the answer. An
// approval request (SPEC §16) is such a task: it is in the inbox the
// moment it is created, with no worker involved. Errors: Create's.
func (e *Engine) CreateAsking(ctx context.Context, nt NewTask, q Question) (*Task, *Interrupt, error) {
	return e.create(ctx, nt, &q)
}

func (e *Engine) create(ctx context.Context, nt NewTask, q *Question) (*Task, *Interrupt, error) {
	w, err := e.Workflow(nt.Workflow)
	if err != nil {
		return nil, nil, err
	}
	opts, err := ParseOptions(nt.Options)
	if err != nil {
		return nil, nil, err
	}
	if len(nt.Input) == 0 {
		nt.Input = json.RawMessage(`{}`)
	}
	if strings.TrimSpace(nt.Title) == "" {
		nt.Title = DefaultTitle(nt.Workflow, nt.Input)
	}
	_, apart := e.cp.(FieldCheckpointer)
	state, fields, err := w.initial(nt.Input, opts, apart)
	if err != nil {
		return nil, nil, err
	}
	if nt.ID == "" {
		nt.ID = NewID()
	} else if !ValidID(nt.ID) {
		return nil, nil, &ValidationError{Field: "id", Message: "is not a uuid"}
	}
	now := e.now()
	entry := w.entryNode()
	t := &Task{ID: nt.ID, Workflow: nt.Workflow, Title: nt.Title, Input: nt.Input, Options: opts.Raw,
		Status: StatusQueued, CurrentNode: entry, CreatedBy: nt.CreatedBy, CreatedAt: now, UpdatedAt: now,
		DefinitionVersion: w.Version()}
	c := &Commit{TaskID: t.ID, Create: t, Status: StatusQueued, CurrentNode: entry, Reason: "start",
		Checkpoint: &Checkpoint{TaskID: t.ID, NextNode: entry, State: state, Fields: fields, Iterations: map[string]int{}, UpdatedAt: now},
		Events:     []Event{newEvent(t.ID, EventTaskCreated, "", 0, now, nil, createdData(t, nt.Via))},
		With:       nt.With,
	}
	var itr *Interrupt
	if q != nil {
		itr = e.raiseAtStart(t, c, entry, *q)
	}
	if err := e.commit(ctx, c); err != nil {
		return nil, nil, err
	}
	return t, itr, nil
}

func createdData(t *Task, via string) map[string]any {
	data := map[string]any{"workflow": t.Workflow, "title": t.Title, "created_by": t.CreatedBy, "actor": t.CreatedBy}
	if via != "" {
		data["via"] = via
	}
	return data
}

// raiseAtStart makes c, a task's first commit, leave it waiting on q at
// its entry node.
func (e *Engine) raiseAtStart(t *Task, c *Commit, entry string, q Question) *Interrupt {
	if q.Kind == "" {
		q.Kind = InterruptQuestion
	}
	if len(q.Actions) == 0 {
		q.Actions = []string{ActionRespond}
	}
	title := q.Title
	if title == "" {
		title = "Question from " + entry
	}
	now := c.Checkpoint.UpdatedAt
	itr := &Interrupt{ID: NewID(), TaskID: t.ID, Node: entry, Kind: q.Kind, Iteration: 1, Status: InterruptPending, CreatedAt: now,
		Payload: InterruptPayload{Type: InterruptQuestion, Title: title, Question: q.Text, Artifact: q.Artifact, Actions: q.Actions}}
	c.Checkpoint.PendingInterrupt = itr.ID
	e.raiseInto(t, itr, c)
	t.Status = c.Status
	return itr
}

// Run executes the task from its checkpoint until it waits for a human,
// ends, or ctx is cancelled (then the node run in flight is lost and runs
// again on the next Run). fence is the caller's lease fence.
func (e *Engine) Run(ctx context.Context, taskID string, fence int64) (Outcome, error) {
	return e.RunUntil(ctx, taskID, fence, nil)
}

// ErrDrained is returned by RunUntil when it stopped between two node runs
// because drain was closed. The task stays running; its last node run is
// committed and the next one has not started.
var ErrDrained = errors.New("run drained between nodes")

// RunUntil is Run that also stops, cleanly, between two node runs once
// drain is closed (graceful shutdown: the node run in flight finishes, no
// new one starts).
func (e *Engine) RunUntil(ctx context.Context, taskID string, fence int64, drain <-chan struct{}) (Outcome, error) {
	var snap *Snapshot
	var err error
	if fc, ok := e.cp.(FieldCheckpointer); ok {
		snap, err = fc.LoadRun(ctx, taskID)
	} else {
		snap, err = e.cp.Load(ctx, taskID)
	}
	if err != nil {
		return Outcome{}, err
	}
	return e.RunFrom(ctx, snap, fence, drain)
}

// RunFrom is RunUntil from snap, the task as the caller read it under the
// lease fence (Lease.Snapshot), instead of a load of its own.
func (e *Engine) RunFrom(ctx context.Context, snap *Snapshot, fence int64, drain <-chan struct{}) (Outcome, error) {
	w, err := e.Workflow(snap.Task.Workflow)
	if err != nil {
		return Outcome{}, err
	}
	return w.run(ctx, e, snap, fence, drain)
}

// Fail records a failure that happened outside a node run (stored state
// that cannot be read, a workflow this binary does not know), so the task
// does not come back forever. fence is the caller's lease fence.
func (e *Engine) Fail(ctx context.Context, taskID string, fence int64, cause error) error {
	msg := cause.Error()
	return e.commit(ctx, &Commit{TaskID: taskID, Fence: fence, Status: StatusFailed, Error: msg,
		Events: []Event{newEvent(taskID, EventTaskFailed, "", 0, e.now(), nil, map[string]any{"error": msg})}})
}

// valueText reads a decision value: a JSON string is its text, anything
// else its JSON.
func valueText(v json.RawMessage) string {
	if len(v) == 0 || string(v) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}

func (e *Engine) commit(ctx context.Context, c *Commit) error {
	// A commit is the point of no return of a node run: finish it even when
	// ctx is cancelled right now, so the work done is not thrown away. The
	// fence protects against a writer that lost its lease meanwhile. How
	// long a commit may take is the checkpointer's to bound (PostgreSQL's
	// store: a minute): a timeout context made here for every commit was
	// ~5% of a node run's allocations, plus a timer, and had pgx watch it.
	if ctx.Done() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	if err := e.cp.Commit(ctx, c); err != nil {
		return fmt.Errorf("commit task %s: %w", c.TaskID, err)
	}
	if c.Before != nil {
		e.publish(c.Before.Events)
	}
	e.publish(c.Events)
	return nil
}

func (e *Engine) publish(evs []Event) {
	if len(evs) == 0 {
		return
	}
	for _, s := range e.sinks {
		s.Publish(evs)
	}
}

// execution is one Run of one task.
type execution[S any] struct {
	g     *Graph[S]
	e     *Engine
	task  Task
	cp    Checkpoint
	fence int64
	opts  Options
	drain <-chan struct{}
	codec stateCodec[S]
	// apart: the checkpointer takes large fields apart (FieldCheckpointer).
	apart bool
	// pending is the run's first node.started while its commit waits
	// (deferStart).
	pending *deferredStart
	// touched: when the task's row was last written as running (zero: it
	// may not say running yet), for Commit.Quiet.
	touched time.Time
	// touchedAtStart: touched before the deferred start was sealed as if
	// it wrote the row: when the start is merged into a later commit
	// instead, the row was last written then.
	touchedAtStart time.Time
	// touch brings the row up to a node that runs longer than startDelay
	// after a quiet commit announced it (Toucher).
	touch touchTimer
}

// touchTimer is armTouch's timer. A node's start only records the node
// and when it started; the timer, armed once while nodes run, fires at
// most every startDelay, and touches the row when the node then running
// started startDelay ago or more. A timer armed (or re-armed) for every
// node cost more than its node: each made the runtime wake its network
// poller to sleep less (futex wake-ups, a tenth of a sequential step's Go
// CPU in pprof).
type touchTimer struct {
	mu      sync.Mutex
	idle    sync.Cond // a touch in flight returned
	timer   *time.Timer
	ticking bool // the timer is armed or its function runs
	ctx     context.Context
	node    string
	since   time.Time // when node started; zero: nothing to touch
	sending bool      // a touch in flight
	sent    bool      // node's touch was sent
}

// deferredStart is a start commit waiting for startCommitDelay.
type deferredStart struct {
	c     *Commit
	timer *time.Timer
	done  chan struct{} // closed once the timer's commit returned
	err   error
}

// stop reports whether the commit was stopped before it was sent; if
// not, it waits for the commit to return.
func (d *deferredStart) stop() bool {
	if d.timer.Stop() {
		return true
	}
	<-d.done
	return false
}

// quietFor is how long a running task's row may go unwritten: commits that
// keep it running within this of the last write leave it alone (its
// current node and update time lag by at most this), and the checkpoint
// row carries the commit.
const quietFor = time.Second

// startCommitDelay is how long the commit that only announces a run's
// first node waits for that node to end. A node that ends sooner (most
// do) sends its node.started with its node.completed and checkpoint: one
// commit — a round trip and a transaction with its task row update —
// fewer per run. A slower node's start is committed when the delay is
// over, so live views see it start a few milliseconds late at most.
const startCommitDelay = 5 * time.Millisecond

// initial is the state a task starts from; apart: with its large fields
// apart (for a FieldCheckpointer).
func (g *Graph[S]) initial(input json.RawMessage, opts Options, apart bool) (json.RawMessage, []StateField, error) {
	s, err := g.init(input, opts)
	if err != nil {
		return nil, nil, err
	}
	var b []byte
	var fields []StateField
	if apart {
		c := stateCodec[S]{fields: g.stringFields, share: true}
		b, fields, err = c.encodeApart(s)
	} else {
		b, err = json.Marshal(s)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("workflow %s: marshal initial state: %w", g.name, err)
	}
	return b, fields, nil
}

func (g *Graph[S]) checkEdit(state json.RawMessage, node, content string) error {
	n := g.nodes[node]
	if n == nil || n.gate == nil || n.gate.OnEdit == nil {
		return fmt.Errorf("node %q does not accept edits", node)
	}
	var s S
	if err := json.Unmarshal(state, &s); err != nil {
		return fmt.Errorf("stored state is unreadable: %w", err)
	}
	_, err := n.gate.OnEdit(s, content)
	return err
}

func (g *Graph[S]) run(ctx context.Context, e *Engine, snap *Snapshot, fence int64, drain <-chan struct{}) (Outcome, error) {
	if snap.Task.Status.Terminal() {
		return Outcome{Status: snap.Task.Status, Error: snap.Task.Error}, nil
	}
	x := &execution[S]{g: g, e: e, task: snap.Task, cp: snap.Checkpoint, fence: fence, drain: drain,
		codec: stateCodec[S]{fields: g.stringFields}}
	_, x.apart = e.cp.(FieldCheckpointer)
	x.codec.share = x.apart
	x.cp.Iterations = maps.Clone(x.cp.Iterations)
	if x.cp.Iterations == nil {
		x.cp.Iterations = map[string]int{}
	}
	if snap.Task.Status == StatusRunning {
		// Claimed (or leased by a decision) just now, as running.
		x.touched = e.now()
	}
	var err error
	if x.opts, err = ParseOptions(snap.Task.Options); err != nil {
		return Outcome{}, &StateError{TaskID: x.task.ID, Err: err}
	}
	s, err := x.codec.decodeApart(x.cp.State, x.cp.Fields)
	if err != nil {
		return Outcome{}, &StateError{TaskID: x.task.ID, Err: err}
	}
	if x.cp.NextNode != END && g.nodes[x.cp.NextNode] == nil {
		return Outcome{}, &StateError{TaskID: x.task.ID, Err: fmt.Errorf("checkpoint names unknown node %q: %w", x.cp.NextNode,
			gone(g.Resumable(Position{NextNode: x.cp.NextNode}), &x.task))}
	}
	// A task stored under another definition may wait at a node this one
	// no longer has (or no longer gates): never apply a decision to it.
	if itr := snap.Interrupt; x.cp.PendingInterrupt != "" && itr != nil {
		if err := g.Resumable(Position{InterruptNode: itr.Node, InterruptType: itr.Payload.Type}); err != nil {
			return Outcome{}, &StateError{TaskID: x.task.ID, Err: gone(err, &x.task)}
		}
	}

	// Resume: apply the decision on the pending interrupt, if any, and
	// announce the node that runs next, in one commit.
	c := &Commit{Status: StatusRunning}
	if x.cp.PendingInterrupt != "" {
		itr, d := snap.Interrupt, snap.Decision
		if itr == nil || itr.ID != x.cp.PendingInterrupt {
			return Outcome{}, &StateError{TaskID: x.task.ID, Err: fmt.Errorf("pending interrupt %s is missing", x.cp.PendingInterrupt)}
		}
		if d == nil && itr.Status != InterruptPending {
			// It ended undecided (its deadline failed the task, which
			// is now retried): ask again, afresh — a new interrupt with
			// the same question, its own deadline and timers.
			return x.raise(ctx, c, itr.Node, itr.Kind, itr.Iteration, itr.Payload)
		}
		if d == nil {
			return Outcome{Status: StatusWaiting, Interrupt: itr}, nil
		}
		if s, err = x.apply(s, itr, d, c); err != nil {
			return x.fail(ctx, c, itr.Node, itr.Iteration, err)
		}
	}
	out, err := x.loop(ctx, s, c)
	x.stopTouch()
	if serr := x.settleStart(ctx); serr != nil && err == nil {
		return Outcome{}, serr
	}
	return out, err
}

// apply turns a decision into state and position; the commit c receives
// what it produced. It never runs a node.
func (x *execution[S]) apply(s S, itr *Interrupt, d *Decision, c *Commit) (S, error) {
	n := x.g.nodes[itr.Node]
	x.cp.PendingInterrupt = ""
	c.Reason = "decision"
	if itr.Payload.Type == InterruptQuestion {
		x.cp.Answers = append(x.cp.Answers, Answer{Action: d.Action, Text: answerText(d)})
		x.cp.NextNode = itr.Node
		return s, x.setState(s)
	}
	var err error
	switch d.Action {
	case ActionReject:
		s, err = n.gate.OnReject(s, d.Feedback, itr.Iteration)
		x.cp.NextNode = itr.Node
		if n.gate.RejectTo != "" {
			x.cp.NextNode = n.gate.RejectTo
		}
	case ActionEdit:
		content := valueText(d.Value)
		if n.gate.OnEdit == nil {
			return s, fmt.Errorf("gate %s does not accept edits", itr.Kind)
		}
		if s, err = n.gate.OnEdit(s, content); err == nil {
			art := Artifact{Name: n.gate.Artifact, Node: itr.Node, Iteration: itr.Iteration, Content: content,
				ContentType: "text/plain", CreatedAt: x.e.now()}
			if itr.Payload.Artifact != nil {
				art.ContentType = itr.Payload.Artifact.ContentType
			}
			c.Artifacts = append(c.Artifacts, art)
			c.Events = append(c.Events, newEvent(x.task.ID, EventArtifactCreated, itr.Node, itr.Iteration, x.e.now(), nil,
				map[string]any{"name": art.Name, "content_type": art.ContentType, "edited_by": d.DecidedBy}))
			s, err = x.approved(n, s)
		}
	default:
		s, err = x.approved(n, s)
	}
	if err != nil {
		return s, err
	}
	return s, x.setState(s)
}

func answerText(d *Decision) string {
	if t := valueText(d.Value); t != "" {
		return t
	}
	return d.Feedback
}

// approved moves past an approved gate.
func (x *execution[S]) approved(n *node[S], s S) (S, error) {
	var err error
	if n.gate.OnApprove != nil {
		if s, err = n.gate.OnApprove(s); err != nil {
			return s, err
		}
	}
	next, err := x.g.next(n.name, s)
	if err != nil {
		return s, err
	}
	x.cp.NextNode = next
	return s, nil
}

func (x *execution[S]) setState(s S) error {
	var b []byte
	var fields []StateField
	var err error
	if x.apart {
		b, fields, err = x.codec.encodeApart(s)
	} else {
		b, err = x.codec.encode(s)
	}
	if err != nil {
		return Permanent(fmt.Errorf("marshal state: %w", err))
	}
	x.cp.State, x.cp.Fields = b, fields
	return nil
}

// loop runs nodes until the task waits, ends or ctx is done. c holds what
// the previous step leaves to commit with the start of the next node.
func (x *execution[S]) loop(ctx context.Context, s S, c *Commit) (Outcome, error) {
	for {
		name := x.cp.NextNode
		if name == END {
			c.Events = append(c.Events, x.event(EventTaskCompleted, "", 0, nil, nil))
			res, err := json.Marshal(x.g.result(s))
			if err != nil {
				return x.fail(ctx, c, "", 0, fmt.Errorf("marshal result: %w", err))
			}
			c.Status, c.Result = StatusSucceeded, res
			return Outcome{Status: StatusSucceeded}, x.save(ctx, c)
		}
		if x.drained() || ctx.Err() != nil {
			// Commit what the last node run left (a completed node run is
			// paid for: keep it), without starting the next. A decision
			// not yet applied durably is simply applied again next run.
			if c.Reason == "node" {
				c.Status = StatusRunning
				if err := x.save(ctx, c); err != nil {
					return Outcome{}, err
				}
			}
			if err := ctx.Err(); err != nil {
				return Outcome{Status: StatusRunning}, err
			}
			return Outcome{Status: StatusRunning}, ErrDrained
		}
		n := x.g.nodes[name]
		iteration := x.cp.Iterations[name] + 1
		c.Status = StatusRunning
		c.Events = append(c.Events, x.event(EventNodeStarted, name, iteration, nil, nil))
		// A commit that only announces the node (and applies a recorded
		// decision) is redone identically after a crash.
		c.Redoable = c.Reason == "" || c.Reason == "decision"
		// Deferred only under the fence the snapshot was read with: a
		// writer that lost its lease must learn it before it runs a node,
		// from the snapshot or else from this commit.
		if c.Redoable && c.Raise == nil && len(c.Artifacts) == 0 && x.task.Fence == x.fence {
			x.deferStart(ctx, c)
		} else if err := x.save(ctx, c); err != nil {
			return Outcome{}, err
		} else if c.Quiet {
			x.armTouch(ctx, name)
		}

		start := x.e.now()
		out, run, err := x.runNode(ctx, n, s, iteration)
		dur := x.e.now().Sub(start)
		// Room for what the next commit carries in the usual case (the
		// run's events, node.completed, the next node.started): appends
		// that grew it cost an allocation and a copy of each Event.
		c = &Commit{}
		if run != nil {
			c.Events = make([]Event, 0, len(run.events)+len(run.artifacts)+2)
		}
		switch {
		case ctx.Err() != nil && (err != nil || run.question != nil):
			// Cancelled or shutting down: the run in flight is lost by design
			// and runs again from the last checkpoint.
			return Outcome{Status: StatusRunning}, ctx.Err()
		case run != nil && run.question != nil:
			return x.ask(ctx, c, n, run, iteration)
		case err != nil:
			c.Events = append(c.Events, run.events...)
			return x.fail(ctx, c, name, iteration, err)
		}

		// The node run completed.
		c.Events = append(c.Events, run.events...)
		for _, a := range run.artifacts {
			c.Artifacts = append(c.Artifacts, a)
			c.Events = append(c.Events, x.event(EventArtifactCreated, name, iteration, nil,
				map[string]any{"name": a.Name, "content_type": a.ContentType}))
		}
		c.Events = append(c.Events, x.event(EventNodeCompleted, name, iteration, &dur, nil))
		x.cp.Iterations[name] = iteration
		x.cp.Answers = nil
		x.cp.LastNode = name
		c.Reason = "node"
		s = out
		if err := x.setState(s); err != nil {
			return x.fail(ctx, c, name, iteration, err)
		}
		if n.gate != nil {
			if !x.opts.AutoApprovesGate(n.gate.Option, n.gate.AlwaysAsks) {
				return x.raiseGate(ctx, c, n, run, iteration)
			}
			if s, err = x.approved(n, s); err == nil {
				err = x.setState(s)
			}
		} else {
			x.cp.NextNode, err = x.g.next(name, s)
		}
		if err != nil {
			x.cp.NextNode = name
			return x.fail(ctx, c, name, iteration, err)
		}
	}
}

func (x *execution[S]) raiseGate(ctx context.Context, c *Commit, n *node[S], run *NodeRun, iteration int) (Outcome, error) {
	g := n.gate
	title := g.Title
	if title == "" {
		title = fmt.Sprintf("Approve %s", n.name)
	}
	actions := []string{ActionApprove, ActionReject}
	if g.OnEdit != nil {
		actions = append(actions, ActionEdit)
	}
	p := InterruptPayload{Type: InterruptGate, Title: title, Actions: actions}
	for i := len(run.artifacts) - 1; i >= 0; i-- {
		if a := run.artifacts[i]; a.Name == g.Artifact {
			p.Artifact = &ArtifactRef{Name: a.Name, ContentType: a.ContentType, Content: a.Content}
			break
		}
	}
	x.cp.NextNode = n.name
	return x.raise(ctx, c, n.name, g.Kind, iteration, p)
}

func (x *execution[S]) ask(ctx context.Context, c *Commit, n *node[S], run *NodeRun, iteration int) (Outcome, error) {
	q := run.question
	// The node run did not complete: its state changes are dropped, its
	// events kept, and it runs again from its start once answered.
	c.Events = append(c.Events, run.events...)
	c.Reason = "interrupt"
	x.cp.NextNode = n.name
	title := q.Title
	if title == "" {
		title = "Question from " + n.name
	}
	return x.raise(ctx, c, n.name, q.Kind, iteration, InterruptPayload{Type: InterruptQuestion, Title: title,
		Question: q.Text, Artifact: q.Artifact, Actions: q.Actions})
}

func (x *execution[S]) raise(ctx context.Context, c *Commit, node, kind string, iteration int, p InterruptPayload) (Outcome, error) {
	itr := &Interrupt{ID: NewID(), TaskID: x.task.ID, Node: node, Kind: kind, Iteration: iteration,
		Payload: p, Status: InterruptPending, CreatedAt: x.e.now()}
	x.cp.PendingInterrupt = itr.ID
	if c.Reason == "" {
		c.Reason = "interrupt"
	}
	x.e.raiseInto(&x.task, itr, c)
	if err := x.save(ctx, c); err != nil {
		return Outcome{}, err
	}
	if itr.Ruled != nil {
		// Decided as raised: runnable again, to apply the decision.
		return Outcome{Status: StatusQueued}, nil
	}
	return Outcome{Status: StatusWaiting, Interrupt: itr}, nil
}

// raiseInto makes c raise itr, a new interrupt of task, with the raise
// hook applied: the task waits on it, or, when a rule decided it at once
// (itr.Ruled), is queued with the decision recorded, to go on as after
// any decision.
func (e *Engine) raiseInto(t *Task, itr *Interrupt, c *Commit) {
	if e.raiseHook != nil {
		e.raiseHook(t, itr)
	}
	now, node, iteration := itr.CreatedAt, itr.Node, itr.Iteration
	raised := map[string]any{"interrupt_id": itr.ID, "kind": itr.Kind, "title": itr.Payload.Title}
	if itr.Deadline != nil {
		raised["deadline"] = itr.Deadline.UTC().Format(time.RFC3339Nano)
	}
	c.Raise = itr
	c.Events = append(c.Events, newEvent(t.ID, EventInterruptRaised, node, iteration, now, nil, raised))
	for _, re := range itr.RuleErrors {
		c.Events = append(c.Events, newEvent(t.ID, EventRuleError, node, iteration, now, nil,
			map[string]any{"interrupt_id": itr.ID, "kind": itr.Kind, "rule": re.Rule, "error": re.Error, "actor": "system"}))
	}
	if r := itr.Ruled; r != nil {
		// Nothing waits: no deadline, no reminders.
		itr.Deadline, itr.Timers = nil, nil
		resolved := now
		itr.Status, itr.ResolvedAt = InterruptResolved, &resolved
		c.Status = StatusQueued
		c.Events = append(c.Events, newEvent(t.ID, EventDecisionRecorded, node, iteration, now, nil, map[string]any{
			"interrupt_id": itr.ID, "kind": itr.Kind, "action": r.Action, "feedback": r.Feedback, "decided_by": r.By,
			"actor": r.By, "rule": r.Rule}))
		return
	}
	c.Status = StatusWaiting
	c.Events = append(c.Events, newEvent(t.ID, EventTaskWaiting, node, iteration, now, nil, map[string]any{"interrupt_id": itr.ID}))
}

// fail records a task failure. The checkpoint keeps the last good state
// and names the failed node next, so retry resumes there.
func (x *execution[S]) fail(ctx context.Context, c *Commit, node string, iteration int, err error) (Outcome, error) {
	msg := err.Error()
	if node != "" {
		c.Events = append(c.Events, x.event(EventNodeFailed, node, iteration, nil, map[string]any{"error": msg}))
	}
	c.Events = append(c.Events, x.event(EventTaskFailed, node, iteration, nil, map[string]any{"error": msg}))
	c.Status, c.Error = StatusFailed, msg
	if err := x.save(ctx, c); err != nil {
		return Outcome{}, err
	}
	return Outcome{Status: StatusFailed, Error: msg}, nil
}

// save commits c with the current checkpoint when its reason says the
// checkpoint changed.
func (x *execution[S]) save(ctx context.Context, c *Commit) error {
	mayBeQuiet := true
	if d := x.pending; d != nil {
		x.pending = nil
		switch {
		case !d.stop():
			if d.err != nil {
				return d.err
			}
		case d.c.Checkpoint != nil:
			// Not sent, and a checkpoint of its own (a decision applied):
			// it goes first in this commit's transaction, its history row
			// and events before this one's.
			c.Before = d.c
		default:
			// Not sent: this commit carries the start first, in seq order,
			// and writes the task row unless the row was written lately
			// (the claim or the decision that leased the task).
			c.Events = append(d.c.Events, c.Events...)
			mayBeQuiet = x.fresh(x.touchedAtStart)
		}
	}
	x.settleTouch()
	x.seal(c, mayBeQuiet)
	if b := c.Before; b != nil && (!c.Quiet || x.fresh(x.touchedAtStart)) {
		// The merged start leaves the task row to this commit, which
		// writes it in the same transaction, or to its lease's write.
		b.Quiet = b.Status == StatusRunning && b.Result == nil && b.Error == "" && b.Create == nil
	}
	err := x.e.commit(ctx, c)
	if err != nil {
		for b := c; b != nil; b = b.Before {
			if b.Checkpoint != nil {
				x.cp.Step--
			}
		}
	}
	if err == nil && c.Status.Terminal() {
		x.codec.release()
	}
	return err
}

// seal gives c its task, fence and position, whether it may leave the
// task row alone (Quiet, when mayBeQuiet), and the current checkpoint (as
// the next step) when its reason says the checkpoint changed.
func (x *execution[S]) seal(c *Commit, mayBeQuiet bool) {
	c.TaskID, c.Fence = x.task.ID, x.fence
	c.CurrentNode = x.cp.NextNode
	if c.CurrentNode == END {
		c.CurrentNode = x.cp.LastNode
	}
	now := x.e.now()
	c.Quiet = mayBeQuiet && c.Status == StatusRunning && c.Result == nil && c.Error == "" && c.Create == nil &&
		x.fresh(x.touched)
	if !c.Quiet && c.Status == StatusRunning {
		x.touched = now
	}
	if c.Reason != "" {
		x.cp.Step++
		x.cp.UpdatedAt = now
		cp := x.cp
		cp.Iterations = maps.Clone(x.cp.Iterations)
		c.Checkpoint = &cp
	}
}

// fresh reports whether a task row written as running at t (zero: not
// known to be) may be left alone by a commit now.
func (x *execution[S]) fresh(t time.Time) bool {
	return !t.IsZero() && x.e.now().Sub(t) < quietFor
}

// deferStart commits c, a redoable commit that announces a run's first
// node (with the decision it applied, if any), after startCommitDelay
// unless a save takes it along before: in its events, or as the commit
// written first in the same transaction when c has a checkpoint.
func (x *execution[S]) deferStart(ctx context.Context, c *Commit) {
	// Sent alone, it is sent because its node runs long: the row shows it.
	x.touchedAtStart = x.touched
	x.seal(c, false)
	d := &deferredStart{c: c, done: make(chan struct{})}
	x.pending = d
	d.timer = time.AfterFunc(x.e.startDelay, func() {
		defer close(d.done)
		d.err = x.e.commit(ctx, c)
	})
}

// armTouch has the task row brought up to node if it still runs after
// startDelay (its start was committed quietly).
func (x *execution[S]) armTouch(ctx context.Context, node string) {
	if _, ok := x.e.cp.(Toucher); !ok {
		return
	}
	p := &x.touch
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ctx, p.node, p.since, p.sent = ctx, node, x.e.now(), false
	switch {
	case p.timer == nil:
		p.idle.L = &p.mu
		p.timer = time.AfterFunc(x.e.startDelay, x.touchNow)
	case !p.ticking:
		p.timer.Reset(x.e.startDelay)
	default:
		return // it fires soon enough, and looks again then
	}
	p.ticking = true
}

// touchNow runs on the timer's goroutine.
func (x *execution[S]) touchNow() {
	p := &x.touch
	p.mu.Lock()
	if p.since.IsZero() || p.sent {
		p.ticking = false
		p.mu.Unlock()
		return
	}
	if wait := x.e.startDelay - x.e.now().Sub(p.since); wait > 0 {
		p.timer.Reset(wait)
		p.mu.Unlock()
		return
	}
	p.sending, p.sent = true, true
	ctx, node := p.ctx, p.node
	p.mu.Unlock()
	// The task and the fence are the run's, set before its first node.
	if err := x.e.cp.(Toucher).TouchTask(context.WithoutCancel(ctx), x.task.ID, x.fence, node); err != nil {
		x.e.log.Warn("touch task row", "task", x.task.ID, "node", node, "error", err)
	}
	p.mu.Lock()
	p.sending, p.ticking = false, false
	p.idle.Broadcast()
	p.mu.Unlock()
}

// settleTouch keeps a touch not yet sent from being sent, or waits for one
// sent (it must not land after the commit that follows it).
func (x *execution[S]) settleTouch() {
	p := &x.touch
	p.mu.Lock()
	for p.sending {
		p.idle.Wait()
	}
	sent := p.sent && !p.since.IsZero()
	p.since = time.Time{}
	p.mu.Unlock()
	if sent {
		x.touched = x.e.now()
	}
}

// stopTouch settles the touch and stops its timer: the run is over.
func (x *execution[S]) stopTouch() {
	x.settleTouch()
	p := &x.touch
	p.mu.Lock()
	if p.timer != nil && p.timer.Stop() {
		p.ticking = false
	}
	p.mu.Unlock()
}

// settleStart commits a start still waiting, when the run ends without a
// commit of its own (cancelled in the node): the node did start.
func (x *execution[S]) settleStart(ctx context.Context) error {
	d := x.pending
	if d == nil {
		return nil
	}
	x.pending = nil
	if d.stop() {
		return x.e.commit(ctx, d.c)
	}
	return d.err
}

func (x *execution[S]) drained() bool {
	select {
	case <-x.drain:
		return true
	default:
		return false
	}
}

func (x *execution[S]) event(typ, node string, iteration int, dur *time.Duration, data any) Event {
	return newEvent(x.task.ID, typ, node, iteration, x.e.now(), dur, data)
}

// runNode runs one node with its retry policy and timeout. A nil *NodeRun
// is never returned.
func (x *execution[S]) runNode(ctx context.Context, n *node[S], s S, iteration int) (S, *NodeRun, error) {
	attempts := max(n.cfg.retry.Attempts, 1)
	for attempt := 1; ; attempt++ {
		in := s
		if attempt > 1 {
			// A failed try may have changed shared parts of the state: start
			// again from the last checkpoint's copy.
			fresh, err := x.codec.decodeApart(x.cp.State, x.cp.Fields)
			if err != nil {
				return s, &NodeRun{}, Permanent(err)
			}
			in = fresh
		}
		run := &NodeRun{TaskID: x.task.ID, Workflow: x.task.Workflow, Node: n.name, Iteration: iteration,
			Phase: Phase(n.name, iteration), Attempt: attempt, Input: x.task.Input, Options: x.opts,
			now: x.e.now, answers: x.cp.Answers}
		out, err := x.call(ctx, n, run, in)
		if err == nil || run.question != nil || ctx.Err() != nil {
			return out, run, err
		}
		if attempt >= attempts || !retryable(n.cfg.retry, err) {
			return out, run, err
		}
		wait := backoff(n.cfg.retry, attempt)
		retry := &Commit{Status: StatusRunning, Redoable: true, Events: append(run.events, x.event(EventNodeRetrying, n.name, iteration, nil,
			map[string]any{"error": err.Error(), "attempt": attempt, "next_attempt": attempt + 1, "backoff_ms": wait.Milliseconds()}))}
		if err := x.save(ctx, retry); err != nil {
			return s, run, err
		}
		x.e.log.Warn("node failed, retrying", "task", x.task.ID, "node", n.name, "attempt", attempt, "error", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return s, run, ctx.Err()
		case <-t.C:
		}
	}
}

func (x *execution[S]) call(ctx context.Context, n *node[S], run *NodeRun, s S) (out S, err error) {
	if n.cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.cfg.timeout)
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil {
			err = Permanent(fmt.Errorf("node %s panicked: %v\n%s", n.name, r, debug.Stack()))
		}
	}()
	out, err = n.fn(ctx, run, s)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && n.cfg.timeout > 0 {
		err = fmt.Errorf("node %s timed out after %s: %w", n.name, n.cfg.timeout, err)
	}
	return out, err
}

func retryable(p RetryPolicy, err error) bool {
	if IsPermanent(err) || errors.Is(err, ErrInterrupted) {
		return false
	}
	if p.Transient != nil {
		return p.Transient(err)
	}
	return true
}

func backoff(p RetryPolicy, attempt int) time.Duration {
	d := p.Backoff
	for i := 1; i < attempt && (p.MaxBackoff == 0 || d < p.MaxBackoff); i++ {
		d *= 2
	}
	if p.MaxBackoff > 0 && d > p.MaxBackoff {
		d = p.MaxBackoff
	}
	if p.Jitter > 0 && d > 0 {
		d -= time.Duration(mrand.Float64() * p.Jitter * float64(d))
	}
	return d
}

// NewID returns a random (version 4) uuid in its text form.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

// ValidID reports whether s is a uuid in its text form.
func ValidID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}
