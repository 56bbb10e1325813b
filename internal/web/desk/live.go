package desk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/internal/web/socket"
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
	// liveBatch bounds the events rendered into one message.
	liveBatch = 200
	// listThrottle is the least time between two list updates of a socket,
	// and how long a rendered list is shared between sockets.
	listThrottle = 300 * time.Millisecond
	// closeRestart is the close code that makes htmx-ext-ws reconnect
	// (1012 service restart): sent when this replica shuts down.
	closeRestart = 1012
)

// liveStart starts a page's feed: it puts messages into out from now on
// (the first ones before it returns, if it has them at hand); done yields
// why the feed stopped; stop releases it.
type liveStart func(ctx context.Context, out chan liveMsg) (done <-chan error, stop func(), err error)

// serveLive upgrades the request and starts one live socket (runLive) in
// a goroutine of its own: the handler returns, so an idle page holds no
// HTTP server connection, request, echo context or the handler's deep
// stack, only what the socket needs.
func (d *desk) serveLive(c echo.Context, last int64, start liveStart, presenceTask string) error {
	s := d.s
	r := c.Request()
	if !websocket.IsWebSocketUpgrade(r) {
		return response.BadRequest("", "this endpoint is a websocket")
	}
	if !request.SameOrigin(r) {
		return &response.Error{Status: http.StatusForbidden, Code: response.CodeForbidden, Message: "cross-origin websocket refused"}
	}
	if s.hub == nil {
		return &response.Error{Status: http.StatusServiceUnavailable, Code: response.CodeUnavailable, Message: "live updates are not available"}
	}
	if !s.sockets.Begin() {
		return &response.Error{Status: http.StatusServiceUnavailable, Code: response.CodeUnavailable, Message: "server is shutting down"}
	}
	conn, err := s.sockets.Upgrade(c.Response(), r)
	if err != nil {
		s.sockets.Done()
		c.Response().Committed = true
		return nil
	}
	c.Response().Status, c.Response().Committed = http.StatusSwitchingProtocols, true
	p := livePage{conn: conn, path: r.URL.Path, last: last, start: start, presenceTask: presenceTask,
		who: userOf(r.Context()).p, av: c.QueryParam("av") == "1", recheck: s.recheck(c),
		// The request's context ends when the handler returns; its values
		// (what templ and the store read) are still wanted.
		ctx: context.WithoutCancel(r.Context())}
	go func() {
		defer s.sockets.Done()
		d.runLive(p)
	}()
	return nil
}

// livePage is what a live socket keeps of its request.
type livePage struct {
	conn         *websocket.Conn
	ctx          context.Context
	path         string
	last         int64
	start        liveStart
	presenceTask string
	who          auth.Principal
	av           bool
	recheck      func(context.Context) error
}

