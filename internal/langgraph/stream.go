package langgraph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// position is where an SSE event stands in a run's stream: the task event
// it comes from and its index among the SSE events made of that one. The
// stream of a run is a pure function of the task's events and checkpoints,
// so a replay after Last-Event-ID makes the same ids and sends each once.
type position struct {
	seq int64
	k   int
}

// The k of events that are not one node's: metadata first, end last.
const (
	kMetadata = 0
	kEnd      = 1000
)

func (p position) String() string { return strconv.FormatInt(p.seq, 10) + "-" + strconv.Itoa(p.k) }

func (p position) after(q position) bool { return p.seq > q.seq || (p.seq == q.seq && p.k > q.k) }

func parsePosition(s string) (position, error) {
	a, b, ok := strings.Cut(s, "-")
	seq, err1 := strconv.ParseInt(a, 10, 64)
	k, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || seq < 0 || k < 0 {
		return position{}, unprocessable("Last-Event-ID: %s is not an event id of this stream", quote(s))
	}
	return position{seq: seq, k: k}, nil
}

// sseEvent is one event of a stream, rendered.
type sseEvent struct {
	pos   position
	event string
	data  []byte
}

// streamBuffer is how many rendered events wait for the client.
const streamBuffer = 64

func clearWriteDeadline(c echo.Context) {
	// The server's write timeout would cut a stream that lasts as long
	// as its run: this response has none.
	_ = http.NewResponseController(c.Response().Writer).SetWriteDeadline(time.Time{})
}

// serveStream answers the run as SSE: metadata first, then the requested
// modes as the task moves, end last, with a heartbeat comment every
// heartbeat period. Events at or before from are not sent again.
func (a *API) serveStream(c echo.Context, run *postgres.LGRun, modes []string, from position, task *graph.Task) error {
	if a.hub == nil {
		return &apiError{Status: http.StatusServiceUnavailable, Detail: "live events are not available"}
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache, no-store")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Location", runLocation(run)+"/stream")
	h.Set("Content-Location", runLocation(run))
	clearWriteDeadline(c)
	c.Response().WriteHeader(http.StatusOK)
	c.Response().Flush()

	ctx, cancel := a.waitCtx(c.Request().Context())
	defer cancel()
	out := make(chan sseEvent, streamBuffer)
	done := make(chan error, 1)
	go func() {
		defer close(out)
		done <- a.produce(ctx, run, modes, from, task, out)
	}()
	beat := time.NewTicker(a.heartbeat)
	defer beat.Stop()
	w := c.Response()
	var buf bytes.Buffer
	for {
		select {
		case ev, ok := <-out:
			if !ok {
				if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
					a.log.Error("langgraph stream failed", "run", run.ID, "thread", run.ThreadID, "error", err)
				}
				return nil
			}
			buf.Reset()
			fmt.Fprintf(&buf, "event: %s\nid: %s\ndata: %s\n\n", ev.event, ev.pos, ev.data)
			if _, err := w.Write(buf.Bytes()); err != nil {
				cancel()
				continue // drain until produce stops
			}
			w.Flush()
		case <-beat.C:
			if _, err := w.Write([]byte(": heartbeat\n\n")); err != nil {
				cancel()
				continue
			}
			w.Flush()
		}
	}
}

