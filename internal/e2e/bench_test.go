package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/requests"
	"github.com/gatehousehq/gatehouse/internal/runner"
	"github.com/gatehousehq/gatehouse/internal/web"
	"github.com/gatehousehq/gatehouse/internal/web/api"
	"github.com/gatehousehq/gatehouse/internal/workflows/request"
)

const token = "bench-token-0123456789"

// stack is one replica in process: server, hub and runner on a fresh
// database, reached over real HTTP and websockets.
type stack struct {
	pool   *pgxpool.Pool
	store  *postgres.Store
	url    string
	engine *graph.Engine
	// reqs serves /api/v1/requests.
	reqs *requests.Service
	base string
	// sender delivers notifications, when a benchmark starts one.
	sender *notify.Sender
}

func newStack(b *testing.B, workers int) *stack {
	b.Helper()
	return newStackHanding(b, workers, false)
}

// newStackHanding is newStack whose store, when handing, hands the
// deliveries its commits write to the stack's sender (made here, started
// by withWebhook's start), as serve's does.
func newStackHanding(b *testing.B, workers int, handing bool) *stack {
	b.Helper()
	url := pgtest.NewDB(b)
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	pc.MaxConns = int32(2*workers + 16)
	postgres.ConfigurePool(pc)
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	store := postgres.NewStore(pool, postgres.Options{})
	var sender *notify.Sender
	if handing {
		sender = notify.NewSender(notify.Config{Store: store, Channels: map[string]notify.Channel{
			notify.ChannelWebhook: notify.NewWebhooks(store, api.WebhookBody(""), true)}})
		store = store.With(postgres.Options{Outbox: postgres.Outbox{}.WithSender(sender)})
	}
	ctx, cancel := context.WithCancel(context.Background())
	store.StartNotifier(ctx, nil)
	hub := live.NewHub(url, store, nil)
	go hub.Run(ctx)
	<-hub.Ready()
	rw, err := request.New()
	if err != nil {
		b.Fatal(err)
	}
	e, err := graph.NewEngine(store, []graph.Workflow{graphtest.Linear(10), graphtest.GateCycle(), rw}, graph.WithSink(hub))
	if err != nil {
		b.Fatal(err)
	}
	r := runner.New(store, e, runner.Config{Owner: "bench", Workers: workers, LeaseTTL: 15 * time.Second})
	hub.OnRunnable(r.WakeFor)
	r.Start()
	reqs := requests.NewService(requests.Config{Store: store, Engine: e, Events: hub, Wake: r.Wake})
	srv := web.New(web.Deps{Engine: e, Store: store, Hub: hub, Wake: r.Wake, BootstrapToken: token, Requests: reqs,
		Decider: auth.NewDecider(e, store, auth.DefaultPolicy(), nil, auth.WithWorker(r), auth.WithDecisionCheck(requests.CheckDecision)),
		Ready:   func(context.Context) error { return nil }})
	addr, err := srv.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
		r.Stop(sctx)
		cancel()
	})
	return &stack{pool: pool, store: store, url: url, engine: e, reqs: reqs, base: "http://" + addr.String(), sender: sender}
}

// analyze refreshes the planner's statistics of the stack's database, as
// autovacuum does a minute into a fresh one (a cached plan for a table
// that was empty is replanned).
func (s *stack) analyze(b *testing.B) {
	b.Helper()
	if _, err := s.pool.Exec(context.Background(), "ANALYZE"); err != nil {
		b.Fatal(err)
	}
}

// benchClient keeps a connection per concurrent task: the default
// transport keeps two idle connections per host, so at 16 tasks most
// decisions dialled a new TCP connection (and the server accepted it), all
// of it counted in the round trip and its CPU.
var benchClient = &http.Client{Transport: func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}()}