// runLive runs one live socket: this goroutine is the only writer, a
// reader goroutine drops what the client sends and notices it leaving, and
// the feed puts messages into a small buffer.
func (d *desk) runLive(p livePage) {
	s, conn, last := d.s, p.conn, p.last
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	// The decision area this page gets: what its principal may do.
	who := p.who
	whoKey := areaPrincipalKey(who)
	area := func(snap *taskSnap) (string, []byte, error) { return snap.areaFor(ctx, d, whoKey, who) }
	// av=1: the page shows the default artifact view, which follows the task.
	var view func(*taskSnap) ([]byte, error)
	if p.av {
		view = func(snap *taskSnap) ([]byte, error) { return snap.viewHTML(ctx, d) }
	}
	recheck := p.recheck
	readerDone := s.sockets.Read(conn, cancel)
	out := make(chan liveMsg, liveOut)
	done, stop, err := p.start(ctx, out)
	if err != nil {
		d.endLive(conn, p.path, err, readerDone)
		cancel()
		_ = conn.Close()
		<-readerDone
		return
	}
	defer stop()

	// A task page is presence: who has it open, on any replica.
	var (
		pres      *pagePresence
		presReady <-chan struct{}
	)
	if p.presenceTask != "" {
		pres = d.presences.open(p.presenceTask, who.Name)
		defer pres.close(d.presences)
		presReady = pres.ready
	}

	// The first ping comes after a random part of the period: pages that
	// connected together (a replica's restart, a reconnect storm) would
	// otherwise ping, and look up their sessions, together ever after.
	ping := time.NewTimer(rand.N(s.sockets.PingPeriod) + 1)
	defer ping.Stop()
loop:
	for {
		select {
		case <-presReady:
			if err := pres.write(conn, s.sockets.WriteWait); err != nil {
				break loop
			}
		case msg := <-out:
			_ = conn.SetWriteDeadline(time.Now().Add(s.sockets.WriteWait))
			if err := msg.write(conn, &last, area, view); err != nil {
				break loop
			}
		case <-ping.C:
			ping.Reset(s.sockets.PingPeriod)
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(s.sockets.WriteWait)); err != nil {
				break loop
			}
			if err := recheck(ctx); errors.Is(err, auth.ErrUnauthenticated) {
				s.sockets.Close(conn, socket.SessionEnded, "session ended", readerDone)
				break loop
			}
		case <-s.sockets.Closing():
			s.sockets.Close(conn, closeRestart, "server restarting", readerDone)
			break loop
		case err := <-done:
			d.endLive(conn, p.path, err, readerDone)
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	cancel()
	_ = conn.Close()
	<-readerDone
}

// endLive says goodbye to a page whose feed stopped: a dropped page is
// told to reconnect and catch up (htmx-ext-ws retries on 1013).
func (d *desk) endLive(conn *websocket.Conn, path string, err error, readerDone <-chan struct{}) {
	switch {
	case errors.Is(err, errSlowPage):
		d.s.sockets.Close(conn, websocket.CloseTryAgainLater, "catch up", readerDone)
	case err != nil && !errors.Is(err, context.Canceled):
		d.s.log.Error("live page feed failed", "path", path, "error", err)
		d.s.sockets.Close(conn, websocket.CloseInternalServerErr, "internal error", readerDone)
	}
}

// --- the task page ---

// taskLive: GET /tasks/:id/live?after=N&ik=K[&av=1] — the task page's
// feed: the events after seq N, then every new one, with the parts of the
// page they change; the decision area when what it shows differs from K;
// with av=1, the default artifact view when it moves.
func (d *desk) taskLive(c echo.Context) error {
	id, err := request.PathID(c)
	if err != nil {
		return err
	}
	after, err := request.QueryInt(c, "after", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	t, err := d.s.store.Task(c.Request().Context(), id)
	if err != nil {
		return err
	}
	if err := request.MayRead(request.Principal(c), t); err != nil {
		return err
	}
	ik := c.QueryParam("ik")
	return d.serveLive(c, after, func(ctx context.Context, out chan liveMsg) (<-chan error, func(), error) {
		return d.feeds.join(ctx, id, after, ik, out)
	}, id)
}

// liveItem is a rendered timeline entry.
type liveItem struct {
	seq  int64
	html []byte
}

// liveMsg is one websocket message in pieces, shared by every socket that
// sends it: timeline entries (each socket sends those it has not sent), the
// rest as is, and, when area is set, that snapshot's decision area as the
// socket's principal may use it (before the last part, the meta).
type liveMsg struct {
	items []liveItem
	parts [][]byte
	area  *taskSnap
	// view, when set, is the snapshot whose default artifact view moved,
	// for the pages that show it (they said av=1 when they connected);
	// before the meta, too.
	view *taskSnap
	// prep holds the message framed once per variant, for every socket
	// that sends the same bytes (nil: framed per socket).
	prep *prepared
}

// prepared shares the framed variants of one message between sockets: a
// socket that sends a variant already framed writes it with one syscall
// and no copy (a 5,000-page fan-out framed and copied each message 5,000
// times, in 4 KB pieces).
type prepared struct {
	mu sync.Mutex
	m  map[prepKey]*websocket.PreparedMessage
}

// prepKey names what makes one socket's bytes differ from another's: the
// first timeline entry it has not sent, its decision area, the view.
type prepKey struct {
	from int
	area string
	view bool
}

func newLiveMsg() liveMsg { return liveMsg{prep: &prepared{}} }

const timelineOpen, timelineClose = `<ol id="timeline" hx-swap-oob="beforeend">`, `</ol>`

// write sends the message as one text frame, skipping timeline entries up
// to *last; it moves *last on. A message with entries that are all old and
// nothing else is not sent. area renders the decision area for this socket
// (with the key of what it may do); view the default artifact view.
func (m liveMsg) write(conn *websocket.Conn, last *int64, area func(*taskSnap) (string, []byte, error),
	view func(*taskSnap) ([]byte, error)) error {
	from := len(m.items)
	for i, it := range m.items {
		if it.seq > *last {
			from = i
			break
		}
	}
	if from == len(m.items) && len(m.items) > 0 {
		return nil // a replay of what this page has
	}
	key := prepKey{from: from}
	var areaB, viewB []byte
	if m.area != nil && area != nil {
		k, b, err := area(m.area)
		if err != nil {
			return err
		}
		key.area, areaB = k, b
	}
	if m.view != nil && view != nil {
		b, err := view(m.view)
		if err != nil {
			return err
		}
		key.view, viewB = true, b
	}
	if from < len(m.items) {
		*last = m.items[len(m.items)-1].seq
	}
	if m.prep == nil {
		return conn.WriteMessage(websocket.TextMessage, m.bytes(from, areaB, viewB))
	}
	m.prep.mu.Lock()
	pm := m.prep.m[key]
	if pm == nil {
		var err error
		if pm, err = websocket.NewPreparedMessage(websocket.TextMessage, m.bytes(from, areaB, viewB)); err != nil {
			m.prep.mu.Unlock()
			return err
		}
		if m.prep.m == nil {
			m.prep.m = map[prepKey]*websocket.PreparedMessage{}
		}
		m.prep.m[key] = pm
	}
	m.prep.mu.Unlock()
	return conn.WritePreparedMessage(pm)
}

// bytes assembles the message from the timeline entry from on, with the
// area and the view (when not nil) before the meta.
func (m liveMsg) bytes(from int, area, view []byte) []byte {
	n := len(area) + len(view)
	for _, it := range m.items[from:] {
		n += len(it.html)
	}
	for _, p := range m.parts {
		n += len(p)
	}
	b := make([]byte, 0, n+len(timelineOpen)+len(timelineClose))
	if from < len(m.items) {
		b = append(b, timelineOpen...)
		for _, it := range m.items[from:] {
			b = append(b, it.html...)
		}
		b = append(b, timelineClose...)
	}
	for i, p := range m.parts {
		if i == len(m.parts)-1 {
			b = append(b, area...)
			b = append(b, view...)
		}
		b = append(b, p...)
	}
	return b
}

// feeds runs one follower per watched task on this replica: it reads each
// batch of new events once, renders what changes once, and hands the same
// bytes to every page of the task. A page costs a socket, a reader and a
// writer; a page too slow to keep up is disconnected (1013, try again) and
// reconnects from the seq it has.
type feeds struct {
	d  *desk
	mu sync.Mutex
	m  map[string]*taskFeed
}

// taskFeed follows one task for its pages.
type taskFeed struct {
	id     string
	cancel context.CancelFunc

	mu   sync.Mutex
	subs map[*feedSub]struct{}
	last int64  // seq of the last event broadcast
	key  string // interrupt key after that broadcast
	err  error  // set when the follower stopped
}

// feedSub is one page: while it catches up, broadcasts wait in backlog.
type feedSub struct {
	out      chan liveMsg
	catching bool
	backlog  []liveMsg
	gone     chan error // receives why, when the feed drops the page
}

// maxBacklog bounds the broadcasts a catching-up page may owe.
const maxBacklog = 64

// join starts one page's feed: the catch-up from after to the feed's
// position goes into out now, the feed's broadcasts after it. gone yields
// errSlowPage when the feed drops the page; leave ends the page's part.
func (f *feeds) join(ctx context.Context, id string, after int64, ik string, out chan liveMsg) (<-chan error, func(), error) {
	feed, err := f.acquire(id)
	if err != nil {
		return nil, nil, err
	}
	sub := &feedSub{out: out, catching: true, gone: make(chan error, 1)}
	feed.mu.Lock()
	if feed.err != nil {
		err := feed.err
		feed.mu.Unlock()
		f.release(feed)
		return nil, nil, err
	}
	feed.subs[sub] = struct{}{}
	last, key := feed.last, feed.key
	feed.mu.Unlock()
	leave := func() { f.leave(feed, sub) }

	msg, ok, err := f.catchUp(ctx, id, after, last, ik, key)
	if err != nil {
		leave()
		return nil, nil, err
	}
	if ok {
		out <- msg // out is empty and buffered
	}
	feed.mu.Lock()
	sub.catching = false
	for _, m := range sub.backlog {
		select {
		case out <- m:
		default:
			feed.drop(sub)
		}
	}
	sub.backlog = nil
	feed.mu.Unlock()
	return sub.gone, leave, nil
}

// errSlowPage ends a page the feed dropped.
var errSlowPage = errors.New("page dropped: too slow or feed stopped")

// catchUp renders what a page that has seen events up to after misses of
// the feed's position last: the events between, and the current parts.
func (f *feeds) catchUp(ctx context.Context, id string, after, last int64, ik, key string) (liveMsg, bool, error) {
	if after >= last && ik == key {
		return liveMsg{}, false, nil
	}
	snap, err := f.d.tasks.get(ctx, id, last)
	if err != nil {
		return liveMsg{}, false, err
	}
	msg := newLiveMsg()
	var evs []graph.Event
	for from := after; from < last; {
		page, err := f.d.s.store.Events(ctx, id, from, 1000)
		if err != nil {
			return liveMsg{}, false, err
		}
		for _, ev := range page {
			if ev.Seq <= last {
				evs = append(evs, ev)
			}
		}
		if len(page) < 1000 || len(page) == 0 {
			break
		}
		from = page[len(page)-1].Seq
	}
	for i := range evs {
		b, err := snap.item(ctx, &evs[i])
		if err != nil {
			return liveMsg{}, false, err
		}
		msg.items = append(msg.items, liveItem{evs[i].Seq, b})
	}
	parts, view, area, err := f.d.snapParts(ctx, snap, evs, ik, max(after, last))
	if err != nil {
		return liveMsg{}, false, err
	}
	msg.parts = parts
	if area {
		msg.area = snap
	}
	if view {
		msg.view = snap
	}
	return msg, true, nil
}

// acquire returns the task's feed, starting it when none runs.
func (f *feeds) acquire(id string) (*taskFeed, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if feed := f.m[id]; feed != nil {
		return feed, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	// The feed starts from the task as stored now, not from a snapshot
	// cached while an earlier feed ran: the task may have ended since
	// (a deadline, a cancel) with nobody following it, and a stale start
	// would send a page opened after the end the decision it no longer
	// has.
	snap, err := f.d.tasks.get(lctx, id, storedNow)
	lcancel()
	if err != nil {
		cancel()
		return nil, err
	}
	feed := &taskFeed{id: id, cancel: cancel, subs: map[*feedSub]struct{}{}, last: snap.data.lastSeq,
		key: interruptKey(snap.data)}
	f.m[id] = feed
	go f.follow(ctx, feed)
	return feed, nil
}

func (f *feeds) release(feed *taskFeed) {
	f.mu.Lock()
	defer f.mu.Unlock()
	feed.mu.Lock()
	empty := len(feed.subs) == 0
	feed.mu.Unlock()
	if empty && f.m[feed.id] == feed {
		delete(f.m, feed.id)
		feed.cancel()
	}
}

// leave removes a page; the last page stops the feed.
func (f *feeds) leave(feed *taskFeed, sub *feedSub) {
	feed.mu.Lock()
	delete(feed.subs, sub)
	feed.mu.Unlock()
	f.release(feed)
}

// drop disconnects a page; feed.mu is held.
func (feed *taskFeed) drop(sub *feedSub) {
	if _, ok := feed.subs[sub]; !ok {
		return
	}
	delete(feed.subs, sub)
	sub.gone <- errSlowPage // buffered, sent once
}

// follow reads the task's events in batches and broadcasts each batch's
// message until ctx ends or the store fails (then every page is dropped and
// reconnects).
func (f *feeds) follow(ctx context.Context, feed *taskFeed) {
	evs := make(chan graph.Event, liveBatch)
	followErr := make(chan error, 1)
	feed.mu.Lock()
	start := feed.last
	feed.mu.Unlock()
	go func() {
		_, err := f.d.s.hub.Follow(ctx, feed.id, start, func(ev graph.Event) error {
			select {
			case evs <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		followErr <- err
	}()
	fail := func(err error) {
		if ctx.Err() == nil {
			f.d.s.log.Error("live task feed stopped", "task", feed.id, "error", err)
		}
		f.mu.Lock()
		if f.m[feed.id] == feed {
			delete(f.m, feed.id)
		}
		f.mu.Unlock()
		feed.mu.Lock()
		feed.err = errSlowPage
		for sub := range feed.subs {
			feed.drop(sub)
		}
		feed.mu.Unlock()
	}
	batch := make([]graph.Event, 0, 16)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			<-followErr
			fail(ctx.Err())
			return
		case err := <-followErr:
			fail(err)
			return
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
		msg, key, err := f.render(ctx, feed, batch)
		if err != nil {
			if ctx.Err() == nil {
				fail(err)
			}
			cancelAndWait(feed, followErr)
			return
		}
		feed.mu.Lock()
		feed.last, feed.key = batch[len(batch)-1].Seq, key
		for sub := range feed.subs {
			if sub.catching {
				if len(sub.backlog) >= maxBacklog {
					feed.drop(sub)
				} else {
					sub.backlog = append(sub.backlog, msg)
				}
				continue
			}
			select {
			case sub.out <- msg:
			default:
				feed.drop(sub)
			}
		}
		feed.mu.Unlock()
	}
}

func cancelAndWait(feed *taskFeed, followErr <-chan error) {
	feed.cancel()
	<-followErr
}

// render builds the broadcast of a batch.
func (f *feeds) render(ctx context.Context, feed *taskFeed, batch []graph.Event) (liveMsg, string, error) {
	snap, err := f.d.tasks.get(ctx, feed.id, batch[len(batch)-1].Seq)
	if err != nil {
		return liveMsg{}, "", err
	}
	msg := newLiveMsg()
	for i := range batch {
		b, err := snap.item(ctx, &batch[i])
		if err != nil {
			return liveMsg{}, "", err
		}
		msg.items = append(msg.items, liveItem{batch[i].Seq, b})
	}
	feed.mu.Lock()
	ik := feed.key
	feed.mu.Unlock()
	parts, view, area, err := f.d.snapParts(ctx, snap, batch, ik, batch[len(batch)-1].Seq)
	if err != nil {
		return liveMsg{}, "", err
	}
	msg.parts = parts
	if area {
		msg.area = snap
	}
	if view {
		msg.view = snap
	}
	return msg, interruptKey(snap.data), nil
}

// snapParts are the page parts a batch of events changes, from the
// snapshot: head and graph always; state, decisions, artifacts and the
// inbox count when the events touch them; last the meta that the page's
// script reads. area reports that the decision area's key differs from
// ik: each socket then sends the area as its principal may use it.
func (d *desk) snapParts(ctx context.Context, snap *taskSnap, evs []graph.Event, ik string, seq int64) (parts [][]byte, view, area bool, err error) {
	var state, decisions, artifacts, inbox, raised bool
	for i := range evs {
		ev := &evs[i]
		if inboxRelevant(*ev) {
			inbox = true
		}
		switch ev.Type {
		case graph.EventInterruptRaised, graph.EventTaskCompleted, graph.EventTaskFailed, graph.EventTaskCancelled:
			// These move the default artifact view: a document goes above,
			// with the form, or comes back below when the task ends.
			raised = true
		}
		switch {
		case ev.Type == graph.EventArtifactCreated:
			artifacts = true
		case ev.Type == graph.EventDecisionRecorded:
			decisions = true
		case ev.Type == graph.EventNodeCompleted || ev.Type == graph.EventTaskWaiting || ev.Type == graph.EventTaskCompleted ||
			ev.Type == graph.EventTaskFailed || ev.Type == graph.EventTaskCancelled:
			state = true
		}
	}
	if len(evs) == 0 {
		// A page that missed nothing but shows another decision area.
		state, artifacts, inbox, raised = true, true, true, true
	}
	parts = [][]byte{snap.head, snap.graph}
	if state {
		b, err := snap.stateHTML(ctx, d)
		if err != nil {
			return nil, false, false, err
		}
		parts = append(parts, b)
	}
	if decisions {
		b, err := snap.decisionsHTML(ctx, evs)
		if err != nil {
			return nil, false, false, err
		}
		parts = append(parts, b)
	}
	if artifacts {
		parts = append(parts, snap.artifacts)
	}
	if artifacts || raised {
		// The default view moves with new versions, and with an interrupt
		// that puts its document above, with the form. Not with every
		// decision: the view is a whole document; the version a decision
		// leads to brings it along. Only pages that show the default view
		// get it (liveMsg.view).
		view = true
	}
	if inbox {
		parts = append(parts, snap.inbox)
	}
	for i := range evs {
		if evs[i].Type == graph.EventTaskCompleted {
			// A page open at the end shows the deliverable first, as one
			// opened after does.
			var buf bytes.Buffer
			if err := views.DeliverableView(d.deliverable(snap.data), true).Render(ctx, &buf); err != nil {
				return nil, false, false, err
			}
			parts = append(parts, buf.Bytes())
			break
		}
	}
	key := interruptKey(snap.data)
	var meta bytes.Buffer
	if err := views.LiveMeta(seq, string(snap.data.task.Status), key, true).Render(ctx, &meta); err != nil {
		return nil, false, false, err
	}
	return append(parts, meta.Bytes()), view, key != ik, nil
}

// taskSnap is a task as loaded once for every page that follows it, with
// the fragments they all send rendered once (the state and the decision
// area on first use).
type taskSnap struct {
	data                          *taskData
	head, graph, artifacts, inbox []byte

	mu    sync.Mutex
	items map[int64][]byte
	state []byte
	view  []byte            // the default artifact view, for pages that show it
	area  map[string][]byte // by areaCaps.key()
	// byWho is the area of each principal (areaPrincipalKey) that asked, with
	// its caps' key: a fan-out works out caps once per principal, not per
	// socket.
	byWho map[string]whoArea
}

type whoArea struct {
	key  string
	html []byte
}

// areaPrincipalKey names everything of a principal that what it may do
// depends on.
func areaPrincipalKey(p auth.Principal) string {
	return strings.Join([]string{p.Name, string(p.Role), strings.Join(p.Kinds, ","), string(p.Kind), p.ID}, "\x00")
}

// areaFor is the decision area for the principal who (named whoKey) and
// the key of its caps.
func (s *taskSnap) areaFor(ctx context.Context, d *desk, whoKey string, who auth.Principal) (string, []byte, error) {
	s.mu.Lock()
	a, ok := s.byWho[whoKey]
	s.mu.Unlock()
	if ok {
		return a.key, a.html, nil
	}
	caps := d.capsFor(ctx, who, s.data)
	b, err := s.areaHTML(ctx, d, caps)
	if err != nil {
		return "", nil, err
	}
	a = whoArea{caps.key(), b}
	s.mu.Lock()
	if s.byWho == nil {
		s.byWho = map[string]whoArea{}
	}
	s.byWho[whoKey] = a
	s.mu.Unlock()
	return a.key, a.html, nil
}

// item is the rendered timeline entry of an event.
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

// decisionsHTML renders the decisions the events record, to go on top of
// the list.
func (s *taskSnap) decisionsHTML(ctx context.Context, evs []graph.Event) ([]byte, error) {
	recorded := map[string]bool{}
	for _, ev := range evs {
		if ev.Type != graph.EventDecisionRecorded {
			continue
		}
		var data struct {
			InterruptID string `json:"interrupt_id"`
		}
		_ = json.Unmarshal(ev.Data, &data)
		recorded[data.InterruptID] = true
	}
	var rows []views.DecisionRow
	for _, r := range decisionRows(s.data) { // newest first
		if recorded[r.InterruptID] {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := views.DecisionsPrepend(rows).Render(ctx, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// stateHTML is the current state, rendered once.
func (s *taskSnap) stateHTML(ctx context.Context, d *desk) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == nil {
		var buf bytes.Buffer
		if err := views.StateBody(d.stateView(s.data), true).Render(ctx, &buf); err != nil {
			return nil, err
		}
		s.state = buf.Bytes()
	}
	return s.state, nil
}

// viewHTML is the default artifact view as a live fragment, rendered on
// first use: only pages that show it ask (a document rendered for nobody
// was the fan-out's largest cost).
func (s *taskSnap) viewHTML(ctx context.Context, d *desk) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.view == nil {
		v := d.artifactsView(s.data, artifactSel{}).View
		v.OOB = true
		var buf bytes.Buffer
		if err := views.ArtifactDocView(v).Render(ctx, &buf); err != nil {
			return nil, err
		}
		s.view = buf.Bytes()
	}
	return s.view, nil
}

// areaHTML is the decision area for what caps allow, rendered once per
// caps and shared by every page with them; the page's script adds its
// session's CSRF token to the forms.
func (s *taskSnap) areaHTML(ctx context.Context, d *desk, caps areaCaps) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := caps.key()
	if b, ok := s.area[k]; ok {
		return b, nil
	}
	var buf bytes.Buffer
	if err := views.InterruptArea(d.interruptViewCaps(s.data, "", caps, ""), true).Render(ctx, &buf); err != nil {
		return nil, err
	}
	if s.area == nil {
		s.area = map[string][]byte{}
	}
	s.area[k] = buf.Bytes()
	return s.area[k], nil
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

// storedNow asks get for the task as stored now: the cached snapshot
// brought up to date (only the newer events are read).
const storedNow = -1

// get returns a snapshot with events at least up to minSeq (storedNow:
// read now).
func (c *taskCache) get(ctx context.Context, id string, minSeq int64) (*taskSnap, error) {
	e := c.entry(id)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.snap != nil && minSeq != storedNow && e.snap.data.lastSeq >= minSeq {
		return e.snap, nil
	}
	var prev *taskData
	if e.snap != nil {
		prev = e.snap.data
	}
	snap, err := c.load(ctx, id, prev)
	if err != nil {
		return nil, err
	}
	e.snap = snap
	return snap, nil
}

// entry is the task's entry, made when missing, marked used now.
func (c *taskCache) entry(id string) *taskEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[id]
	if e == nil {
		e = &taskEntry{}
		c.entries[id] = e
		c.evict()
	}
	e.used = time.Now()
	return e
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

func (c *taskCache) load(ctx context.Context, id string, prev *taskData) (*taskSnap, error) {
	d := c.d
	td, err := d.loadTaskSince(ctx, id, prev)
	if err != nil {
		return nil, err
	}
	// The live index marks nothing: each page keeps its own selection.
	idx := d.artifactsIndex(td)
	pending, err := d.pendingCount(ctx)
	if err != nil {
		return nil, err
	}
	s := &taskSnap{data: td}
	parts := []struct {
		dst  *[]byte
		comp templ.Component
	}{
		{&s.head, views.TaskHeadView(d.taskHead(td), true)},
		{&s.graph, views.GraphView(d.taskGraph(td), true)},
		{&s.artifacts, views.ArtifactsIndex(idx, true)},
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
	render := func(ctx context.Context) (listRender, error) {
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
	}
	return d.serveLive(c, 0, d.listStart(q.key(), v, dashboardRelevant, render, false), "")
}

// inboxLive: GET /live/inbox?kind=&after=&v= — the inbox's feed.
func (d *desk) inboxLive(c echo.Context) error {
	q, err := parseInboxQuery(c.QueryParams())
	if err != nil {
		return err
	}
	q.Who = request.Principal(c).Name
	v := c.QueryParam("v")
	render := func(ctx context.Context) (listRender, error) {
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
	}
	return d.serveLive(c, 0, d.listStart(q.key(), v, inboxRelevant, render, true), "")
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
		graph.EventTaskCompleted, graph.EventApprovalRecorded,
		postgres.EventInterruptExpired, postgres.EventInterruptOverdue, postgres.EventInterruptEscalated,
		postgres.EventInterruptClaimed, postgres.EventInterruptReleased, postgres.EventInterruptTakenOver:
		return true
	}
	return false
}

// listStart runs feedList for a page in a goroutine of its own.
func (d *desk) listStart(key, v string, relevant func(graph.Event) bool,
	render func(context.Context) (listRender, error), presence bool) liveStart {
	return func(ctx context.Context, out chan liveMsg) (<-chan error, func(), error) {
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			done <- d.feedList(ctx, key, v, relevant, out, render, presence)
		}()
		return done, func() { cancel(); <-finished }, nil
	}
}

// listRender is a rendered list with its version.
type listRender struct {
	version string
	html    []byte
}

// feedList sends the list when it differs from what the page shows (its
// version v), then again after relevant events, at most once per
// listThrottle.
func (d *desk) feedList(ctx context.Context, key, v string, relevant func(graph.Event) bool, out chan liveMsg,
	render func(context.Context) (listRender, error), presence bool) error {
	sub := d.s.hub.SubscribeAll()
	defer func() { sub.Close() }()
	// The inbox shows who looks at each item and how long each has left:
	// it looks again when presence changes, and every minute.
	var presPoke <-chan struct{}
	var minute <-chan time.Time
	if presence {
		var unsub func()
		presPoke, unsub = d.s.presence.subscribe("")
		defer unsub()
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		minute = t.C
	}
	// The first look is fresh (the page may be newer than the shared copy);
	// later ones share a rendering made after the event that asked for it.
	load := render
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
		case out <- liveMsg{parts: [][]byte{r.html}}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := send(); err != nil {
		return err
	}
	load = func(ctx context.Context) (listRender, error) { return d.lists.get(ctx, key, render) }
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
		case <-presPoke:
			if fire == nil {
				fire = time.After(listThrottle)
			}
		case <-minute:
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
