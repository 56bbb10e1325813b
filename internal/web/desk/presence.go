package desk

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gatehousehq/gatehouse/views"
)

// presenceBeat is how often an open task page refreshes its presence row
// (and its holder's claim), and looks again at who else is there: a viewer
// whose replica died is gone within postgres.PresenceStale plus this.
const presenceBeat = 5 * time.Second

// presenceHub tells this replica's open pages that who looks at a task
// changed (a ChannelPresence notification from any replica).
type presenceHub struct {
	mu     sync.Mutex
	byTask map[string]map[chan struct{}]struct{}
	all    map[chan struct{}]struct{}
}

func newPresenceHub() *presenceHub {
	return &presenceHub{byTask: map[string]map[chan struct{}]struct{}{}, all: map[chan struct{}]struct{}{}}
}

// subscribe hears of the changes of task ("": of every task).
func (h *presenceHub) subscribe(task string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if task == "" {
		h.all[ch] = struct{}{}
	} else {
		if h.byTask[task] == nil {
			h.byTask[task] = map[chan struct{}]struct{}{}
		}
		h.byTask[task][ch] = struct{}{}
	}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.all, ch)
		if m := h.byTask[task]; m != nil {
			delete(m, ch)
			if len(m) == 0 {
				delete(h.byTask, task)
			}
		}
	}
}

// changed pokes the subscribers of task and of every task; "" (the
// listener reconnected) pokes everyone.
func (h *presenceHub) changed(task string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	poke := func(ch chan struct{}) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	for ch := range h.all {
		poke(ch)
	}
	if task == "" {
		for _, m := range h.byTask {
			for ch := range m {
				poke(ch)
			}
		}
		return
	}
	for ch := range h.byTask[task] {
		poke(ch)
	}
}

// presences runs one taskPresence per task that has pages open on this
// replica.
type presences struct {
	d  *desk
	mu sync.Mutex
	m  map[string]*taskPresence
}

// taskPresence is this replica's presence on one task. Pages of one task
// share it: one row per user who has the task open here (not one per
// page), one beat that refreshes those rows and their claims, and one look
// at who is there per change, rendered once per user and handed to every
// page of that user. Per-page rows, beats and looks cost O(pages) queries
// every beat and O(pages²) looks while pages open.
type taskPresence struct {
	d     *desk
	task  string
	poke  chan struct{} // a page came or went, or the others changed
	stop  context.CancelFunc
	done  chan struct{}
	pages int // guarded by presences.mu

	mu    sync.Mutex
	users map[string]*userPresence
}

// userPresence is one user's row and pages on the task.
type userPresence struct {
	viewer  string
	touched bool // the row is written
	pages   map[*pagePresence]struct{}
	shown   []string // who else is here, as the pages were last told
}

// pagePresence is one open task page's presence: the fragment its socket
// owes the page.
type pagePresence struct {
	tp    *taskPresence
	user  string
	ready chan struct{} // html waits to be written

	mu   sync.Mutex
	sent bool // the page has had its first fragment
	html []byte
}

// open adds a page of user to task's presence; the first fragment comes
// on the page's ready channel.
func (ps *presences) open(task, user string) *pagePresence {
	ps.mu.Lock()
	tp := ps.m[task]
	if tp == nil {
		ctx, cancel := context.WithCancel(context.Background())
		tp = &taskPresence{d: ps.d, task: task, poke: make(chan struct{}, 1), stop: cancel, done: make(chan struct{}),
			users: map[string]*userPresence{}}
		ps.m[task] = tp
		go tp.run(ctx)
	}
	tp.pages++
	ps.mu.Unlock()

	p := &pagePresence{tp: tp, user: user, ready: make(chan struct{}, 1)}
	tp.mu.Lock()
	u := tp.users[user]
	if u == nil {
		u = &userPresence{viewer: newViewerID(), pages: map[*pagePresence]struct{}{}}
		tp.users[user] = u
	}
	u.pages[p] = struct{}{}
	tp.mu.Unlock()
	tp.wake()
	return p
}

