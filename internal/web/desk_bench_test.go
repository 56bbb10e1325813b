package web

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gatehousehq/gatehouse/internal/graph"
)

// Benchmarks of the desk's targets (issue 4): server render of the
// dashboard over 10,000 tasks and of the inbox over 1,000 pending
// interrupts (p95 ≤ 50 ms), and one event reaching 1,000 open task pages
// (p99 ≤ 100 ms) with the memory an idle page costs.

// seedDesk fills the database fast: 10,000 tasks over every status, the
// first 1,000 waiting on a pending interrupt each.
func seedDesk(b *testing.B, e *deskEnv) {
	b.Helper()
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `
INSERT INTO tasks (id, workflow, title, input, options, status, current_node, created_by, created_at, updated_at)
SELECT gen_random_uuid(), 'feature', 'Seeded task number ' || g, '{"description":"seeded"}', '{"gates":{}}',
       CASE WHEN g <= 1000 THEN 'waiting'
            ELSE (ARRAY['running','queued','succeeded','failed','cancelled','succeeded','succeeded'])[1 + g % 7] END,
       'requirements', 'seed', now() - g * interval '1 second', now() - g * interval '1 second'
FROM generate_series(1, 10000) g`)
	if err != nil {
		b.Fatalf("seed tasks: %v", err)
	}
	_, err = e.pool.Exec(ctx, `
INSERT INTO interrupts (id, task_id, node, kind, iteration, payload, status, created_at)
SELECT gen_random_uuid(), id, 'requirements', (ARRAY['prd','plan','merge'])[1 + (extract(epoch FROM created_at)::bigint % 3)], 1,
       '{"type":"gate","title":"Approve the PRD (spec.yaml)","artifact":{"name":"spec.yaml","content_type":"application/yaml","content":"name: x"},"actions":["approve","reject","edit"]}',
       'pending', created_at
FROM tasks WHERE status = 'waiting'`)
	if err != nil {
		b.Fatalf("seed interrupts: %v", err)
	}
	if _, err := e.pool.Exec(ctx, `ANALYZE`); err != nil {
		b.Fatalf("analyze: %v", err)
	}
}

// benchRender serves path b.N times through the server's handler and
// reports the render time's median and 95th percentile.
func benchRender(b *testing.B, path, want string) {
	e := newDeskEnv(b)
	seedDesk(b, e)
	h := e.srvHandler()
	sess := e.session(defaultUser) // pages need a session: its lookup is part of the cost
	get := func() time.Duration {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.AddCookie(sess.cookie)
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		d := time.Since(start)
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
		}
		if !regexp.MustCompile(want).MatchString(rec.Body.String()) {
			b.Fatalf("GET %s: body does not match %q", path, want)
		}
		return d
	}
	for range 5 { // warm the pool and the plans
		get()
	}
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		times = append(times, get())
	}
	b.StopTimer()
	reportPercentiles(b, times, "p50_ms", 0.50)
	reportPercentiles(b, times, "p95_ms", 0.95)
}

func reportPercentiles(b *testing.B, times []time.Duration, unit string, q float64) {
	if len(times) == 0 {
		return
	}
	s := slices.Clone(times)
	slices.Sort(s)
	i := min(len(s)-1, int(float64(len(s))*q))
	b.ReportMetric(float64(s[i].Microseconds())/1000, unit)
}

// srvHandler is the running server's handler.
func (e *deskEnv) srvHandler() http.Handler {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.srv.Handler()
}

// BenchmarkDeskDashboard: GET / over 10,000 tasks.
func BenchmarkDeskDashboard(b *testing.B) {
	benchRender(b, "/", `data-count="succeeded"`)
}

// BenchmarkDeskInbox: GET /inbox over 1,000 pending interrupts.
func BenchmarkDeskInbox(b *testing.B) {
	benchRender(b, "/inbox", `1000 decisions wait`)
}

// metaSeq finds the seq a live message brings the page to (its last
// element is the live meta).
func metaSeq(msg []byte) (int64, bool) {
	i := bytes.LastIndex(msg, []byte(`id="live-meta"`))
	if i < 0 {
		return 0, false
	}
	rest := msg[i:]
	j := bytes.Index(rest, []byte(`data-after="`))
	if j < 0 {
		return 0, false
	}
	rest = rest[j+len(`data-after="`):]
	k := bytes.IndexByte(rest, '"')
	if k < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(rest[:k]), 10, 64)
	return n, err == nil
}

// BenchmarkDeskLiveFanout opens 1,000 task-page websockets on one task
// waiting at its PRD gate, then, b.N times, records a decision (one event,
// committed, announced by NOTIFY, fanned out by the hub) and measures when
// each page receives it. It reports the delivery's p50 and p99, and the
// memory an idle page costs the process (server and client sides of the
// connection, both in this process) and beyond a bare gorilla connection.
func BenchmarkDeskLiveFanout(b *testing.B) { fanout(b, 1000) }

