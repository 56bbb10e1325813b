package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/web/api"
)

// dial opens the event stream of a task.
func (b *bundle) dial(t *testing.T, base, taskID string, after int64) *websocket.Conn {
	t.Helper()
	url := strings.Replace(base, "http", "ws", 1) + fmt.Sprintf("/api/v1/tasks/%s/stream?after=%d", taskID, after)
	h := http.Header{"Authorization": {"Bearer " + testToken}}
	conn, res, err := websocket.DefaultDialer.Dial(url, h)
	if err != nil {
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		t.Fatalf("dial %s: %v (status %d)", url, err, status)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// readUntil reads events until one of type typ (included) arrives.
func readUntil(t *testing.T, conn *websocket.Conn, typ string) []api.Event {
	t.Helper()
	var out []api.Event
	for {
		_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		mt, msg, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("read after %d events: %v", len(out), err)
		}
		if mt != websocket.TextMessage {
			t.Fatalf("message type %d", mt)
		}
		var ev api.Event
		if err := json.Unmarshal(msg, &ev); err != nil {
			t.Fatalf("event %s: %v", msg, err)
		}
		out = append(out, ev)
		if ev.Type == typ {
			return out
		}
	}
}

// checkSeqs fails unless evs are seqs from, from+1, … and match the table.
func (b *bundle) checkSeqs(t *testing.T, taskID string, evs []api.Event, from int64) {
	t.Helper()
	stored, err := b.store.Events(context.Background(), taskID, from-1, len(evs))
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(evs) {
		t.Fatalf("got %d events, table has %d from seq %d", len(evs), len(stored), from)
	}
	for i, ev := range evs {
		want := api.EventOf(&stored[i])
		if ev.Seq != from+int64(i) || ev.Seq != want.Seq || ev.Type != want.Type || ev.TaskID != taskID || ev.At != want.At {
			t.Fatalf("event %d = %+v, want %+v", i, ev, want)
		}
	}
}

// TestStream: replay then live, in seq order without gaps; a reconnect with
// after=last gets the missed events first and none twice.
func TestStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.create(t, featureTask(map[string]bool{}))

	conn := b.dial(t, b.base, task.ID, 0)
	// Replayed from the table: task.created.
	first := readUntil(t, conn, graph.EventTaskCreated)
	b.checkSeqs(t, task.ID, first, 1)

	// Live: the run to the first gate.
	if out := b.run(t, task.ID); out.Status != graph.StatusWaiting {
		t.Fatalf("run: %+v", out)
	}
	live := readUntil(t, conn, graph.EventTaskWaiting)
	all := append(first, live...)
	b.checkSeqs(t, task.ID, all, 1)
	last := all[len(all)-1].Seq

	// Disconnect; more happens meanwhile.
	_ = conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
	conn.Close()
	got := b.getTask(t, task.ID)
	b.decide(t, task.ID, map[string]any{"interrupt_id": got.PendingInterrupt.ID, "action": "approve"})
	if out := b.run(t, task.ID); out.Status != graph.StatusWaiting {
		t.Fatalf("run: %+v", out)
	}

	// Reconnect after the last event seen: the missed ones, then live.
	conn = b.dial(t, b.base, task.ID, last)
	missed := readUntil(t, conn, graph.EventTaskWaiting)
	if missed[0].Type != graph.EventDecisionRecorded {
		t.Errorf("first missed event is %s, want %s", missed[0].Type, graph.EventDecisionRecorded)
	}
	b.checkSeqs(t, task.ID, missed, last+1)
	last = missed[len(missed)-1].Seq

	got = b.getTask(t, task.ID)
	b.decide(t, task.ID, map[string]any{"interrupt_id": got.PendingInterrupt.ID, "action": "reject", "feedback": "More phases."})
	more := readUntil(t, conn, graph.EventDecisionRecorded)
	b.checkSeqs(t, task.ID, more, last+1)

	// Nothing further is pending: a read times out rather than repeating.
	_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, msg, err := conn.ReadMessage(); err == nil {
		t.Fatalf("unexpected message %s", msg)
	}
}

// TestStreamShutdown: Shutdown closes open streams with 1001 going away,
// and waits for them.
func TestStreamShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: testToken, noStart: true})
	addr, err := b.srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr.String()
	task := b.create2(t, base)
	conns := []*websocket.Conn{b.dial(t, base, task, 0), b.dial(t, base, task, 0)}
	for _, c := range conns {
		readUntil(t, c, graph.EventTaskCreated)
	}

	// Clients answer the close frame (gorilla's default close handler).
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- b.srv.Shutdown(ctx)
	}()
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _, err := c.ReadMessage()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
			t.Errorf("conn %d: %v, want close 1001", i, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	// No new connections.
	if _, _, err := websocket.DefaultDialer.Dial(strings.Replace(base, "http", "ws", 1)+"/api/v1/tasks/"+task+"/stream", nil); err == nil {
		t.Fatal("dial after shutdown succeeded")
	}
}

// create2 creates a task through the server at base.
func (b *bundle) create2(t *testing.T, base string) string {
	t.Helper()
	old := b.base
	b.base = base
	defer func() { b.base = old }()
	return b.create(t, featureTask(nil)).ID
}

// TestStreamPing: the server pings; a client that answers stays connected.
func TestStreamPing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: testToken, tweak: func(s *Server) {
		s.sockets.PingPeriod = 50 * time.Millisecond
		s.sockets.PongWait = 400 * time.Millisecond
	}})
	task := b.create(t, featureTask(nil))
	conn := b.dial(t, b.base, task.ID, 0)
	pings := make(chan struct{}, 100)
	conn.SetPingHandler(func(data string) error {
		pings <- struct{}{}
		return conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	readUntil(t, conn, graph.EventTaskCreated)
	// Reading processes control frames; keep reading past several pong
	// deadlines.
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	_, _, err := conn.ReadMessage()
	var ne interface{ Timeout() bool }
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read: %v, want our own timeout (server closed the stream?)", err)
	}
	if len(pings) < 5 {
		t.Fatalf("%d pings in a second, want about 20", len(pings))
	}
}
