package web

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/graph"
	"github.com/gatehousehq/gatehouse/views"
)

// Live pages: one websocket per page carries HTML fragments that htmx-ext-ws
// swaps in out of band. A task page follows its task's events from the seq
// it rendered (hub.Follow: from the table, then live, no gap), so a page
// that reconnects gets exactly what it missed; the dashboard and the inbox
// re-render their lists when events that change them arrive, at most a few
// times a second.

const (
	// liveOut is how many rendered messages wait for a socket.
	liveOut = 8
	// liveEvents is how many events wait to be rendered for a socket.
	liveEvents = 64
	// liveBatch bounds the events rendered into one message.
	liveBatch = 200
	// listThrottle is the least time between two list updates of a socket,
	// and how long a rendered list is shared between sockets.
	listThrottle = 300 * time.Millisecond
	// closeRestart is the close code that makes htmx-ext-ws reconnect
	// (1012 service restart): sent when this replica shuts down.
	closeRestart = 1012
)

// serveLive upgrades the request and runs one live socket: produce renders
// messages into out until ctx ends; this goroutine is the only writer; a
// reader goroutine drops what the client sends and notices it leaving.
func (d *desk) serveLive(c echo.Context, produce func(ctx context.Context, out chan<- []byte) error) error {
	s := d.s
	r := c.Request()
	if !websocket.IsWebSocketUpgrade(r) {
		return badRequest("", "this endpoint is a websocket")
	}
	if !sameOrigin(r) {
		return &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: "cross-origin websocket refused"}
	}
	if s.hub == nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "live updates are not available"}
	}
	if !s.beginStream() {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "server is shutting down"}
	}
	defer s.streams.Done()
	conn, err := s.upgrader.Upgrade(c.Response(), r, nil)
	if err != nil {
		c.Response().Committed = true
		return nil
	}
	c.Response().Status, c.Response().Committed = http.StatusSwitchingProtocols, true

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer cancel()
		conn.SetReadLimit(maxClientMessage)
		_ = conn.SetReadDeadline(time.Now().Add(s.pongWait))
		conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(s.pongWait)) })
		for {
			if _, _, err := conn.NextReader(); err != nil {
				return
			}
		}
	}()
	out := make(chan []byte, liveOut)
	prodDone := make(chan error, 1)
	go func() { prodDone <- produce(ctx, out) }()

	ping := time.NewTicker(s.pingPeriod)
	defer ping.Stop()
loop:
	for {
		select {
		case msg := <-out:
			_ = conn.SetWriteDeadline(time.Now().Add(s.writeWait))
			if err := conn.WriteMessage(websocket.TextMessage, msg); err != nil {
				break loop
			}
		case <-ping.C:
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(s.writeWait)); err != nil {
				break loop
			}
		case <-s.closing:
			s.closeStream(conn, closeRestart, "server restarting", readerDone)
			break loop
		case err := <-prodDone:
			prodDone = nil
			if err != nil && !errors.Is(err, context.Canceled) {
				d.s.log.Error("live page feed failed", "path", r.URL.Path, "error", err)
				s.closeStream(conn, websocket.CloseInternalServerErr, "internal error", readerDone)
			}
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	cancel()
	_ = conn.Close()
	<-readerDone
	if prodDone != nil {
		<-prodDone
	}
	return nil
}

// --- the task page ---