// BenchmarkDeskLiveFanout5000 is BenchmarkDeskLiveFanout with 5,000 pages
// (issue 13: p99 ≤ 250 ms, ≤ 40 KB per idle page).
func BenchmarkDeskLiveFanout5000(b *testing.B) { fanout(b, 5000) }

func fanout(b *testing.B, conns int) {
	e := newDeskEnv(b)
	ctx := context.Background()
	id := e.createFeature("Fan-out")
	itr := e.waitPending(id, "prd")
	last := func() int64 {
		var n int64
		if err := e.pool.QueryRow(ctx, `SELECT event_seq FROM tasks WHERE id = $1`, id).Scan(&n); err != nil {
			b.Fatalf("event_seq: %v", err)
		}
		return n
	}
	wsURL := "ws://" + e.addr + "/tasks/" + id + "/live"

	bare := bareConnBytes(b, conns)

	var (
		target  atomic.Int64 // the seq being timed
		started atomic.Int64 // unix nanos of the decision
		mu      sync.Mutex
		lat     []time.Duration
		seen    = make([]atomic.Int64, conns)
	)
	before := heapAndStacks()
	clients := make([]*websocket.Conn, 0, conns)
	seq := last()
	dialer := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	sess := e.session(defaultUser)
	hdr := http.Header{"Cookie": {sess.cookie.Name + "=" + sess.cookie.Value}, "Origin": {"http://" + e.addr}}
	for i := range conns {
		c, _, err := dialer.Dial(fmt.Sprintf("%s?after=%d&ik=p:%s", wsURL, seq, itr.ID), hdr)
		if err != nil {
			b.Fatalf("dial %d: %v", i, err)
		}
		clients = append(clients, c)
	}
	var wg sync.WaitGroup
	for i, c := range clients {
		seen[i].Store(seq)
		wg.Go(func() {
			var buf bytes.Buffer // one per page, reused: the client's cost stays small
			for {
				_, r, err := c.NextReader()
				if err != nil {
					return
				}
				buf.Reset()
				if _, err := buf.ReadFrom(r); err != nil {
					return
				}
				now := time.Now()
				n, ok := metaSeq(buf.Bytes())
				if !ok {
					continue
				}
				prev := seen[i].Swap(n)
				if t := target.Load(); t > 0 && prev < t && n >= t {
					mu.Lock()
					lat = append(lat, now.Sub(time.Unix(0, started.Load())))
					mu.Unlock()
				}
			}
		})
	}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
		wg.Wait()
	}()
	time.Sleep(500 * time.Millisecond) // every socket idle
	after := heapAndStacks()
	perConn := float64(after-before) / float64(conns)

	waitAll := func(n int64) {
		deadline := time.Now().Add(30 * time.Second)
		for i := range seen {
			for seen[i].Load() < n {
				if time.Now().After(deadline) {
					b.Fatalf("page %d stuck at seq %d, want %d", i, seen[i].Load(), n)
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		pending := e.waitPending(id, "prd")
		n := last()
		waitAll(n)
		target.Store(n + 1)
		b.StartTimer()
		started.Store(time.Now().UnixNano())
		if _, err := e.engine.Decide(ctx, id, graph.DecisionInput{InterruptID: pending.ID, Action: graph.ActionReject,
			Feedback: "Once more, please.", DecidedBy: "bench"}); err != nil {
			b.Fatalf("decide: %v", err)
		}
		waitAll(n + 1)
		b.StopTimer()
		e.run.Wake() // the runner re-runs requirements to the next gate
		b.StartTimer()
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	reportPercentiles(b, lat, "p50_ms", 0.50)
	reportPercentiles(b, lat, "p99_ms", 0.99)
	b.ReportMetric(perConn, "B/conn")
	b.ReportMetric(perConn-bare, "B/conn_over_bare")
	b.ReportMetric(float64(len(lat)), "deliveries")
}

// heapAndStacks is the memory in use after a collection.
func heapAndStacks() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}

// bareConnBytes is what n idle gorilla connections (server side with a
// reader goroutine, client side) cost this process, per connection: the
// floor under any websocket page.
func bareConnBytes(b *testing.B, n int) float64 {
	up := websocket.Upgrader{ReadBufferSize: 1024, WriteBufferSize: 4096}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			if _, _, err := c.NextReader(); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	before := heapAndStacks()
	cs := make([]*websocket.Conn, 0, n)
	for range n {
		c, _, err := websocket.DefaultDialer.Dial("ws"+srv.URL[len("http"):], nil)
		if err != nil {
			b.Fatalf("bare dial: %v", err)
		}
		cs = append(cs, c)
	}
	time.Sleep(200 * time.Millisecond)
	per := float64(heapAndStacks()-before) / float64(n)
	for _, c := range cs {
		_ = c.Close()
	}
	return per
}
