package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/web/api"
)

// hookSink is a webhook receiver on loopback that verifies every delivery
// with the reference library of Standard Webhooks and counts them.
type hookSink struct {
	srv      *httptest.Server
	ok, bad  atomic.Int64
	verifier atomic.Pointer[standardwebhooks.Webhook]
}

func newHookSink(b *testing.B) *hookSink {
	h := &hookSink{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if v := h.verifier.Load(); v == nil || v.Verify(body, r.Header) != nil {
			h.bad.Add(1)
		} else {
			h.ok.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(h.srv.Close)
	return h
}

// withWebhook adds an endpoint to s pointing at a new sink; start runs
// the sender that delivers to it (the stack's, when its store hands it the
// deliveries; else a new one, which claims them).
func (s *stack) withWebhook(b *testing.B) (*hookSink, func()) {
	b.Helper()
	sink := newHookSink(b)
	secret := notify.NewSecret()
	v, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		b.Fatal(err)
	}
	sink.verifier.Store(v)
	if _, err := s.store.AddEndpoint(context.Background(), notify.Endpoint{URL: sink.srv.URL, Secret: secret}, "bench"); err != nil {
		b.Fatal(err)
	}
	return sink, func() {
		if s.sender == nil {
			s.sender = notify.NewSender(notify.Config{Store: s.store, Channels: map[string]notify.Channel{
				notify.ChannelWebhook: notify.NewWebhooks(s.store, api.WebhookBody(""), true)}})
		}
		sender := s.sender
		sender.Start()
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			sender.Stop(ctx)
		})
	}
}

// cycler holds tasks cycling between two gates, with their streams.
type cycler struct {
	s     *stack
	ids   []string
	conns []*websocket.Conn
	next  []string
}

