package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// apiRequest is the part of §16's Request the benchmarks read.
type apiRequest struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	TaskID      string `json:"task_id"`
	InterruptID string `json:"interrupt_id"`
}

// call sends a request with the bench's token through client and decodes
// a JSON answer into out (when not nil).
func (s *stack) call(client *http.Client, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%w: %s", err, raw)
		}
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, nil
}

// toolCall is the body of a tool-call approval, as an agent sends it.
func toolCall(key string) map[string]any {
	return map[string]any{"kind": "tool_call", "title": "Run the migration on prod?",
		"description": "The agent wants to run **db migrate** on production.",
		"payload":     map[string]any{"tool": "shell", "args": map[string]any{"cmd": "make migrate", "env": "prod"}},
		"metadata":    map[string]any{"agent": "bench", "run": key}, "idempotency_key": key}
}

// BenchmarkRequestCreate: POST /api/v1/requests with an idempotency key
// (a new one each time) over real HTTP, from the call to the 201 read:
// the request row, its task, its interrupt and events committed. p99_ms is
// BENCH request_create_p99 (target ≤ 10 ms).
func BenchmarkRequestCreate(b *testing.B) {
	s := newStack(b, 2)
	// Warm the connection and the statements.
	var first apiRequest
	if code, err := s.call(benchClient, http.MethodPost, "/api/v1/requests", toolCall("warm"), &first); code != http.StatusCreated {
		b.Fatalf("create: %d %v", code, err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		var r apiRequest
		code, err := s.call(benchClient, http.MethodPost, "/api/v1/requests", toolCall(fmt.Sprintf("toolu_%d", i)), &r)
		if code != http.StatusCreated || r.Status != "pending" {
			b.Fatalf("create: %d %+v %v", code, r, err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportQuantiles(b, lat, "")
}

// BenchmarkRequestWaitReturn: a long poll (GET /api/v1/requests/{id}?wait=30s)
// waits on a pending request; a person approves it through the decisions
// API. p99_ms runs from the decision's 202 (read by the decider) to the
// long poll's answer read by the agent, 0 when the poll answered first:
// BENCH request_wait_return_p99 (target ≤ 50 ms). from_post_p99_ms runs
// from the decision's POST, its own round trip included.
func BenchmarkRequestWaitReturn(b *testing.B) {
	s := newStack(b, 2)
	lat := make([]time.Duration, 0, b.N)
	fromPost := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		var r apiRequest
		if code, err := s.call(benchClient, http.MethodPost, "/api/v1/requests", toolCall(fmt.Sprintf("wait_%d", i)), &r); code != http.StatusCreated {
			b.Fatalf("create: %d %v", code, err)
		}
		d, p := s.decideWhileWaiting(b, r, "the long poll", func() (apiRequest, error) {
			var got apiRequest
			_, err := s.call(benchClient, http.MethodGet, "/api/v1/requests/"+r.ID+"?wait=30s", nil, &got)
			return got, err
		})
		lat, fromPost = append(lat, d), append(fromPost, p)
	}
	b.StopTimer()
	reportQuantiles(b, lat, "")
	reportQuantiles(b, fromPost, "from_post_")
}

// decideWhileWaiting measures one wait's return, the timer stopped on
// entry (and left running): wait (what, e.g. "the long poll") waits in a
// goroutine on r, pending; 30 ms later, the timer started, a person
// approves r through the decisions API, and wait must return r approved. fromDecision runs
// from the decision's 202 to wait's return (0 when wait returned first),
// fromPost from the decision's POST.
func (s *stack) decideWhileWaiting(b *testing.B, r apiRequest, what string, wait func() (apiRequest, error)) (fromDecision, fromPost time.Duration) {
	b.Helper()
	type result struct {
		r   apiRequest
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		got, err := wait()
		done <- result{got, err, time.Now()}
	}()
	time.Sleep(30 * time.Millisecond) // wait is waiting
	b.StartTimer()
	t0 := time.Now()
	if code, err := s.call(benchClient, http.MethodPost, "/api/v1/tasks/"+r.TaskID+"/decisions",
		map[string]string{"interrupt_id": r.InterruptID, "action": "approve"}, nil); code != http.StatusAccepted {
		b.Fatalf("decision: %d %v", code, err)
	}
	decided := time.Now()
	res := <-done
	if res.err != nil || res.r.Status != "approved" {
		b.Fatalf("%s: %+v %v", what, res.r, res.err)
	}
	return max(0, res.at.Sub(decided)), res.at.Sub(t0)
}

// waiters is the number of concurrent long polls of
// BenchmarkRequestWaiters1000, sampled for sampleFor: longer than a wait's
// fallback read (requests' pollEvery, 10 s and up), so that those reads
// are counted.
const (
	waiters   = 1000
	sampleFor = 16 * time.Second
)

// BenchmarkRequestWaiters1000: 1,000 agents each long-poll their own
// pending request (GET ?wait=60s, one TCP connection each); once the
// server has made its first read of each, the process is watched for
// sampleFor:
//   - db_conns is the most connections of the server's pool in use at any
//     of the samples (every 5 ms), whatever uses them (the waits' fallback
//     reads, the runner's, the timers'): BENCH
//     request_waiters_1000_db_conns (target ≤ 2; a wait holds none, the
//     hub's LISTEN connection is its own); db_conns_mean their mean;
//   - pg_active is the most backends of the database not idle at a
//     sample (pg_stat_activity, the sampler's own left out);
//   - rss_mb is the process's resident memory while they wait (server and
//     the 1,000 clients in one process): BENCH request_waiters_1000_rss_mb;
//     rss_delta_mb its growth over the same process before the polls.
//
// Then every request is cancelled and each poll must answer "cancelled"
// (return_p99_ms from the cancel's answer).
func BenchmarkRequestWaiters1000(b *testing.B) {
	s := newStack(b, 2)
	client := &http.Client{Transport: func() http.RoundTripper {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = waiters + 16
		return t
	}()}
	defer client.CloseIdleConnections()
	sampler, err := pgx.Connect(context.Background(), s.url)
	if err != nil {
		b.Fatal(err)
	}
	defer sampler.Close(context.Background())
	var maxConns, meanConns, maxActive, rss, rssDelta float64
	var returnP99 float64
	b.ResetTimer()
	for n := range b.N {
		b.StopTimer()
		reqs := make([]apiRequest, waiters)
		var wg sync.WaitGroup
		var failed atomic.Value
		for w := range 8 { // made by 8 agents at once
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < waiters; i += 8 {
					if code, err := s.call(benchClient, http.MethodPost, "/api/v1/requests",
						toolCall(fmt.Sprintf("waiter_%d_%d", n, i)), &reqs[i]); code != http.StatusCreated {
						failed.Store(fmt.Errorf("create: %d %v", code, err))
						return
					}
				}
			}()
		}
		wg.Wait()
		if err := failed.Load(); err != nil {
			b.Fatal(err)
		}
		before := rssMB(b)
		b.StartTimer()

		type result struct {
			r   apiRequest
			err error
			at  time.Time
		}
		results := make(chan result, waiters)
		for i := range waiters {
			go func() {
				var got apiRequest
				_, err := s.call(client, http.MethodGet, "/api/v1/requests/"+reqs[i].ID+"?wait=60s", nil, &got)
				results <- result{got, err, time.Now()}
			}()
		}
		// Every poll waiting, and the server done with their first reads
		// (no connection in use for 200 ms); then the samples, over more
		// than the waits' fallback read (every 10 s).
		settled := time.Now()
		for s.reqs.Waiting() < waiters {
			time.Sleep(5 * time.Millisecond)
			if time.Since(settled) > time.Minute {
				b.Fatalf("%d of %d polls waiting after a minute", s.reqs.Waiting(), waiters)
			}
		}
		for quiet := time.Now(); time.Since(quiet) < 200*time.Millisecond; time.Sleep(time.Millisecond) {
			if s.pool.Stat().AcquiredConns() > 0 {
				quiet = time.Now()
			}
			if time.Since(settled) > time.Minute {
				b.Fatal("the pool never went quiet with the polls waiting")
			}
		}
		select {
		case r := <-results:
			b.Fatalf("a poll answered before any decision: %+v %v", r.r, r.err)
		default:
		}
		var conns, active int
		var held, samples int64
		for end := time.Now().Add(sampleFor); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			c := int(s.pool.Stat().AcquiredConns())
			conns = max(conns, c)
			held += int64(c)
			samples++
			var a int
			if err := sampler.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'`).Scan(&a); err != nil {
				b.Fatal(err)
			}
			active = max(active, a)
		}
		during := rssMB(b)

		// Cancel them all; each poll answers.
		cancelled := make([]time.Time, waiters)
		byID := make(map[string]int, waiters)
		for i, r := range reqs {
			byID[r.ID] = i
		}
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < waiters; i += 8 {
					if code, err := s.call(benchClient, http.MethodPost, "/api/v1/requests/"+reqs[i].ID+"/cancel",
						struct{}{}, nil); code != http.StatusOK {
						failed.Store(fmt.Errorf("cancel: %d %v", code, err))
						return
					}
					cancelled[i] = time.Now()
				}
			}()
		}
		wg.Wait()
		if err := failed.Load(); err != nil {
			b.Fatal(err)
		}
		lat := make([]time.Duration, 0, waiters)
		timeout := time.After(30 * time.Second)
		for range waiters {
			select {
			case r := <-results:
				if r.err != nil || r.r.Status != "cancelled" {
					b.Fatalf("a poll: %+v %v", r.r, r.err)
				}
				lat = append(lat, max(0, r.at.Sub(cancelled[byID[r.r.ID]])))
			case <-timeout:
				b.Fatalf("%d polls answered within 30 s of the cancels", len(lat))
			}
		}
		b.StopTimer()
		maxConns, maxActive = max(maxConns, float64(conns)), max(maxActive, float64(active))
		meanConns = max(meanConns, float64(held)/float64(samples))
		rss, rssDelta = max(rss, during), max(rssDelta, during-before)
		returnP99 = max(returnP99, quantileMS(lat, 0.99))
		client.CloseIdleConnections()
	}
	b.ReportMetric(maxConns, "db_conns")
	b.ReportMetric(meanConns, "db_conns_mean")
	b.ReportMetric(maxActive, "pg_active")
	b.ReportMetric(rss, "rss_mb")
	b.ReportMetric(rssDelta, "rss_delta_mb")
	b.ReportMetric(returnP99, "return_p99_ms")
}

// rssMB is this process's resident memory (VmRSS) in MiB.
func rssMB(b *testing.B) float64 {
	b.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