func (s *stack) post(path string, body any) (int, error) {
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", s.base+path, bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := benchClient.Do(req)
	if err != nil {
		return 0, err
	}
	// Drain the body: a connection whose body was not read to the end is
	// not reused, and each request would pay a new TCP connection.
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

type streamEvent struct {
	Seq  int64           `json:"seq"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// nextInterrupt reads the stream until an interrupt.raised and returns its id.
func nextInterrupt(conn *websocket.Conn) (string, error) {
	for {
		var ev streamEvent
		if err := conn.ReadJSON(&ev); err != nil {
			return "", err
		}
		if ev.Type == graph.EventInterruptRaised {
			var d struct {
				InterruptID string `json:"interrupt_id"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return "", err
			}
			return d.InterruptID, nil
		}
	}
}

// BenchmarkApprovalRoundTrip measures POST decision → the next
// interrupt.raised received on the task's websocket, over real HTTP, with
// tasks cycling between two gates (no LLM), at 1 and 16 concurrent tasks.
func BenchmarkApprovalRoundTrip(b *testing.B) {
	for _, tasks := range []int{1, 16} {
		b.Run(fmt.Sprintf("tasks=%d", tasks), func(b *testing.B) {
			s := newStack(b, 16)
			conns := make([]*websocket.Conn, tasks)
			ids := make([]string, tasks)
			first := make([]string, tasks)
			for i := range tasks {
				t, err := s.engine.Create(context.Background(), graph.NewTask{Workflow: "gatecycle", Options: json.RawMessage(`{"gates":{}}`)})
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = t.ID
				u := fmt.Sprintf("ws%s/api/v1/tasks/%s/stream?after=0", s.base[len("http"):], t.ID)
				conn, _, err := websocket.DefaultDialer.Dial(u, http.Header{"Authorization": {"Bearer " + token}})
				if err != nil {
					b.Fatal(err)
				}
				defer conn.Close()
				conns[i] = conn
				if first[i], err = nextInterrupt(conn); err != nil {
					b.Fatal(err)
				}
			}
			// Warm up untimed, to measure the steady state (see
			// BenchmarkOutboxApproval): round trips on every task, the
			// statistics autovacuum would gather a minute in, and round
			// trips again on the new plans.
			// The tasks warm up at once, as they are measured: one after
			// another, they used one or two of the pool's connections, and
			// the measured loop's first round opened the others (a
			// connection, then every statement prepared on it), which
			// showed as all 16 first round trips taking 90–150 ms.
			warm := func(rounds int) {
				var wg sync.WaitGroup
				for i := range tasks {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range max(2, rounds/tasks) {
							code, err := s.post("/api/v1/tasks/"+ids[i]+"/decisions", map[string]string{"interrupt_id": first[i], "action": "approve"})
							if err != nil || code != http.StatusAccepted {
								b.Errorf("decision: %d %v", code, err)
								return
							}
							if first[i], err = nextInterrupt(conns[i]); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				if b.Failed() {
					b.FailNow()
				}
			}
			// The statistics are gathered once the tables hold a few
			// hundred interrupts: gathered over a few dozen, they had
			// PostgreSQL plan each lookup of an interrupt by its key as a
			// scan of the whole table, which the measured loop then grew
			// tenfold (the cost per decision grew with b.N).
			warm(400)
			s.analyze(b)
			warm(40)
			// b.N round trips, spread over the tasks.
			per := (b.N + tasks - 1) / tasks
			var mu sync.Mutex
			var lat []time.Duration
			var wg sync.WaitGroup
			b.ResetTimer()
			cpu := startCPU(b, s.pool)
			start := time.Now()
			for i := range tasks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					itr := first[i]
					mine := make([]time.Duration, 0, per)
					for range per {
						t0 := time.Now()
						code, err := s.post("/api/v1/tasks/"+ids[i]+"/decisions", map[string]string{"interrupt_id": itr, "action": "approve"})
						if err != nil || code != http.StatusAccepted {
							b.Errorf("decision: %d %v", code, err)
							return
						}
						if itr, err = nextInterrupt(conns[i]); err != nil {
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
			elapsed := time.Since(start)
			self, pg := cpu.stop(b)
			b.StopTimer()
			slices.Sort(lat)
			if len(lat) == 0 {
				b.Fatal("no round trips")
			}
			q := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(q(0.50), "p50_ms")
			b.ReportMetric(q(0.99), "p99_ms")
			b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "decisions/s")
			b.ReportMetric(float64(self.Microseconds())/float64(len(lat)), "go_cpu_us/decision")
			b.ReportMetric(float64(pg.Microseconds())/float64(len(lat)), "pg_cpu_us/decision")
		})
	}
}

// BenchmarkThroughput16 measures completed 10-node tasks per second with 16
// concurrent tasks (16 workers), and, in the same run, the floor: 16
// connections each upserting one row's jsonb state in a loop. It reports
// the ratio of node runs per second to floor upserts per second.
func BenchmarkThroughput16(b *testing.B) {
	const workers, nodes = 16, 10
	s := newStack(b, workers)
	ctx := context.Background()
	tasks := max(b.N, 32)
	b.ResetTimer()
	cpu := startCPU(b, s.pool)
	start := time.Now()
	for range tasks {
		if _, err := s.engine.Create(ctx, graph.NewTask{Workflow: "linear"}); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var left int
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM tasks WHERE status <> 'succeeded'").Scan(&left); err != nil {
			b.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d tasks left", left)
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	self, pg := cpu.stop(b)
	b.StopTimer()
	stepsPerSec := float64(tasks*nodes) / elapsed.Seconds()
	steps := float64(tasks * nodes)

	fcpu := startCPU(b, s.pool)
	floor := floorRate(b, s.pool, workers, 2*time.Second)
	fself, fpg := fcpu.stop(b)
	fops := floor * 2
	b.ReportMetric(float64(tasks)/elapsed.Seconds(), "tasks/s")
	b.ReportMetric(stepsPerSec, "steps/s")
	b.ReportMetric(floor, "floor_ops/s")
	b.ReportMetric(stepsPerSec/floor, "ratio")
	b.ReportMetric(float64(self.Microseconds())/steps, "go_cpu_us/step")
	b.ReportMetric(float64(pg.Microseconds())/steps, "pg_cpu_us/step")
	b.ReportMetric(float64(fself.Microseconds())/fops, "floor_go_cpu_us/op")
	b.ReportMetric(float64(fpg.Microseconds())/fops, "floor_pg_cpu_us/op")
	// CPU per node run over CPU per floor upsert, both sides counted:
	// what the throughput ratio would be if the cores were the only limit.
	if f := float64((fself + fpg).Microseconds()) / fops; f > 0 {
		b.ReportMetric(float64((self+pg).Microseconds())/steps/f, "cpu_ratio")
	}
	if st := s.store.CommitStats(); st.Batches > 0 {
		b.ReportMetric(float64(st.Commits)/float64(st.Batches), "commits/batch")
	}
}

// floorRate runs conns goroutines, each on its own connection upserting
// its own row, for d, and returns upserts per second.
func floorRate(b *testing.B, pool *pgxpool.Pool, conns int, d time.Duration) float64 {
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS floor_state (id uuid PRIMARY KEY, state jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		b.Fatal(err)
	}
	state := []byte(`{"count":5,"path":["n1","n2","n3","n4","n5"],"notes":{"n1":"visited at step 1","n2":"visited at step 2","n3":"visited at step 3","n4":"visited at step 4","n5":"visited at step 5"}}`)
	var total int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pool.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			defer c.Release()
			id := uuid.New()
			var n int64
			for time.Now().Before(stop) {
				if _, err := c.Exec(ctx, `INSERT INTO floor_state (id, state) VALUES ($1, $2)
					ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, updated_at = now()`, id, state); err != nil {
					b.Error(err)
					return
				}
				n++
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	return float64(total) / d.Seconds()
}
