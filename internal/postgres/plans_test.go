package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// The plans of the queries that must not grow with the number of tasks
// (issue 13: claim, inbox, dashboard) walk the indexes made for them. The
// query is the one sqlc generated, prepared by pgx on a connection and
// explained there by its prepared name, with its custom and its generic
// plan, over a database whose statistics say most tasks ended.
func TestPlansUseTheirIndexes(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
INSERT INTO tasks (id, workflow, status, created_at, completed_at)
SELECT gen_random_uuid(), 'feature',
       CASE WHEN g <= 2000 THEN 'waiting' WHEN g <= 2100 THEN 'queued'
            ELSE (ARRAY['succeeded','failed','cancelled'])[1 + g % 3] END,
       now() - g * interval '1 second',
       CASE WHEN g > 2100 THEN now() - g * interval '1 second' END
FROM generate_series(1, 30000) g;
INSERT INTO interrupts (id, task_id, node, kind, iteration, payload, created_at)
SELECT gen_random_uuid(), id, 'n', (ARRAY['prd','plan','merge'])[1 + (extract(epoch FROM created_at)::bigint % 3)], 1, '{}', created_at
FROM tasks WHERE status = 'waiting';`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE tasks, interrupts`); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	q := dbsqlc.New(conn)
	cases := []struct {
		name string   // the sqlc query
		run  func()   // runs it once, so that pgx prepares it
		args string   // EXECUTE arguments
		want []string // in the plan
		not  []string // never in the plan
	}{
		{"TaskClaim", func() {
			if _, err := q.TaskClaim(ctx, dbsqlc.TaskClaimParams{Owner: "plans", TtlSeconds: 1, MaxTasks: 1}); err != nil {
				t.Fatal(err)
			}
		}, `('plans', 1, 1)`, []string{"tasks_runnable_idx"}, []string{"Seq Scan", "tasks_created_idx"}},
		{"DeskInboxPage", func() {
			if _, err := q.DeskInboxPage(ctx, dbsqlc.DeskInboxPageParams{MaxRows: 51}); err != nil {
				t.Fatal(err)
			}
		}, `(NULL, NULL, NULL, NULL, 51)`, []string{"interrupts_pending_due_idx"}, []string{"Seq Scan", "Sort"}},
		{"DeskInboxPage", func() {}, `('plan', NULL, NULL, NULL, 51)`, []string{"interrupts_pending_due_idx"}, []string{"Seq Scan", "Sort"}},
		{"TaskListByStatusOnly", func() {
			if _, err := q.TaskListByStatusOnly(ctx, dbsqlc.TaskListByStatusOnlyParams{Status: "succeeded", MaxRows: 6}); err != nil {
				t.Fatal(err)
			}
		}, `('succeeded', NULL, NULL, 6)`, []string{"Index Only Scan using tasks_status_created_idx"}, []string{"Seq Scan", "tasks_created_idx"}},
		{"TaskCountByStatus", func() {
			if _, err := q.TaskCountByStatus(ctx); err != nil {
				t.Fatal(err)
			}
		}, ``, nil, []string{" on tasks", " on interrupts"}},
		{"InterruptCountPending", func() {
			if _, err := q.InterruptCountPending(ctx); err != nil {
				t.Fatal(err)
			}
		}, ``, nil, []string{" on tasks", " on interrupts"}},
	}
	for _, c := range cases {
		c.run()
		for mode, plan := range explainModes(t, conn, c.name, c.args) {
			for _, w := range c.want {
				if !strings.Contains(plan, w) {
					t.Errorf("%s %s (%s): plan lacks %q:\n%s", c.name, c.args, mode, w, plan)
				}
			}
			for _, n := range c.not {
				if strings.Contains(plan, n) {
					t.Errorf("%s %s (%s): plan has %q:\n%s", c.name, c.args, mode, n, plan)
				}
			}
		}
	}
}

// explainModes returns the custom and the generic plan (by plan_cache_mode)
// of the sqlc query name, which pgx prepared on q, for the EXECUTE
// arguments args.
func explainModes(t *testing.T, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}, name, args string) map[string]string {
	t.Helper()
	ctx := context.Background()
	var stmt string
	if err := q.QueryRow(ctx, `SELECT name FROM pg_prepared_statements WHERE statement LIKE $1`,
		"%-- name: "+name+" %").Scan(&stmt); err != nil {
		t.Fatalf("%s: prepared statement: %v", name, err)
	}
	plans := map[string]string{}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		plans[mode] = explainAs(t, q, mode, fmt.Sprintf("EXECUTE %s%s", pgx.Identifier{stmt}.Sanitize(), args))
	}
	if _, err := q.Exec(ctx, "RESET plan_cache_mode"); err != nil {
		t.Fatal(err)
	}
	return plans
}