// taskLive: GET /tasks/:id/live?after=N&ik=K — the task page's feed.
func (d *desk) taskLive(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	after, err := queryInt(c, "after", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	if _, err := d.s.store.Task(c.Request().Context(), id); err != nil {
		return err
	}
	ik := c.QueryParam("ik")
	who := reviewer(c.Request())
	return d.serveLive(c, func(ctx context.Context, out chan<- []byte) error {
		return d.feedTask(ctx, id, after, ik, who, out)
	})
}

// feedTask follows the task's events after seq after and sends, per batch
// of events, their timeline entries and the parts of the page they change.
func (d *desk) feedTask(ctx context.Context, id string, after int64, ik, who string, out chan<- []byte) error {
	evs := make(chan graph.Event, liveEvents)
	followErr := make(chan error, 1)
	go func() {
		_, err := d.s.hub.Follow(ctx, id, after, func(ev graph.Event) error {
			select {
			case evs <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		followErr <- err
	}()
	batch := make([]graph.Event, 0, 16)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			<-followErr
			return ctx.Err()
		case err := <-followErr:
			return err
		case ev := <-evs:
			batch = append(batch, ev)
		}
	drain:
		for len(batch) < liveBatch {
			select {
			case ev := <-evs:
				batch = append(batch, ev)
			default:
				break drain
			}
		}
		snap, err := d.tasks.get(ctx, id, batch[len(batch)-1].Seq)
		if err != nil {
			if ctx.Err() != nil {
				<-followErr
				return ctx.Err()
			}
			return err
		}
		msg, key, err := d.taskMessage(ctx, snap, batch, ik, who)
		if err != nil {
			return err
		}
		ik = key
		select {
		case out <- msg:
		case <-ctx.Done():
			<-followErr
			return ctx.Err()
		}
	}
}

// taskMessage renders one live message: the new timeline entries, the
// head, the graph, and the parts the events touched.
func (d *desk) taskMessage(ctx context.Context, snap *taskSnap, batch []graph.Event, ik, who string) ([]byte, string, error) {
	var buf bytes.Buffer
	buf.WriteString(`<ol id="timeline" hx-swap-oob="beforeend">`)
	var state, decisions, artifacts, inbox bool
	for i := range batch {
		ev := &batch[i]
		b, err := snap.item(ctx, ev)
		if err != nil {
			return nil, "", err
		}
		buf.Write(b)
		if inboxRelevant(*ev) {
			inbox = true
		}
		switch {
		case ev.Type == graph.EventArtifactCreated:
			artifacts = true
		case ev.Type == graph.EventDecisionRecorded:
			decisions, state = true, true
		case ev.Type == graph.EventNodeCompleted || strings.HasPrefix(ev.Type, "task."):
			state = true
		}
	}
	buf.WriteString(`</ol>`)
	buf.Write(snap.head)
	buf.Write(snap.graph)
	if state {
		buf.Write(snap.state)
	}
	if decisions {
		buf.Write(snap.decisions)
	}
	if artifacts {
		buf.Write(snap.artifacts)
	}
	if inbox {
		buf.Write(snap.inbox)
	}
	key := interruptKey(snap.data)
	if key != ik {
		if err := views.InterruptArea(d.interruptView(snap.data, who), true).Render(ctx, &buf); err != nil {
			return nil, "", err
		}
	}
	last := batch[len(batch)-1].Seq
	if err := views.LiveMeta(last, string(snap.data.task.Status), key, true).Render(ctx, &buf); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), key, nil
}

// taskSnap is a task as loaded once for every socket that follows it, with
// the fragments they all send rendered once.
type taskSnap struct {
	data                                     *taskData
	head, graph, state, decisions, artifacts []byte
	inbox                                    []byte // the navigation's pending count

	mu    sync.Mutex
	items map[int64][]byte
}

// item is the rendered timeline entry of an event, shared by the sockets.
func (s *taskSnap) item(ctx context.Context, ev *graph.Event) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.items[ev.Seq]; ok {
		return b, nil
	}
	var buf bytes.Buffer
	if err := views.TimelineItemView(timelineItem(ev)).Render(ctx, &buf); err != nil {
		return nil, err
	}
	if s.items == nil {
		s.items = map[int64][]byte{}
	}
	s.items[ev.Seq] = buf.Bytes()
	return buf.Bytes(), nil
}

// taskCache holds the latest snapshot of the tasks being watched: a socket
// asks for a snapshot at least as new as the event it got; the first asker
// loads it and the others wait for that load (one load per event, not one
// per socket).
type taskCache struct {
	d   *desk
	max int

	mu      sync.Mutex
	entries map[string]*taskEntry
}

type taskEntry struct {
	mu   sync.Mutex // held while loading
	snap *taskSnap
	used time.Time
}

func newTaskCache(d *desk, max int) *taskCache {
	return &taskCache{d: d, max: max, entries: map[string]*taskEntry{}}
}

func (c *taskCache) get(ctx context.Context, id string, minSeq int64) (*taskSnap, error) {
	c.mu.Lock()
	e := c.entries[id]
	if e == nil {
		e = &taskEntry{}
		c.entries[id] = e
		c.evict()
	}
	e.used = time.Now()
	c.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.snap != nil && e.snap.data.lastSeq >= minSeq {
		return e.snap, nil
	}
	snap, err := c.load(ctx, id)
	if err != nil {
		return nil, err
	}
	e.snap = snap
	return snap, nil
}

// evict drops the least recently used entries beyond max; c.mu is held.
func (c *taskCache) evict() {
	if len(c.entries) <= c.max {
		return
	}
	type aged struct {
		id   string
		used time.Time
	}
	all := make([]aged, 0, len(c.entries))
	for id, e := range c.entries {
		all = append(all, aged{id, e.used})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].used.Before(all[j].used) })
	for _, a := range all[:len(all)-c.max] {
		delete(c.entries, a.id)
	}
}

func (c *taskCache) load(ctx context.Context, id string) (*taskSnap, error) {
	d := c.d
	td, err := d.loadTask(ctx, id)
	if err != nil {
		return nil, err
	}
	page := d.buildTaskPage(td, artifactSel{}, "")
	// The live index marks nothing: each page keeps its own selection.
	for i := range page.Artifacts.Names {
		n := &page.Artifacts.Names[i]
		n.Selected = false
		for j := range n.Versions {
			n.Versions[j].Selected = false
		}
	}
	pending, err := d.pendingCount(ctx)
	if err != nil {
		return nil, err
	}
	s := &taskSnap{data: td}
	parts := []struct {
		dst  *[]byte
		comp templ.Component
	}{
		{&s.head, views.TaskHeadView(page.Head, true)},
		{&s.graph, views.GraphView(page.Graph, true)},
		{&s.state, views.StateBody(page.State, true)},
		{&s.decisions, views.DecisionsView(page.Decisions, true)},
		{&s.artifacts, views.ArtifactsIndex(page.Artifacts, true)},
		{&s.inbox, views.InboxBadge(pending, true)},
	}
	for _, p := range parts {
		var buf bytes.Buffer
		if err := p.comp.Render(ctx, &buf); err != nil {
			return nil, err
		}
		*p.dst = buf.Bytes()
	}
	return s, nil
}

