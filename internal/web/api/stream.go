package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/internal/web/socket"
)

// streamBuffer is how many rendered events wait for the socket. When it is
// full, Follow blocks, the hub drops its subscription as slow, and Follow
// catches up from the table once the socket drains: a slow client costs
// memory for this many events, never more.
const streamBuffer = 64

// stream: GET /api/v1/tasks/:id/stream?after=N — a websocket carrying every
// event of the task with seq > N as JSON text messages, replayed from the
// table, then live, in seq order without gaps or repeats.
func (h *Handler) stream(c echo.Context) error {
	id, err := request.PathID(c)
	if err != nil {
		return err
	}
	after, err := request.QueryInt(c, "after", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	if h.hub == nil {
		return &response.Error{Status: http.StatusServiceUnavailable, Code: response.CodeUnavailable, Message: "live events are not available"}
	}
	r := c.Request()
	t, err := h.store.Task(r.Context(), id)
	if err != nil {
		return err
	}
	if err := request.MayRead(request.Principal(c), t); err != nil {
		return err
	}
	if !websocket.IsWebSocketUpgrade(r) {
		return response.BadRequest("", "this endpoint is a websocket: send an upgrade request")
	}
	if !h.sockets.Begin() {
		return &response.Error{Status: http.StatusServiceUnavailable, Code: response.CodeUnavailable, Message: "server is shutting down"}
	}
	defer h.sockets.Done()
	conn, err := h.sockets.Upgrade(c.Response(), r)
	if err != nil {
		// The upgrader has answered the client.
		c.Response().Committed = true
		h.log.Info("websocket upgrade failed", "task", t.ID, "error", err)
		return nil
	}
	// The connection is hijacked: tell the logger what happened to it.
	c.Response().Status, c.Response().Committed = http.StatusSwitchingProtocols, true
	last, reason := h.serveStream(r.Context(), conn, t.ID, after, h.recheck(c))
	h.log.Debug("websocket closed", "task", t.ID, "after", after, "last_seq", last, "reason", reason)
	return nil
}

// serveStream runs one websocket: a reader goroutine (drops input, answers
// pings and close frames, notices the client leaving), a follower
// goroutine (hub.Follow, rendering events into a buffered channel) and this
// goroutine, the only writer. It returns the last seq sent and why it ended.
func (h *Handler) serveStream(parent context.Context, conn *websocket.Conn, taskID string, after int64,
	recheck func(context.Context) error) (int64, string) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()

	readerDone := h.sockets.Read(conn, cancel)

	type message struct {
		seq  int64
		body []byte
	}
	out := make(chan message, streamBuffer)
	type followed struct {
		last int64
		err  error
	}
	followDone := make(chan followed, 1)
	go func(done chan<- followed) {
		last, err := h.hub.Follow(ctx, taskID, after, func(ev graph.Event) error {
			b, err := json.Marshal(EventOf(&ev))
			if err != nil {
				return err
			}
			select {
			case out <- message{ev.Seq, b}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		done <- followed{last, err}
	}(followDone)

	ping := time.NewTicker(h.sockets.PingPeriod)
	defer ping.Stop()
	last := after
	reason := ""
loop:
	for {
		select {
		case m := <-out:
			_ = conn.SetWriteDeadline(time.Now().Add(h.sockets.WriteWait))
			if err := conn.WriteMessage(websocket.TextMessage, m.body); err != nil {
				reason = "write: " + err.Error()
				break loop
			}
			last = m.seq
		case <-ping.C:
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(h.sockets.WriteWait)); err != nil {
				reason = "ping: " + err.Error()
				break loop
			}
			if err := recheck(ctx); errors.Is(err, auth.ErrUnauthenticated) {
				reason = "credentials ended"
				h.sockets.Close(conn, socket.SessionEnded, "credentials ended", readerDone)
				break loop
			}
		case <-h.sockets.Closing():
			reason = "server shutting down"
			h.sockets.Close(conn, websocket.CloseGoingAway, "server shutting down", readerDone)
			break loop
		case f := <-followDone:
			followDone = nil // received
			// Follow ends only when ctx does or the store fails.
			if f.err != nil && !errors.Is(f.err, context.Canceled) {
				h.log.Error("websocket follow failed", "task", taskID, "error", f.err)
				reason = "follow: " + f.err.Error()
				h.sockets.Close(conn, websocket.CloseInternalServerErr, "internal error", readerDone)
			} else {
				reason = "client gone"
			}
			break loop
		case <-ctx.Done():
			reason = "client gone"
			break loop
		}
	}
	cancel()
	_ = conn.Close()
	<-readerDone
	if followDone != nil {
		<-followDone
	}
	return last, reason
}
