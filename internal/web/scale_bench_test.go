package web

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// Scale (issue 13): the desk and the store over 1,000,000 tasks — 900,000
// ended, 100,000 waiting on a pending interrupt — plus 1,000 runnable
// ones, and the checkpoint history of the last hour's ended tasks.

const (
	scaleEnded    = 900_000
	scaleWaiting  = 100_000
	scaleRunnable = 1_000
	// tasks that ended within the last hour, with scaleHistory
	// checkpoints each: what the hourly prune walks
	scaleRecent  = 1_000
	scaleHistory = 10
	// deskPageSize is how many inbox entries a desk page shows.
	deskPageSize = 50
)

// loadScale fills pool with the scale fixture through COPY, fast enough
// for a benchmark's setup (a minute or so here, most of it index upkeep).
func loadScale(tb testing.TB, pool *pgxpool.Pool) {
	tb.Helper()
	ctx := context.Background()
	now := time.Now()
	statuses := []string{"succeeded", "succeeded", "succeeded", "failed", "cancelled"}
	total := scaleEnded + scaleWaiting + scaleRunnable
	ids := make([]uuid.UUID, total)
	for i := range ids {
		ids[i] = uuid.New()
	}
	// api.Task i was created i seconds before the oldest runnable one: the
	// waiting ones are the newest, then the ended ones over ~10 days.
	created := func(i int) time.Time { return now.Add(-time.Duration(i+1) * time.Second) }
	i := 0
	n, err := pool.CopyFrom(ctx, pgx.Identifier{"tasks"},
		[]string{"id", "workflow", "title", "input", "options", "status", "current_node", "created_by", "created_at",
			"updated_at", "completed_at"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == total {
				return nil, nil
			}
			id, at := ids[i], created(i)
			var status, node string
			var done *time.Time
			switch {
			case i < scaleRunnable:
				status, node = "queued", ""
				at = now.Add(time.Duration(i) * time.Millisecond)
			case i < scaleRunnable+scaleWaiting:
				status, node = "waiting", "requirements"
			default:
				status, node = statuses[i%len(statuses)], "merge"
				d := at.Add(time.Minute)
				if i < scaleRunnable+scaleWaiting+scaleRecent {
					d = now.Add(-time.Duration(i%3000) * time.Second)
				}
				done = &d
			}
			i++
			return []any{id, "feature", fmt.Sprintf("Scale task %d", i), `{"description":"scale"}`, `{"gates":{}}`,
				status, node, "seed", at, at, done}, nil
		}))
	if err != nil || n != int64(total) {
		tb.Fatalf("copy tasks: %d %v", n, err)
	}
	payload := `{"type":"gate","title":"Approve the PRD (spec.yaml)","artifact":{"name":"spec.yaml","content_type":"application/yaml","content":"name: x"},"actions":["approve","reject","edit"]}`
	kinds := []string{"prd", "plan", "merge"}
	itrs := make([]uuid.UUID, scaleWaiting)
	i = 0
	if n, err = pool.CopyFrom(ctx, pgx.Identifier{"interrupts"},
		[]string{"id", "task_id", "node", "kind", "iteration", "payload", "status", "created_at"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == scaleWaiting {
				return nil, nil
			}
			t := scaleRunnable + i
			itrs[i] = uuid.New()
			i++
			return []any{itrs[i-1], ids[t], "requirements", kinds[t%3], 1, payload, "pending", created(t)}, nil
		})); err != nil || n != scaleWaiting {
		tb.Fatalf("copy interrupts: %d %v", n, err)
	}
	// The runnable and waiting tasks' checkpoints (a claim reads the run's
	// state with it; a task's event counter lives there).
	i = 0
	if n, err = pool.CopyFrom(ctx, pgx.Identifier{"workflow_checkpoints"},
		[]string{"task_id", "state", "last_node_id", "next_node_id", "step", "pending_interrupt_id", "event_seq"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == scaleRunnable+scaleWaiting {
				return nil, nil
			}
			t := i
			i++
			if t < scaleRunnable {
				return []any{ids[t], `{"description":"scale"}`, "", "analyze", 0, nil, 1}, nil
			}
			return []any{ids[t], `{"description":"scale"}`, "analyze", "requirements", 2, itrs[t-scaleRunnable], 6}, nil
		})); err != nil || n != scaleRunnable+scaleWaiting {
		tb.Fatalf("copy checkpoints: %d %v", n, err)
	}
	i = 0
	if n, err = pool.CopyFrom(ctx, pgx.Identifier{"checkpoint_history"},
		[]string{"task_id", "step", "reason", "last_node_id", "next_node_id", "state", "created_at"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == scaleRecent*scaleHistory {
				return nil, nil
			}
			t, step := scaleRunnable+scaleWaiting+i/scaleHistory, i%scaleHistory
			i++
			reason := "node"
			if step == 0 {
				reason = "start"
			}
			return []any{ids[t], step, reason, "n", "n", `{"count":1}`, now}, nil
		})); err != nil || n != scaleRecent*scaleHistory {
		tb.Fatalf("copy history: %d %v", n, err)
	}
	// The copies left a million count deltas (00052): fold them, as
	// readers would, and vacuum what the fold deleted.
	if err := postgres.NewStore(pool, postgres.Options{}).FoldCounts(ctx); err != nil {
		tb.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		tb.Fatalf("vacuum: %v", err)
	}
}