// explainAs is the plan of query with plan_cache_mode set to mode.
func explainAs(t *testing.T, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, mode, query string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := q.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
		t.Fatal(err)
	}
	rows, err := q.Query(ctx, "EXPLAIN "+query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// Plain node commits (events and a checkpoint, nothing else) are sent
// without TxGenericPlans: TaskCommit settles on its generic plan by
// itself. Were it planned afresh on every execution, as ArtifactInsertMany
// once was, custom_plans would grow with the commits.
func TestPlainCommitsSettleOnGenericPlans(t *testing.T) {
	pc, err := pgxpool.ParseConfig(pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = 1 // every statement prepared and planned on this one
	postgres.ConfigurePool(pc)
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	e, err := graph.NewEngine(postgres.NewStore(pool, postgres.Options{}), []graph.Workflow{graphtest.Linear(10)})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		task, err := e.Create(ctx, graph.NewTask{Workflow: "linear"})
		if err != nil {
			t.Fatal(err)
		}
		if out, err := e.Run(ctx, task.ID, 0); err != nil || out.Status != graph.StatusSucceeded {
			t.Fatalf("%+v %v", out, err)
		}
	}
	// 44 commits, most of them quiet (TaskCommitQuiet): PostgreSQL plans
	// the first 5 executions of each statement for their parameters.
	rows, err := pool.Query(ctx, `SELECT substring(statement from '-- name: (\w+)'), generic_plans, custom_plans
		FROM pg_prepared_statements WHERE statement LIKE '-- name: TaskCommit%'`)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	seen := map[string]bool{}
	for rows.Next() {
		var name string
		var generic, custom int64
		if err := rows.Scan(&name, &generic, &custom); err != nil {
			t.Fatal(err)
		}
		seen[name], total = true, total+generic+custom
		if custom > 5 {
			t.Errorf("%s: %d custom and %d generic plans, want at most 5 custom", name, custom, generic)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !seen["TaskCommit"] || !seen["TaskCommitQuiet"] || total != 44 {
		t.Fatalf("statements %v ran %d times, want TaskCommit and TaskCommitQuiet 44 times", seen, total)
	}
}

// A claim's plan is made on a young tasks table, and kept while the table
// grows: it must be the ordered scan of tasks_runnable_idx even then, not a
// bitmap scan and a sort, which visits every dead entry of the index on
// every claim (TxClaimPlans). The plans are explained as the store runs
// the claim: in a transaction that began with TxClaimPlans.
func TestClaimPlanOnAYoungTable(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
INSERT INTO tasks (id, workflow, created_at)
SELECT gen_random_uuid(), 'linear', now() + g * interval '1 ms' FROM generate_series(1, 20) g`); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // the claim is not kept
	q := dbsqlc.New(tx)
	if err := q.TxClaimPlans(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := q.TaskClaim(ctx, dbsqlc.TaskClaimParams{Owner: "young", TtlSeconds: 1, MaxTasks: 1}); err != nil {
		t.Fatal(err)
	}
	for mode, plan := range explainModes(t, tx, "TaskClaim", "('young', 1, 1)") {
		if !strings.Contains(plan, "Index Scan using tasks_runnable_idx") {
			t.Errorf("%s: the claim does not walk tasks_runnable_idx in order:\n%s", mode, plan)
		}
		for _, n := range []string{"Bitmap", "Sort", "Seq Scan"} {
			if strings.Contains(plan, n) {
				t.Errorf("%s: the claim's plan has %q:\n%s", mode, n, plan)
			}
		}
	}
	var text string
	if err := tx.QueryRow(ctx, `SELECT statement FROM pg_prepared_statements WHERE statement LIKE $1`,
		"%-- name: TaskClaim %").Scan(&text); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Without it, the same statement prepared afresh is planned as the
	// bitmap scan and sort this guards against: the test can fail.
	if _, err := conn.Exec(ctx, "PREPARE young_claim AS "+text); err != nil {
		t.Fatal(err)
	}
	if plan := explainAs(t, conn, "force_generic_plan", "EXECUTE young_claim('young', 1, 1)"); !strings.Contains(plan, "Bitmap Index Scan on tasks_runnable_idx") {
		t.Errorf("without TxClaimPlans the young table's plan was expected to be a bitmap scan:\n%s", plan)
	}
	if _, err := conn.Exec(ctx, "RESET plan_cache_mode; DEALLOCATE young_claim"); err != nil {
		t.Fatal(err)
	}
}

// The feedback of a task's last rejection at a node is read by the
// rejections' index, whatever the number of approvals: among 20,000
// decisions (most of them approvals, of 100 tasks), each of the two
// queries that read it walks decisions_rejections_idx, custom and generic,
// and finds the newest rejection at the node.
func TestLastRejectionUsesItsIndex(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
INSERT INTO tasks (id, workflow, status)
SELECT ('00000000-0000-0000-0000-' || lpad(t::text, 12, '0'))::uuid, 'feature', 'waiting' FROM generate_series(1, 100) t;
INSERT INTO interrupts (id, task_id, node, kind, iteration, payload, status, created_at)
SELECT ('00000000-0000-0000-' || lpad(t::text, 4, '0') || '-' || lpad(g::text, 12, '0'))::uuid,
       ('00000000-0000-0000-0000-' || lpad(t::text, 12, '0'))::uuid,
       CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END, 'plan', 1, '{}', 'resolved', now() - (1000 - g) * interval '1 s'
FROM generate_series(1, 100) t, generate_series(1, 200) g;
INSERT INTO decisions (interrupt_id, task_id, action, feedback, decided_by, decided_at)
SELECT id, task_id, CASE WHEN right(id::text, 12)::int % 25 = 0 THEN 'reject' ELSE 'approve' END,
       'feedback at ' || created_at::text, 'x', created_at
FROM interrupts;
INSERT INTO interrupts (id, task_id, node, kind, iteration, payload, status, created_at)
VALUES ('00000000-0000-0000-ffff-000000000001', '00000000-0000-0000-0000-000000000001', 'a', 'plan', 2, '{}', 'pending', now());`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE decisions, interrupts`); err != nil {
		t.Fatal(err)
	}
	var want string
	if err := pool.QueryRow(ctx, `SELECT d.feedback FROM decisions d JOIN interrupts i ON i.id = d.interrupt_id
		WHERE d.task_id = '00000000-0000-0000-0000-000000000001' AND i.node = 'a' AND d.action = 'reject'
		ORDER BY d.decided_at DESC LIMIT 1`).Scan(&want); err != nil {
		t.Fatalf("the fixture has no rejection at a: %v", err)
	}
	store := postgres.NewStore(pool, postgres.Options{})
	itr, got, err := store.LGInterruptWithFeedback(ctx, "00000000-0000-0000-ffff-000000000001")
	if err != nil || itr.Node != "a" || got != want {
		t.Fatalf("LGInterruptWithFeedback: %+v %q %v, want feedback %q", itr, got, err, want)
	}
	if got, err := store.LGLastRejection(ctx, "00000000-0000-0000-0000-000000000001", "a",
		"00000000-0000-0000-ffff-000000000001"); err != nil || got != want {
		t.Fatalf("LGLastRejection: %q %v, want %q", got, err, want)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	q := dbsqlc.New(conn)
	for _, c := range []struct {
		name, args string
		run        func() error
	}{
		{"LGInterruptWithFeedback", `('00000000-0000-0000-ffff-000000000001')`, func() error {
			_, err := q.LGInterruptWithFeedback(ctx, uuid.MustParse("00000000-0000-0000-ffff-000000000001"))
			return err
		}},
		{"LGLastRejection", `('00000000-0000-0000-0000-000000000001', 'a', '00000000-0000-0000-ffff-000000000001')`, func() error {
			_, err := q.LGLastRejection(ctx, dbsqlc.LGLastRejectionParams{TaskID: uuid.MustParse("00000000-0000-0000-0000-000000000001"),
				Node: "a", InterruptID: uuid.MustParse("00000000-0000-0000-ffff-000000000001")})
			return err
		}},
	} {
		if err := c.run(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for mode, plan := range explainModes(t, conn, c.name, c.args) {
			if !strings.Contains(plan, "decisions_rejections_idx") || strings.Contains(plan, "Seq Scan") {
				t.Errorf("%s (%s): the last rejection is not read by decisions_rejections_idx:\n%s", c.name, mode, plan)
			}
		}
	}
}
