package web

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

// pagePresence is one open task page's presence: its row, its view of
// the others, and the renewal of its holder's claim.
type pagePresence struct {
	d      *desk
	task   string
	viewer string
	user   string
	shown  []string
	poke   <-chan struct{}
	unsub  func()
}

func (d *desk) openPresence(ctx context.Context, task, user string) *pagePresence {
	var b [12]byte
	_, _ = rand.Read(b[:])
	p := &pagePresence{d: d, task: task, viewer: hex.EncodeToString(b[:]), user: user}
	p.poke, p.unsub = d.s.presence.subscribe(task)
	if err := d.s.store.PresenceTouch(ctx, task, p.viewer, user); err != nil {
		d.s.log.Warn("presence", "task", task, "error", err)
	}
	return p
}

// beat refreshes the row and the holder's claim.
func (p *pagePresence) beat(ctx context.Context) {
	if err := p.d.s.store.PresenceTouch(ctx, p.task, p.viewer, p.user); err != nil {
		p.d.s.log.Warn("presence", "task", p.task, "error", err)
	}
	if _, err := p.d.s.store.RenewClaims(ctx, p.task, p.user, p.d.s.claimTTL); err != nil {
		p.d.s.log.Warn("renewing claims", "task", p.task, "error", err)
	}
}

// send writes who else is here when it changed (always the first time).
func (p *pagePresence) send(ctx context.Context, conn *websocket.Conn, first bool) error {
	names, err := p.d.s.store.Presence(ctx, p.task)
	if err != nil {
		return nil // presence is a courtesy: a failed look costs nothing
	}
	others := slices.DeleteFunc(names, func(n string) bool { return n == p.user })
	if !first && slices.Equal(others, p.shown) {
		return nil
	}
	p.shown = others
	var buf bytes.Buffer
	if err := views.PresenceView(others, true).Render(ctx, &buf); err != nil {
		return err
	}
	_ = conn.SetWriteDeadline(time.Now().Add(p.d.s.writeWait))
	return conn.WriteMessage(websocket.TextMessage, buf.Bytes())
}

// close deletes the row (the page left) and tells the others.
func (p *pagePresence) close() {
	p.unsub()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.d.s.store.PresenceLeave(ctx, p.task, p.viewer); err != nil {
		p.d.s.log.Warn("presence", "task", p.task, "error", err)
	}
}
