package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// TestPruneNotifications: finished deliveries (delivered, failed) older
// than the cutoff go with their attempts, and so do action links that
// ended (used or expired) before it; pending deliveries of any age,
// recent ones, an old one attempted again recently, and links used,
// expiring or expired recently stay. Batches of one row show the prune
// going on past its first statement; a second prune while one holds the
// lock is told so and deletes nothing.
func TestPruneNotifications(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	store := postgres.NewStore(pool, postgres.Options{})
	engine, err := graph.NewEngine(store, []graph.Workflow{graphtest.GateCycle()})
	if err != nil {
		t.Fatal(err)
	}
	// A webhook endpoint: every raised interrupt writes a delivery to it.
	if _, err := store.AddEndpoint(ctx, notify.Endpoint{URL: "https://hooks.example.com/x", Secret: "whsec_x"}, "test"); err != nil {
		t.Fatal(err)
	}
	const n = 6
	itrs := make([]*graph.Interrupt, n)
	for i := range n {
		task, err := engine.Create(ctx, graph.NewTask{Workflow: "gatecycle", Options: []byte(`{"gates":{}}`), CreatedBy: "ann"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := engine.Run(ctx, task.ID, task.Fence)
		if err != nil || res.Interrupt == nil {
			t.Fatalf("run: %+v %v", res, err)
		}
		itrs[i] = res.Interrupt
	}
	count := func(q string, args ...any) int {
		t.Helper()
		var c int
		if err := pool.QueryRow(ctx, q, args...).Scan(&c); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return c
	}
	if c := count("SELECT count(*) FROM outbox WHERE state = 'pending'"); c != n {
		t.Fatalf("%d pending deliveries, want %d", c, n)
	}
	// Each delivery's fate, by its interrupt: the senders' own claim and
	// record; the first gets a failed attempt before it is delivered.
	fate := []string{"delivered", "failed", "pending", "delivered", "delivered", "failed"}
	byItr := map[string]int{}
	for i, itr := range itrs {
		byItr[itr.ID] = i
	}
	for round := range 2 {
		if _, err := pool.Exec(ctx, "UPDATE outbox SET next_at = now() WHERE state = 'pending'"); err != nil {
			t.Fatal(err)
		}
		ds, err := store.ClaimDeliveries(ctx, 100, time.Minute, []string{})
		if err != nil {
			t.Fatal(err)
		}
		var fs []notify.Finished
		for _, d := range ds {
			i := byItr[d.InterruptID]
			state := fate[i]
			if round == 0 && i == 0 {
				state = "pending"
			}
			fs = append(fs, notify.Finished{Delivery: &d, Result: notify.Result{State: state, NextAt: time.Now().Add(time.Hour),
				Error: "as the test says", StatusCode: 200}})
		}
		if lost, err := store.FinishDeliveries(ctx, fs); err != nil || len(lost) != 0 {
			t.Fatalf("finish: %v %v", lost, err)
		}
	}
	outboxOf := func(i int) uuid.UUID {
		var id uuid.UUID
		if err := pool.QueryRow(ctx, "SELECT id FROM outbox WHERE interrupt_id = $1", itrs[i].ID).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// Old: 0, 1, 2 and 5 wholly; 4 was created long ago but attempted
	// again yesterday (a Redeliver); 3 is recent.
	age := func(i int, created, attempted string) {
		t.Helper()
		id := outboxOf(i)
		if _, err := pool.Exec(ctx, "UPDATE outbox SET created_at = now() - $2::interval WHERE id = $1", id, created); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "UPDATE outbox_attempts SET at = now() - $2::interval WHERE outbox_id = $1", id, attempted); err != nil {
			t.Fatal(err)
		}
	}
	age(0, "40 days", "39 days")
	age(1, "40 days", "39 days")
	age(2, "40 days", "39 days")
	age(4, "40 days", "1 day")
	age(5, "31 days", "30 days 1 hour")
	keptDeliveries := []uuid.UUID{outboxOf(2), outboxOf(3), outboxOf(4)}
	prunedAttempts := count("SELECT count(*) FROM outbox_attempts WHERE outbox_id = ANY($1::uuid[])",
		[]uuid.UUID{outboxOf(0), outboxOf(1), outboxOf(5)})
	if prunedAttempts != 4 {
		t.Fatalf("%d attempts of the old finished deliveries, want 4", prunedAttempts)
	}

	// Action links: ended long ago (used; expired unused), and ended
	// recently or not at all. One names a delivery about to be pruned.
	now := time.Now()
	type link struct {
		expires time.Time
		usedAgo time.Duration // 0: unused
		gone    bool
		outbox  string
	}
	links := []link{
		{expires: now.Add(-40 * 24 * time.Hour), usedAgo: 41 * 24 * time.Hour, gone: true},
		{expires: now.Add(-31 * 24 * time.Hour), gone: true, outbox: outboxOf(0).String()},
		{expires: now.Add(72 * time.Hour)},
		{expires: now.Add(-24 * time.Hour)},
		{expires: now.Add(time.Hour), usedAgo: time.Hour, outbox: outboxOf(1).String()},
		{expires: now.Add(-40 * 24 * time.Hour), usedAgo: 29 * 24 * time.Hour},
	}
	hashes := make([][]byte, len(links))
	for i, l := range links {
		_, hash := notify.ActionToken()
		hashes[i] = hash
		if err := store.CreateActionLink(ctx, hash, notify.ActionLink{InterruptID: itrs[i].ID, TaskID: itrs[i].TaskID,
			Recipient: "alice", ExpiresAt: l.expires}, l.outbox); err != nil {
			t.Fatal(err)
		}
		if l.usedAgo > 0 {
			if _, err := pool.Exec(ctx, "UPDATE action_links SET used_at = $2 WHERE token_hash = $1", hash, now.Add(-l.usedAgo)); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Another replica's prune holds the lock: this one is told so.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", postgres.OutboxPruneLockKey); err != nil {
		t.Fatal(err)
	}
	before := now.Add(-30 * 24 * time.Hour)
	if out, err := store.PruneNotifications(ctx, postgres.NotificationPrune{Before: before}); !errors.Is(err, postgres.ErrOutboxPruneBusy) ||
		out != (postgres.NotificationsPruned{}) {
		t.Fatalf("prune while another holds the lock: %+v %v", out, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", postgres.OutboxPruneLockKey); err != nil {
		t.Fatal(err)
	}
	conn.Release()
	deliveries, attempts, linkRows := count("SELECT count(*) FROM outbox"), count("SELECT count(*) FROM outbox_attempts"),
		count("SELECT count(*) FROM action_links")

	out, err := store.PruneNotifications(ctx, postgres.NotificationPrune{Before: before, Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := (postgres.NotificationsPruned{Deliveries: 3, Attempts: int64(prunedAttempts), Links: 2}); out != want {
		t.Errorf("pruned %+v, want %+v", out, want)
	}
	if c := count("SELECT count(*) FROM outbox"); c != deliveries-3 {
		t.Errorf("%d deliveries left of %d, want 3 fewer", c, deliveries)
	}
	if c := count("SELECT count(*) FROM outbox WHERE id = ANY($1::uuid[])", keptDeliveries); c != 3 {
		t.Errorf("%d of the 3 deliveries to keep left (pending, recent, attempted recently)", c)
	}
	if c := count("SELECT count(*) FROM outbox_attempts"); c != attempts-prunedAttempts {
		t.Errorf("%d attempts left of %d, want %d fewer", c, attempts, prunedAttempts)
	}
	if c := count("SELECT count(*) FROM outbox_attempts a WHERE NOT EXISTS (SELECT 1 FROM outbox o WHERE o.id = a.outbox_id)"); c != 0 {
		t.Errorf("%d attempts of deliveries gone", c)
	}
	for i, l := range links {
		c := count("SELECT count(*) FROM action_links WHERE token_hash = $1", hashes[i])
		if l.gone && c != 0 || !l.gone && c != 1 {
			t.Errorf("link %d (%+v): %d rows", i, l, c)
		}
	}
	if c := count("SELECT count(*) FROM action_links"); c != linkRows-2 {
		t.Errorf("%d links left of %d", c, linkRows)
	}
	// A second run finds nothing more.
	if out, err := store.PruneNotifications(ctx, postgres.NotificationPrune{Before: before}); err != nil ||
		out != (postgres.NotificationsPruned{}) {
		t.Errorf("second prune: %+v %v", out, err)
	}
	// The pending delivery is still sent: claimable once due.
	if _, err := pool.Exec(ctx, "UPDATE outbox SET next_at = now() WHERE state = 'pending'"); err != nil {
		t.Fatal(err)
	}
	if ds, err := store.ClaimDeliveries(ctx, 100, time.Minute, []string{}); err != nil || len(ds) != 1 || ds[0].InterruptID != itrs[2].ID {
		t.Errorf("claim after the prune: %+v %v", ds, err)
	}
}

// TestNotificationPrunePlans: the prune's statements find old rows
// through the indexes of migration 00085 — not by reading outbox or
// action_links whole — with their custom and their generic plans, over
// tables of recent rows (the hourly prune's usual case: little or nothing
// to delete among many rows).
func TestNotificationPrunePlans(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
INSERT INTO tasks (id, workflow, status) VALUES ('00000000-0000-0000-0000-000000000001', 'feature', 'waiting');
INSERT INTO interrupts (id, task_id, node, kind, iteration, payload)
VALUES ('00000000-0000-0000-0000-000000000002', '00000000-0000-0000-0000-000000000001', 'n', 'prd', 1, '{}');
INSERT INTO outbox (event, task_id, channel, recipient, state, created_at, delivered_at)
SELECT 'interrupt.raised', '00000000-0000-0000-0000-000000000001', 'email', 'u' || g,
       CASE WHEN g % 10 = 0 THEN 'pending' WHEN g % 10 = 1 THEN 'failed' ELSE 'delivered' END,
       now() - g * interval '10 seconds', CASE WHEN g % 10 > 1 THEN now() - g * interval '10 seconds' END
FROM generate_series(1, 30000) g;
INSERT INTO outbox_attempts (outbox_id, attempt, at, ok) SELECT id, 1, created_at, state = 'delivered' FROM outbox;
INSERT INTO action_links (token_hash, interrupt_id, task_id, recipient, expires_at, used_at)
SELECT sha256(g::text::bytea), '00000000-0000-0000-0000-000000000002', '00000000-0000-0000-0000-000000000001', 'u' || g,
       now() + interval '72 hours' - g * interval '10 seconds', CASE WHEN g % 2 = 0 THEN now() - g * interval '5 seconds' END
FROM generate_series(1, 30000) g;`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE outbox, outbox_attempts, action_links`); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	q := dbsqlc.New(conn)
	cutoff := time.Now().Add(-30 * 24 * time.Hour)
	if r, err := q.OutboxPruneDelete(ctx, dbsqlc.OutboxPruneDeleteParams{Cutoff: cutoff, MaxRows: 1000}); err != nil || r.Deliveries != 0 {
		t.Fatalf("prune deliveries: %+v %v", r, err)
	}
	if n, err := q.ActionLinkPruneDelete(ctx, dbsqlc.ActionLinkPruneDeleteParams{Cutoff: cutoff, MaxRows: 1000}); err != nil || n != 0 {
		t.Fatalf("prune links: %d %v", n, err)
	}
	args := fmt.Sprintf("('%s', 1000)", cutoff.UTC().Format(time.RFC3339Nano))
	for name, index := range map[string]string{"OutboxPruneDelete": "outbox_finished_idx", "ActionLinkPruneDelete": "action_links_ended_idx"} {
		var stmt string
		if err := conn.QueryRow(ctx, `SELECT name FROM pg_prepared_statements WHERE statement LIKE $1`,
			"%-- name: "+name+" %").Scan(&stmt); err != nil {
			t.Fatalf("%s: prepared statement: %v", name, err)
		}
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
				t.Fatal(err)
			}
			rows, err := conn.Query(ctx, fmt.Sprintf("EXPLAIN EXECUTE %s%s", pgx.Identifier{stmt}.Sanitize(), args))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			plan := strings.Join(lines, "\n")
			if !strings.Contains(plan, index) || strings.Contains(plan, "Seq Scan") {
				t.Errorf("%s (%s): want %s and no Seq Scan:\n%s", name, mode, index, plan)
			}
		}
	}
	if _, err := conn.Exec(ctx, "RESET plan_cache_mode"); err != nil {
		t.Fatal(err)
	}
}
