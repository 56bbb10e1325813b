package web

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gatehousehq/gatehouse/graph"
)

// Benchmarks of the desk's targets (issue 4): server render of the
// dashboard over 10,000 tasks and of the inbox over 1,000 pending
// interrupts (p95 ≤ 50 ms), and one event reaching 1,000 open task pages
// (p99 ≤ 100 ms) with the memory an idle page costs.

// seedDesk fills the database fast: 10,000 tasks over every status, the
// first 1,000 waiting on a pending interrupt each.
func seedDesk(b *testing.B, e *bundle) {
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
	e := setup(b, withRunner())
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
func (e *bundle) srvHandler() http.Handler {
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
// memory an idle page costs the server, fresh (B/conn) and after it was
// sent the b.N events (B/conn_after_events).
//
// The pages are a child process of this test binary (fanoutClientMain),
// as browsers are other machines: the memory figures are the server's
// alone (heap in use plus goroutine stacks after two collections, before
// and after the pages opened, divided by the pages), not the clients'
// buffers too. B/conn_over_bare subtracts what a bare gorilla connection
// with a reader goroutine costs a server, measured the same way. A page
// dials what the task page's #live element says (its after= and ik=), as
// the page's script does, so an idle page is sent nothing but presence.
// Latency runs from just before Decide to the child's receipt of the
// message that brings a page to the new seq (wall clock, one machine).
func BenchmarkDeskLiveFanout(b *testing.B) { fanout(b, 1000) }

// BenchmarkDeskLiveFanout5000 is BenchmarkDeskLiveFanout with 5,000 pages
// (issue 13: p99 ≤ 250 ms, ≤ 40 KB per idle page).
func BenchmarkDeskLiveFanout5000(b *testing.B) { fanout(b, 5000) }

func fanout(b *testing.B, conns int) {
	e := setup(b, withRunner())
	ctx := context.Background()
	id := e.createFeature("Fan-out")
	e.waitPending(id, "prd")
	last := func() int64 {
		var n int64
		if err := e.pool.QueryRow(ctx, `SELECT event_seq FROM workflow_checkpoints WHERE task_id = $1`, id).Scan(&n); err != nil {
			b.Fatalf("event_seq: %v", err)
		}
		return n
	}
	sess := e.session(defaultUser)
	cookie := sess.cookie.Name + "=" + sess.cookie.Value
	origin := "http://" + e.addr
	// What the page would dial: its #live element's after and ik.
	req, _ := http.NewRequest(http.MethodGet, origin+"/tasks/"+id, nil)
	req.Header.Set("Cookie", cookie)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatalf("task page: %v", err)
	}
	page, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	m := regexp.MustCompile(`data-after="(\d+)" data-ik="([^"]*)"`).FindSubmatch(page)
	if m == nil {
		b.Fatalf("task page: no #live element with data-after and data-ik")
	}
	seq, _ := strconv.ParseInt(string(m[1]), 10, 64)
	wsURL := fmt.Sprintf("ws://%s/tasks/%s/live?after=%d&ik=%s", e.addr, id, seq, url.QueryEscape(html.UnescapeString(string(m[2]))))

	bare := bareConnBytes(b, conns)

	var (
		target  atomic.Int64 // the seq being timed
		started atomic.Int64 // unix nanos of the decision
		mu      sync.Mutex
		lat     []time.Duration
		seen    = make([]atomic.Int64, conns)
	)
	for i := range seen {
		seen[i].Store(seq)
	}
	before := heapAndStacks()
	pages := startFanoutClients(b, wsURL, conns, cookie, origin, func(i int, n int64, at time.Time) {
		prev := seen[i].Swap(n)
		if t := target.Load(); t > 0 && prev < t && n >= t {
			mu.Lock()
			lat = append(lat, at.Sub(time.Unix(0, started.Load())))
			mu.Unlock()
		}
	})
	defer pages.stop()
	time.Sleep(time.Second) // every socket idle
	after := heapAndStacks()
	perConn := float64(after-before) / float64(conns)
	e.mu.Lock()
	open := e.srv.OpenWebsockets()
	e.mu.Unlock()
	if open < conns {
		b.Fatalf("%d websockets open, want %d", open, conns)
	}

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
	var cpu time.Duration // the server's CPU from each decision to its last delivery
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		pending := e.waitPending(id, "prd")
		n := last()
		waitAll(n)
		target.Store(n + 1)
		b.StartTimer()
		cpu0 := processCPU()
		started.Store(time.Now().UnixNano())
		if _, err := e.engine.Decide(ctx, id, graph.DecisionInput{InterruptID: pending.ID, Action: graph.ActionReject,
			Feedback: "Once more, please.", DecidedBy: "bench"}); err != nil {
			b.Fatalf("decide: %v", err)
		}
		waitAll(n + 1)
		cpu += processCPU() - cpu0
		b.StopTimer()
		e.runner.Wake() // the runner re-runs requirements to the next gate
		b.StartTimer()
	}
	b.StopTimer()
	// Again once every page has been sent b.N events (its goroutines'
	// stacks grown by writing, then shrunk by collections as they idle).
	time.Sleep(time.Second)
	perConnAfter := float64(heapAndStacks()-before) / float64(conns)
	mu.Lock()
	defer mu.Unlock()
	reportPercentiles(b, lat, "p50_ms", 0.50)
	reportPercentiles(b, lat, "p99_ms", 0.99)
	b.ReportMetric(perConn, "B/conn")
	b.ReportMetric(perConn-bare, "B/conn_over_bare")
	b.ReportMetric(perConnAfter, "B/conn_after_events")
	b.ReportMetric(float64(len(lat)), "deliveries")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "server_cpu_ms/event")
}