// produce renders the run's stream into out; it returns when the run's end
// was sent, or ctx ends.
func (a *API) produce(ctx context.Context, run *postgres.LGRun, modes []string, from position, task *graph.Task,
	out chan<- sseEvent) error {
	emit := func(p position, event string, v any) error {
		if !p.after(from) {
			return nil
		}
		var b []byte
		switch x := v.(type) {
		case json.RawMessage:
			b = compact(x)
		default:
			var err error
			if b, err = json.Marshal(v); err != nil {
				return err
			}
		}
		select {
		case out <- sseEvent{pos: p, event: event, data: b}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	want := func(m string) bool { return slices.Contains(modes, m) }
	if err := emit(position{seq: run.AfterSeq, k: kMetadata}, "metadata",
		map[string]any{"run_id": run.ID, "thread_id": run.ThreadID, "attempt": 1}); err != nil {
		return err
	}
	end := func(seq int64, status string) error {
		if status != "" {
			if err := a.store.LGSettleRun(context.WithoutCancel(ctx), run.ID, status, seq); err != nil {
				return err
			}
		}
		return emit(position{seq: seq, k: kEnd}, "end", json.RawMessage("null"))
	}
	if !run.Active() && run.EndSeq != nil && *run.EndSeq <= run.AfterSeq {
		// A run that ended where it began (an approval of several): the
		// thread waits as it did.
		v, err := a.load(ctx, run.ThreadID)
		if err != nil {
			return err
		}
		if v.pending != nil && v.task.Status == graph.StatusWaiting {
			if err := a.emitWaiting(ctx, emit, want, run.AfterSeq, v.values(), v.task, v.pending); err != nil {
				return err
			}
		}
		return end(run.AfterSeq, "")
	}

	// Each task event becomes a step whose reads start at once, in
	// parallel with the next ones; the steps are emitted in order. A gate's
	// node.completed and task.waiting arrive together: their reads overlap
	// instead of queueing behind each other.
	f := follower{a: a, run: run}
	steps := make(chan *streamStep, streamBuffer)
	emitted := make(chan error, 1)
	go func() { emitted <- f.emitSteps(ctx, steps, emit, want, end, task) }()
	nodes := 0
	_, err := a.hub.Follow(ctx, run.ThreadID, run.AfterSeq, func(ev graph.Event) error {
		st := &streamStep{ev: ev, ready: make(chan struct{})}
		switch ev.Type {
		case graph.EventNodeStarted, graph.EventTaskFailed, graph.EventTaskCompleted, graph.EventTaskCancelled:
			close(st.ready)
		case graph.EventNodeCompleted:
			n := nodes
			nodes++
			go func() {
				defer close(st.ready)
				st.state, st.err = f.nodeState(ctx, n)
			}()
		case graph.EventTaskWaiting:
			var d struct {
				InterruptID string `json:"interrupt_id"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			go func() {
				defer close(st.ready)
				st.itr, st.feedback, st.err = a.store.LGInterruptWithFeedback(ctx, d.InterruptID)
			}()
		default:
			return nil
		}
		select {
		case steps <- st:
		case <-ctx.Done():
			return ctx.Err()
		}
		if endsRun(ev.Type) {
			return errRunEnded
		}
		return nil
	})
	close(steps)
	eerr := <-emitted
	if !errors.Is(err, errRunEnded) {
		return err
	}
	return eerr
}

// streamStep is one task event of a run's stream with what it needs read.
type streamStep struct {
	ev       graph.Event
	ready    chan struct{}
	state    json.RawMessage
	itr      *graph.Interrupt
	feedback string
	err      error
}

// emitSteps emits the steps in order as their reads complete, and the end.
func (f follower) emitSteps(ctx context.Context, steps <-chan *streamStep, emit func(position, string, any) error,
	want func(string) bool, end func(int64, string) error, task *graph.Task) error {
	a, run := f.a, f.run
	// The state before the run's first node, read only when a diff or a
	// stop before any node needs it.
	var prev json.RawMessage
	before := func() (json.RawMessage, error) {
		if prev == nil {
			st, err := f.stateAt(ctx, run.StartStep)
			if err != nil {
				return nil, err
			}
			prev = st
		}
		return prev, nil
	}
	var failed error
	for st := range steps {
		if failed != nil {
			continue // drain
		}
		select {
		case <-st.ready:
		case <-ctx.Done():
			failed = ctx.Err()
			continue
		}
		if st.err != nil {
			failed = st.err
			continue
		}
		ev := st.ev
		var err error
		switch ev.Type {
		case graph.EventNodeStarted:
			if want("events") {
				var in json.RawMessage
				if in, err = before(); err == nil {
					err = emit(position{ev.Seq, 1}, "events", f.chainEvent("on_chain_start", ev, map[string]any{"input": in}))
				}
			}
		case graph.EventNodeCompleted:
			var in, upd json.RawMessage
			if want("updates") || want("events") {
				if in, err = before(); err != nil {
					break
				}
				upd = diff(in, st.state)
			}
			prev = st.state
			if want("updates") {
				if err = emit(position{ev.Seq, 1}, "updates", map[string]json.RawMessage{ev.Node: upd}); err != nil {
					break
				}
			}
			if want("values") {
				if err = emit(position{ev.Seq, 2}, "values", st.state); err != nil {
					break
				}
			}
			if want("events") {
				err = emit(position{ev.Seq, 3}, "events", f.chainEvent("on_chain_end", ev, map[string]any{"output": upd, "input": in}))
			}
		case graph.EventTaskWaiting:
			if task == nil {
				if task, err = a.store.Task(ctx, run.ThreadID); err != nil {
					break
				}
			}
			var state json.RawMessage
			if state, err = before(); err != nil {
				break
			}
			iv := []interruptValue{{Value: humanInterruptOf(task, st.itr, st.feedback), ID: st.itr.ID}}
			if err = emitInterrupt(emit, want, ev.Seq, state, iv); err == nil {
				err = end(ev.Seq, "success")
			}
		case graph.EventTaskFailed:
			var d struct {
				Error string `json:"error"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			if err = emit(position{ev.Seq, 1}, "error", map[string]string{"error": "TaskFailed", "message": d.Error}); err == nil {
				err = end(ev.Seq, "error")
			}
		case graph.EventTaskCompleted:
			err = end(ev.Seq, "success")
		case graph.EventTaskCancelled:
			err = end(ev.Seq, "interrupted")
		}
		if err != nil {
			failed = err
		}
	}
	return failed
}

// emitWaiting sends what a run that stops at an interrupt ends with: the
// values with __interrupt__, and the update {"__interrupt__": …}.
func (a *API) emitWaiting(ctx context.Context, emit func(position, string, any) error, want func(string) bool, seq int64,
	state json.RawMessage, task *graph.Task, itr *graph.Interrupt) error {
	fb, err := a.lastFeedback(ctx, task.ID, itr)
	if err != nil {
		return err
	}
	return emitInterrupt(emit, want, seq, state, []interruptValue{{Value: humanInterruptOf(task, itr, fb), ID: itr.ID}})
}

func emitInterrupt(emit func(position, string, any) error, want func(string) bool, seq int64, state json.RawMessage,
	iv []interruptValue) error {
	if want("values") {
		vals := map[string]any{}
		_ = json.Unmarshal(state, &vals)
		if vals == nil {
			vals = map[string]any{}
		}
		vals["__interrupt__"] = iv
		if err := emit(position{seq, 1}, "values", vals); err != nil {
			return err
		}
	}
	if want("updates") {
		return emit(position{seq, 2}, "updates", map[string]any{"__interrupt__": iv})
	}
	return nil
}

// follower reads the checkpoints a run's stream shows.
type follower struct {
	a   *API
	run *postgres.LGRun
}

// stateAt is the state of checkpoint step (the current one when the
// history no longer holds it).
func (f follower) stateAt(ctx context.Context, step int) (json.RawMessage, error) {
	cp, err := f.a.store.CheckpointAt(ctx, f.run.ThreadID, step)
	if err == nil {
		return cp.State, nil
	}
	if !errors.Is(err, postgres.ErrCheckpointNotFound) {
		return nil, err
	}
	cur, err := f.a.store.CurrentCheckpoint(ctx, f.run.ThreadID)
	if err != nil {
		return nil, err
	}
	return cur.State, nil
}

// nodeState is the state after the run's n-th (from 0) node run: the
// n-th checkpoint a node run wrote after the run's start (node.completed is
// committed with it).
func (f follower) nodeState(ctx context.Context, n int) (json.RawMessage, error) {
	_, st, err := f.a.store.LGNodeCheckpointNth(ctx, f.run.ThreadID, f.run.StartStep, n)
	if errors.Is(err, postgres.ErrCheckpointNotFound) {
		// Pruned history: the current state is the best there is.
		return f.stateAt(ctx, -1)
	}
	return st, err
}

// chainEvent is a LangChain stream event of a node run, as LangGraph's
// events mode sends it.
func (f follower) chainEvent(name string, ev graph.Event, data map[string]any) map[string]any {
	id := taskID(f.run.ThreadID, ev.Node, ev.Iteration)
	return map[string]any{"event": name, "name": ev.Node, "run_id": id, "parent_ids": []string{f.run.ID},
		"tags": []string{"graph:step:" + strconv.Itoa(ev.Iteration)},
		"metadata": map[string]any{"langgraph_node": ev.Node, "langgraph_step": ev.Seq, "langgraph_path": []string{"__pregel_pull", ev.Node},
			"langgraph_triggers": []string{"branch:to:" + ev.Node}, "langgraph_checkpoint_ns": ev.Node + ":" + id,
			"thread_id": f.run.ThreadID, "run_id": f.run.ID, "assistant_id": f.run.AssistantID, "iteration": ev.Iteration,
			"phase": ev.Phase},
		"data": data}
}

// diff is the update a node made: the top-level keys of cur whose value
// differs from prev.
func diff(prev, cur json.RawMessage) json.RawMessage {
	var p, c map[string]json.RawMessage
	if json.Unmarshal(cur, &c) != nil {
		return cur
	}
	_ = json.Unmarshal(prev, &p)
	upd := map[string]json.RawMessage{}
	for k, v := range c {
		if old, ok := p[k]; !ok || !bytes.Equal(compact(old), compact(v)) {
			upd[k] = v
		}
	}
	b, _ := json.Marshal(upd)
	return b
}

// compact is b on one line (an SSE data line holds one JSON value).
func compact(b json.RawMessage) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return []byte("null")
	}
	return buf.Bytes()
}
