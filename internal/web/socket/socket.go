// Package socket holds the server's websocket conventions, shared by the
// API's event stream and the desk's live pages: one upgrader (its refusals
// answered with the API's error body), the Group of open sockets that
// shutdown closes with a close frame and waits for, the ping, pong and
// write timings, and the close codes. It imports response only; never a
// handler package nor internal/web.
package socket

import (
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// Default timings.
const (
	DefaultPingPeriod = 20 * time.Second
	DefaultPongWait   = 45 * time.Second
	DefaultWriteWait  = 10 * time.Second
	// closeWait is how long a closing socket waits for the client's reply
	// to its close frame.
	closeWait = time.Second
)

// MaxClientMessage bounds what a client may send on a socket (it is read
// and dropped).
const MaxClientMessage = 4096

// SessionEnded is the close code of a socket whose credentials ended
// (1008 policy violation: htmx-ext-ws does not reconnect; the page's script
// goes to the login page).
const SessionEnded = websocket.ClosePolicyViolation

// Group is a server's websockets: it upgrades them, counts the handlers
// running, and on Shut tells each to say goodbye (Closing) and lets Wait
// wait for them.
type Group struct {
	// PingPeriod, PongWait and WriteWait are the sockets' timings; set
	// them before serving (tests shorten them).
	PingPeriod, PongWait, WriteWait time.Duration

	upgrader websocket.Upgrader
	mu       sync.Mutex
	closed   bool
	closing  chan struct{}
	wg       sync.WaitGroup
	n        atomic.Int64
}

// NewGroup returns a Group with the default timings.
func NewGroup() *Group {
	return &Group{PingPeriod: DefaultPingPeriod, PongWait: DefaultPongWait, WriteWait: DefaultWriteWait,
		closing: make(chan struct{}),
		upgrader: websocket.Upgrader{
			HandshakeTimeout: 10 * time.Second,
			// Clients only answer pings and close: a small read buffer
			// does (gorilla keeps it at least a control frame's size). A
			// write buffer is taken from the pool for each message and
			// returned after it, so an idle socket holds none.
			ReadBufferSize:  256,
			WriteBufferSize: 4096,
			WriteBufferPool: &sync.Pool{},
			Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
				code := response.CodeBadRequest
				if status == http.StatusForbidden {
					code = response.CodeForbidden
				}
				b, _ := json.Marshal(response.Body{Error: response.BodyError{Code: code, Message: reason.Error()}})
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_, _ = w.Write(append(b, '\n'))
			},
		}}
}

// Begin registers a websocket handler for Wait to wait for; false once
// shut. A handler that began calls Done when it ends.
func (g *Group) Begin() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n.Add(1)
	g.wg.Add(1)
	return true
}

// Done ends what Begin began.
func (g *Group) Done() {
	g.n.Add(-1)
	g.wg.Done()
}

// Open counts the websocket handlers running now.
func (g *Group) Open() int { return int(g.n.Load()) }

// Shut refuses new sockets and closes Closing: each open one says goodbye.
func (g *Group) Shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.closed = true
		close(g.closing)
	}
}

// Closing is closed by Shut.
func (g *Group) Closing() <-chan struct{} { return g.closing }

// Wait waits for every handler that began.
func (g *Group) Wait() { g.wg.Wait() }

// Upgrade upgrades the request to a websocket; on failure the upgrader
// has answered the client.
func (g *Group) Upgrade(w http.ResponseWriter, r *http.Request) (*websocket.Conn, error) {
	return g.upgrader.Upgrade(w, r, nil)
}

// Read starts the socket's reader: it drops what the client sends
// (bounded by MaxClientMessage), keeps the read deadline moving with each
// pong, and returns when the client leaves, the deadline passes or the
// connection closes; then it calls gone (the socket's cancel) and closes
// the returned channel. The reader is the only goroutine that reads conn;
// close frames and pings are answered inside NextReader.
func (g *Group) Read(conn *websocket.Conn, gone func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer gone()
		conn.SetReadLimit(MaxClientMessage)
		_ = conn.SetReadDeadline(time.Now().Add(g.PongWait))
		conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(g.PongWait)) })
		for {
			// NextReader drops the previous message unread.
			if _, _, err := conn.NextReader(); err != nil {
				return
			}
		}
	}()
	return done
}

// Close says goodbye with a close frame of code and text, and waits a
// moment for the client's reply (readerDone: the socket's reader saw it)
// before the caller closes the connection.
func (g *Group) Close(conn *websocket.Conn, code int, text string, readerDone <-chan struct{}) {
	msg := websocket.FormatCloseMessage(code, text)
	if err := conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(g.WriteWait)); err != nil {
		return
	}
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-readerDone:
	case <-t.C:
	}
}