// processCPU is the CPU time this process (the server; the pages are a
// child process) has used: a fan-out's cost that the machine's other load
// does not blur as it blurs latency.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
// reader goroutine; the clients in a child process) cost this process, per
// connection: the floor under any websocket page.
func bareConnBytes(b *testing.B, n int) float64 {
	up := websocket.Upgrader{ReadBufferSize: 1024, WriteBufferSize: 4096}
	// The handlers must be gone before the caller measures its own
	// baseline: hijacked connections outlive srv.Close.
	var handlers sync.WaitGroup
	defer handlers.Wait()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.Add(1)
		defer handlers.Done()
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
	cs := startFanoutClients(b, "ws"+srv.URL[len("http"):], n, "", srv.URL, func(int, int64, time.Time) {})
	time.Sleep(500 * time.Millisecond)
	per := float64(heapAndStacks()-before) / float64(n)
	cs.stop()
	return per
}

// The child process of the fan-out benchmarks: GATEHOUSE_FANOUT_URL set
// makes the test binary (TestMain) dial that many websockets and report.
const (
	fanoutEnvURL    = "GATEHOUSE_FANOUT_URL"
	fanoutEnvN      = "GATEHOUSE_FANOUT_N"
	fanoutEnvCookie = "GATEHOUSE_FANOUT_COOKIE"
	fanoutEnvOrigin = "GATEHOUSE_FANOUT_ORIGIN"
)

type fanoutClients struct {
	cmd   *exec.Cmd
	stdin io.Closer
	done  chan struct{}
}

func (f *fanoutClients) stop() {
	_ = f.stdin.Close() // the child exits when its stdin closes
	_ = f.cmd.Wait()
	<-f.done
}

// startFanoutClients runs n pages in a child process and returns once all
// are open; got is called with each message's meta seq and receipt time.
func startFanoutClients(b *testing.B, wsURL string, n int, cookie, origin string, got func(i int, seq int64, at time.Time)) *fanoutClients {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fanoutEnvURL+"="+wsURL, fanoutEnvN+"="+strconv.Itoa(n),
		fanoutEnvCookie+"="+cookie, fanoutEnvOrigin+"="+origin)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	f := &fanoutClients{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "ready" {
		_ = stdin.Close()
		_ = cmd.Wait()
		b.Fatalf("fan-out clients did not start: %q %v", sc.Text(), sc.Err())
	}
	go func() {
		defer close(f.done)
		for sc.Scan() {
			var i int
			var seq, at int64
			if _, err := fmt.Sscan(sc.Text(), &i, &seq, &at); err == nil && i >= 0 && i < n {
				got(i, seq, time.Unix(0, at))
			}
		}
	}()
	return f
}

// fanoutClientMain is the child: it opens the sockets, says "ready", then
// prints "<page> <meta seq> <unix nanos>" for every message that carries a
// live meta, until its stdin closes.
func fanoutClientMain() int {
	n, _ := strconv.Atoi(os.Getenv(fanoutEnvN))
	hdr := http.Header{"Origin": {os.Getenv(fanoutEnvOrigin)}}
	if c := os.Getenv(fanoutEnvCookie); c != "" {
		hdr.Set("Cookie", c)
	}
	dialer := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	conns := make([]*websocket.Conn, n)
	for i := range conns {
		c, _, err := dialer.Dial(os.Getenv(fanoutEnvURL), hdr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dial %d: %v\n", i, err)
			return 1
		}
		conns[i] = c
	}
	type line struct {
		i        int
		seq, now int64
	}
	lines := make(chan line, 4096)
	// Buffers are shared: a page's own would be thousands of 16-32 KB
	// buffers growing at the first broadcast, whose allocation and
	// collection, in this process, would be timed as the server's.
	bufs := sync.Pool{New: func() any { return new(bytes.Buffer) }}
	for i, c := range conns {
		go func() {
			for {
				_, r, err := c.NextReader()
				if err != nil {
					return
				}
				buf := bufs.Get().(*bytes.Buffer)
				buf.Reset()
				if _, err := buf.ReadFrom(r); err != nil {
					return
				}
				now := time.Now().UnixNano()
				seq, ok := metaSeq(buf.Bytes())
				bufs.Put(buf)
				if ok {
					lines <- line{i, seq, now}
				}
			}
		}()
	}
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(w, "ready")
	_ = w.Flush()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	for l := range lines {
		fmt.Fprintln(w, l.i, l.seq, l.now)
		if len(lines) == 0 {
			_ = w.Flush()
		}
	}
	return 0
}