// --- the dashboard and the inbox ---

// dashboardLive: GET /live/dashboard?status=&cursor=&v= — the dashboard's
// feed.
func (d *desk) dashboardLive(c echo.Context) error {
	q, err := parseDashQuery(c.QueryParams())
	if err != nil {
		return err
	}
	v := c.QueryParam("v")
	return d.serveLive(c, func(ctx context.Context, out chan<- []byte) error {
		return d.feedList(ctx, v, dashboardRelevant, out, func(ctx context.Context) (listRender, error) {
			return d.lists.get(ctx, q.key(), func(ctx context.Context) (listRender, error) {
				b, err := d.loadDashboard(ctx, q)
				if err != nil {
					return listRender{}, err
				}
				var buf bytes.Buffer
				if err := views.DashboardBodyView(b, true).Render(ctx, &buf); err != nil {
					return listRender{}, err
				}
				if err := views.InboxBadge(b.InboxCount, true).Render(ctx, &buf); err != nil {
					return listRender{}, err
				}
				return listRender{version: b.Version, html: buf.Bytes()}, nil
			})
		})
	})
}

// inboxLive: GET /live/inbox?kind=&after=&v= — the inbox's feed.
func (d *desk) inboxLive(c echo.Context) error {
	q, err := parseInboxQuery(c.QueryParams())
	if err != nil {
		return err
	}
	v := c.QueryParam("v")
	return d.serveLive(c, func(ctx context.Context, out chan<- []byte) error {
		return d.feedList(ctx, v, inboxRelevant, out, func(ctx context.Context) (listRender, error) {
			return d.lists.get(ctx, q.key(), func(ctx context.Context) (listRender, error) {
				b, err := d.loadInbox(ctx, q)
				if err != nil {
					return listRender{}, err
				}
				n, err := d.pendingCount(ctx)
				if err != nil {
					return listRender{}, err
				}
				var buf bytes.Buffer
				if err := views.InboxBodyView(b, true).Render(ctx, &buf); err != nil {
					return listRender{}, err
				}
				if err := views.InboxBadge(n, true).Render(ctx, &buf); err != nil {
					return listRender{}, err
				}
				return listRender{version: b.Version, html: buf.Bytes()}, nil
			})
		})
	})
}

func dashboardRelevant(ev graph.Event) bool {
	switch ev.Type {
	case graph.EventLLMCall, graph.EventArtifactCreated, graph.EventNodeCompleted, graph.EventNodeRetrying:
		return false
	}
	return true
}

func inboxRelevant(ev graph.Event) bool {
	switch ev.Type {
	case graph.EventInterruptRaised, graph.EventDecisionRecorded, graph.EventTaskCancelled, graph.EventTaskFailed,
		graph.EventTaskCompleted:
		return true
	}
	return false
}

// listRender is a rendered list with its version.
type listRender struct {
	version string
	html    []byte
}

// feedList sends the list when it differs from what the page shows (its
// version v), then again after relevant events, at most once per
// listThrottle.
func (d *desk) feedList(ctx context.Context, v string, relevant func(graph.Event) bool, out chan<- []byte,
	load func(context.Context) (listRender, error)) error {
	sub := d.s.hub.SubscribeAll()
	defer func() { sub.Close() }()
	send := func() error {
		r, err := load(ctx)
		if err != nil {
			return err
		}
		if r.version == v {
			return nil
		}
		v = r.version
		select {
		case out <- r.html:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := send(); err != nil {
		return err
	}
	var fire <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-sub.C:
			if !ok {
				// Dropped (slow, or the listener reconnected): events may be
				// missed, so look again.
				sub = d.s.hub.SubscribeAll()
			} else if !relevant(ev) {
				continue
			}
			if fire == nil {
				fire = time.After(listThrottle)
			}
		case <-fire:
			fire = nil
			if err := send(); err != nil {
				return err
			}
		}
	}
}

// listCache shares a rendered list between the sockets that show it, for
// listThrottle.
type listCache struct {
	mu      sync.Mutex
	entries map[string]*listEntry
}

type listEntry struct {
	mu sync.Mutex
	at time.Time
	r  listRender
}

func newListCache() *listCache { return &listCache{entries: map[string]*listEntry{}} }

func (c *listCache) get(ctx context.Context, key string, load func(context.Context) (listRender, error)) (listRender, error) {
	c.mu.Lock()
	e := c.entries[key]
	if e == nil {
		if len(c.entries) > 1024 {
			c.entries = map[string]*listEntry{}
		}
		e = &listEntry{}
		c.entries[key] = e
	}
	c.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.at.IsZero() && time.Since(e.at) < listThrottle {
		return e.r, nil
	}
	r, err := load(ctx)
	if err != nil {
		return listRender{}, err
	}
	e.r, e.at = r, time.Now()
	return r, nil
}