// BenchmarkScale measures, over the scale fixture, the desk's dashboard,
// the inbox's first and last page (keyset), a task page, the claim of
// runnable work and the hourly prune of the checkpoint history, each
// b.N times, as p50/p95/p99 in ms.
func BenchmarkScale(b *testing.B) {
	e := setup(b, withRunner())
	id := e.createFeature("Scale")
	e.waitPending(id, "prd")
	// The runner must not take the fixture's runnable tasks: the claim is
	// measured here.
	stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	e.runner.Stop(stop)
	cancel()
	start := time.Now()
	loadScale(b, e.pool)
	b.Logf("fixture loaded in %v", time.Since(start).Round(time.Millisecond))
	ctx := context.Background()

	// The last page's cursor: the entry before the last pageSize ones.
	var at time.Time
	var iid string
	if err := e.pool.QueryRow(ctx, `SELECT created_at, id::text FROM interrupts WHERE status = 'pending'
		ORDER BY created_at DESC, id DESC OFFSET $1 LIMIT 1`, deskPageSize).Scan(&at, &iid); err != nil {
		b.Fatal(err)
	}
	last := base64.RawURLEncoding.EncodeToString([]byte(at.UTC().Format(time.RFC3339Nano) + " " + iid))

	h := e.srvHandler()
	sess := e.session(defaultUser)
	// Each op returns the time of what it measures.
	page := func(path, want string) func(*testing.B) time.Duration {
		re := regexp.MustCompile(want)
		return func(b *testing.B) time.Duration {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.AddCookie(sess.cookie)
			rec := httptest.NewRecorder()
			t0 := time.Now()
			h.ServeHTTP(rec, req)
			d := time.Since(t0)
			if rec.Code != http.StatusOK || !re.MatchString(rec.Body.String()) {
				b.Fatalf("GET %s: %d, body does not match %q", path, rec.Code, want)
			}
			return d
		}
	}
	claim := func(b *testing.B) time.Duration {
		t0 := time.Now()
		cs, err := e.store.Claim(ctx, "scale", 1, time.Minute)
		d := time.Since(t0)
		if err != nil || len(cs) != 1 {
			b.Fatalf("claim: %v %v", cs, err)
		}
		// back to the queue, so that every claim finds work
		if _, err := e.pool.Exec(ctx, `UPDATE tasks SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL
			WHERE id = $1`, cs[0].TaskID); err != nil {
			b.Fatal(err)
		}
		return d
	}
	prune := func(b *testing.B) time.Duration {
		t0 := time.Now()
		if _, err := e.store.PruneHistory(ctx, postgres.HistoryPrune{Before: time.Now(), Since: time.Now().Add(-time.Hour)}); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for _, c := range []struct {
		name string
		op   func(*testing.B) time.Duration
	}{
		{"dashboard", page("/", `data-count="succeeded"`)},
		{"inbox_first", page("/inbox", `data-total="100001"`)},
		{"inbox_last", page("/inbox?after="+last, `data-total="100001"`)},
		{"task_page", page("/tasks/"+id, `Scale`)},
		{"claim", claim},
		{"prune", prune},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range 3 { // warm the pool and the plans
				c.op(b)
			}
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				times = append(times, c.op(b))
			}
			b.StopTimer()
			reportPercentiles(b, times, "p50_ms", 0.50)
			reportPercentiles(b, times, "p95_ms", 0.95)
			reportPercentiles(b, times, "p99_ms", 0.99)
		})
	}
}