// close removes the page; the last page of the task on this replica stops
// its presence and waits for its rows to be deleted.
func (p *pagePresence) close(ps *presences) {
	tp := p.tp
	tp.mu.Lock()
	if u := tp.users[p.user]; u != nil {
		delete(u.pages, p)
	}
	tp.mu.Unlock()
	ps.mu.Lock()
	tp.pages--
	last := tp.pages == 0
	if last && ps.m[tp.task] == tp {
		delete(ps.m, tp.task)
	}
	ps.mu.Unlock()
	if last {
		tp.stop()
		<-tp.done
		return
	}
	tp.wake()
}

func (tp *taskPresence) wake() {
	select {
	case tp.poke <- struct{}{}:
	default:
	}
}

func newViewerID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// run keeps the task's rows and pages up to date until ctx ends, then
// deletes its rows.
func (tp *taskPresence) run(ctx context.Context) {
	defer close(tp.done)
	changed, unsub := tp.d.s.presence.subscribe(tp.task)
	defer unsub()
	beat := time.NewTicker(presenceBeat)
	defer beat.Stop()
	for {
		renew := false
		select {
		case <-ctx.Done():
			tp.leaveAll()
			return
		case <-tp.poke:
		case <-changed:
		case <-beat.C:
			renew = true
		}
		tp.sync(ctx, renew)
	}
}

// sync writes the rows of users who arrived, deletes those of users who
// left, refreshes every row and claim on a beat, then looks at who is here
// and tells the pages that do not know it yet.
func (tp *taskPresence) sync(ctx context.Context, beat bool) {
	s := tp.d.s
	type row struct {
		user, viewer string
		touch        bool
	}
	var rows, gone []row
	tp.mu.Lock()
	for user, u := range tp.users {
		switch {
		case len(u.pages) == 0:
			delete(tp.users, user)
			if u.touched {
				gone = append(gone, row{user: user, viewer: u.viewer})
			}
		case !u.touched || beat:
			u.touched = true
			rows = append(rows, row{user: user, viewer: u.viewer})
		}
	}
	tp.mu.Unlock()
	for _, r := range gone {
		if err := s.store.PresenceLeave(ctx, tp.task, r.viewer); err != nil && ctx.Err() == nil {
			s.log.Warn("presence", "task", tp.task, "error", err)
		}
	}
	for _, r := range rows {
		if err := s.store.PresenceTouch(ctx, tp.task, r.viewer, r.user); err != nil && ctx.Err() == nil {
			s.log.Warn("presence", "task", tp.task, "error", err)
		}
		if !beat {
			continue
		}
		if _, err := s.store.RenewClaims(ctx, tp.task, r.user, tp.d.s.claimTTL); err != nil && ctx.Err() == nil {
			s.log.Warn("renewing claims", "task", tp.task, "error", err)
		}
	}
	names, err := s.store.Presence(ctx, tp.task)
	if err != nil {
		return // presence is a courtesy: a failed look costs nothing
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for user, u := range tp.users {
		others := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == user })
		changed := u.shown == nil || !slices.Equal(others, u.shown)
		var html []byte
		for p := range u.pages {
			p.mu.Lock()
			if changed || !p.sent {
				if html == nil {
					var buf bytes.Buffer
					if err := views.PresenceView(others, true).Render(ctx, &buf); err != nil {
						p.mu.Unlock()
						return
					}
					html = buf.Bytes()
				}
				p.sent, p.html = true, html
				select {
				case p.ready <- struct{}{}:
				default:
				}
			}
			p.mu.Unlock()
		}
		if others == nil {
			others = []string{}
		}
		u.shown = others
	}
}

// leaveAll deletes the rows of this presence (its last page closed).
func (tp *taskPresence) leaveAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tp.mu.Lock()
	var viewers []string
	for _, u := range tp.users {
		if u.touched {
			viewers = append(viewers, u.viewer)
		}
	}
	tp.users = nil
	tp.mu.Unlock()
	for _, v := range viewers {
		if err := tp.d.s.store.PresenceLeave(ctx, tp.task, v); err != nil {
			tp.d.s.log.Warn("presence", "task", tp.task, "error", err)
		}
	}
}

// write sends the page the fragment it owes, if any.
func (p *pagePresence) write(conn *websocket.Conn, writeWait time.Duration) error {
	p.mu.Lock()
	html := p.html
	p.html = nil
	p.mu.Unlock()
	if html == nil {
		return nil
	}
	_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
	return conn.WriteMessage(websocket.TextMessage, html)
}