func newCycler(b *testing.B, s *stack, tasks int) *cycler {
	c := &cycler{s: s, ids: make([]string, tasks), conns: make([]*websocket.Conn, tasks), next: make([]string, tasks)}
	for i := range tasks {
		t, err := s.engine.Create(context.Background(), graph.NewTask{Workflow: "gatecycle", Options: json.RawMessage(`{"gates":{}}`)})
		if err != nil {
			b.Fatal(err)
		}
		c.ids[i] = t.ID
		u := fmt.Sprintf("ws%s/api/v1/tasks/%s/stream?after=0", s.base[len("http"):], t.ID)
		conn, _, err := websocket.DefaultDialer.Dial(u, http.Header{"Authorization": {"Bearer " + token}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		c.conns[i] = conn
		if c.next[i], err = nextInterrupt(conn); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// rounds runs per approval round trips on every task at once and returns
// their latencies.
func (c *cycler) rounds(b *testing.B, per int) []time.Duration {
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for i := range c.ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, per)
			for range per {
				t0 := time.Now()
				code, err := c.s.post("/api/v1/tasks/"+c.ids[i]+"/decisions", map[string]string{"interrupt_id": c.next[i], "action": "approve"})
				if err != nil || code != http.StatusAccepted {
					b.Errorf("decision: %d %v", code, err)
					return
				}
				if c.next[i], err = nextInterrupt(c.conns[i]); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return lat
}

func p50(lat []time.Duration) float64 {
	slices.Sort(lat)
	if len(lat) == 0 {
		return 0
	}
	return float64(lat[len(lat)/2].Microseconds()) / 1000
}

// BenchmarkOutboxApproval measures the approval round trip at 16
// concurrent tasks on two replicas of the same build in the same run: one
// without a webhook endpoint, one with an endpoint whose every event
// (raised, decided) is delivered, signed, to a loopback receiver while the
// tasks cycle. Chunks alternate between the two so that both see the same
// machine; the ratio of their p50s is what the outbox adds.
func BenchmarkOutboxApproval(b *testing.B) {
	// Chunks of at least 20 round trips per task (about a second): the
	// sender's work trails each chunk by its linger and a batch (tens of
	// ms), which must stay small beside the chunk it spills into.
	const tasks, chunks, minPer = 16, 4, 20
	without := newStack(b, 16)
	with := newStackHanding(b, 16, true)
	sink, start := with.withWebhook(b)
	start()
	cw, cx := newCycler(b, without, tasks), newCycler(b, with, tasks)
	per := max(minPer, b.N/(tasks*chunks))
	// CPU per round: latency swings with whatever else the machine runs,
	// CPU time hardly does. PostgreSQL's is each stack's own database's;
	// this process's is split by chunk (the sender's work spills into the
	// next chunk a little).
	// Warm up both stacks untimed, to measure the steady state: every
	// pool connection plans each statement it runs five times before
	// PostgreSQL settles on a plan (the stack with the webhook runs more
	// kinds), and the fresh databases' plans (the triggers' too) were made
	// for empty tables until they are analyzed, which autovacuum does at
	// its own moment (a minute in), in one stack or the other, mid-run.
	cw.rounds(b, minPer/2)
	cx.rounds(b, minPer/2)
	without.analyze(b)
	with.analyze(b)
	cw.rounds(b, minPer/2)
	cx.rounds(b, minPer/2)
	pgw, pgx := startCPU(b, without.pool), startCPU(b, with.pool)
	var goA, goX time.Duration
	b.ResetTimer()
	var a, x []time.Duration
	for range chunks {
		t := selfCPU()
		a = append(a, cw.rounds(b, per)...)
		goA += selfCPU() - t
		t = selfCPU()
		x = append(x, cx.rounds(b, per)...)
		goX += selfCPU() - t
	}
	b.StopTimer()
	pa, px := p50(a), p50(x)
	b.ReportMetric(pa, "p50_ms_without")
	b.ReportMetric(px, "p50_ms_with")
	b.ReportMetric(px/pa, "ratio")
	// Every delivery arrives (and verifies) soon after.
	want := int64(len(x)+tasks*minPer)*2 + tasks // raised and decided per round (warm-up too), the first raises
	deadline := time.Now().Add(30 * time.Second)
	for sink.ok.Load() < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	_, pgA := pgw.stop(b)
	_, pgX := pgx.stop(b)
	b.ReportMetric(float64(pgA.Microseconds())/float64(len(a)), "pg_cpu_us/round_without")
	b.ReportMetric(float64(pgX.Microseconds())/float64(len(x)), "pg_cpu_us/round_with")
	b.ReportMetric(float64(goA.Microseconds())/float64(len(a)), "go_cpu_us/round_without")
	b.ReportMetric(float64(goX.Microseconds())/float64(len(x)), "go_cpu_us/round_with")
	if sink.bad.Load() > 0 || sink.ok.Load() < want {
		b.Fatalf("deliveries: %d verified, %d refused, want %d", sink.ok.Load(), sink.bad.Load(), want)
	}
}

// BenchmarkWebhook1000 raises 1,000 interrupts (1,000 tasks each waiting at
// a gate) with the sender stopped, then starts it and measures the time
// until the loopback receiver has verified all 1,000 deliveries.
func BenchmarkWebhook1000(b *testing.B) {
	const n = 1000
	for range b.N {
		b.StopTimer()
		s := newStack(b, 16)
		sink, start := s.withWebhook(b)
		ctx := context.Background()
		for range n {
			if _, err := s.engine.Create(ctx, graph.NewTask{Workflow: "gatecycle", Options: json.RawMessage(`{"gates":{}}`)}); err != nil {
				b.Fatal(err)
			}
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var pending int
			if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE state = 'pending'").Scan(&pending); err != nil {
				b.Fatal(err)
			}
			if pending == n {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d interrupts raised", pending, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
		b.StartTimer()
		t0 := time.Now()
		start()
		for sink.ok.Load() < n {
			if time.Since(t0) > time.Minute {
				b.Fatalf("%d of %d delivered after a minute", sink.ok.Load(), n)
			}
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		b.ReportMetric(time.Since(t0).Seconds(), "s/1000")
		if sink.bad.Load() > 0 {
			b.Fatalf("%d deliveries failed verification", sink.bad.Load())
		}
	}
}
