#!/usr/bin/env bash
# Where a node run's commit spends PostgreSQL's CPU, part by part, against
# the floor (one single-row upsert of a same-size jsonb state).
#
# Each variant of the step statement (the shape of TaskCommit in
# db/queries/tasks.sql) runs under pgbench on 8 connections with
# synchronous_commit off, so that the WAL flush, which every variant pays
# alike, does not hide the statement's own cost; the CPU time of the
# pgbench backends is read from /proc. Prints µs of backend CPU per
# transaction. Needs the private cluster (scripts/pg.sh) or DATABASE_URL
# on this machine, and runs as a user that may read the backends' /proc.
#
# Each variant runs for a fixed time, so that a fast one (the floor) is
# not over before its backends' CPU is read.
#
#   bash scripts/step-cost.sh [seconds per variant, default 4]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

secs="${1:-4}"
clients=8
bindir="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
if [[ -z "${DATABASE_URL:-}" ]]; then
	bash scripts/pg.sh start >&2
	DATABASE_URL="$(bash scripts/pg.sh url)"
fi
db="gh_step_cost_$$"
base="$DATABASE_URL"
url="$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$base" "$db")"
work="$(mktemp -d)"
cleanup() {
	psql "$base" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

psql "$base" -qc "CREATE DATABASE $db" >/dev/null
DATABASE_URL="$url" go run ./cmd/web migrate up >/dev/null
psql "$url" -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE TABLE floor_state (id uuid PRIMARY KEY, state jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
INSERT INTO tasks (id, workflow, status, lease_fence) SELECT md5(g::text)::uuid, 'linear', 'running', 1 FROM generate_series(0, 63) g;
-- The checkpoint rows carry the task's fence (00101).
INSERT INTO workflow_checkpoints (task_id, state, lease_fence) SELECT id, '{}', lease_fence FROM tasks;
CREATE SEQUENCE step_seq;
-- The statement before 00100 counted events on the task row.
ALTER TABLE tasks ADD COLUMN event_seq bigint NOT NULL DEFAULT 0;
UPDATE workflow_checkpoints SET event_seq = 1000000000;
SQL

python3 - "$work" <<'PY'
import sys
out = sys.argv[1]
S = '{"count":5,"path":["n1","n2","n3","n4","n5"],"notes":{"n1":"visited at step 1","n2":"visited at step 2","n3":"visited at step 3","n4":"visited at step 4","n5":"visited at step 5"}}'
ID = "md5(:client_id::text)::uuid"
task = f"""t AS (
  UPDATE tasks SET status='running', current_node='n2', result=COALESCE(NULL::jsonb, tasks.result), error='',
    event_seq=tasks.event_seq+2, updated_at=now(), completed_at=NULL
  WHERE tasks.id = {ID} AND tasks.lease_fence = 1 RETURNING tasks.event_seq)"""
cp = f"""cp AS (
  INSERT INTO workflow_checkpoints AS w (task_id, state, last_node_id, updated_at, step, next_node_id, iterations, answers)
  SELECT {ID}, '{S}'::jsonb, 'n1', now(), nextval('step_seq'), 'n2', '{{"n1":1}}'::jsonb, '[]'::jsonb
  ON CONFLICT (task_id) DO UPDATE SET state=EXCLUDED.state, last_node_id=EXCLUDED.last_node_id, updated_at=EXCLUDED.updated_at,
    step=EXCLUDED.step, next_node_id=EXCLUDED.next_node_id, iterations=EXCLUDED.iterations, answers=EXCLUDED.answers
  RETURNING w.task_id, w.step, w.last_node_id, w.next_node_id, w.state, w.iterations, w.answers, w.updated_at)"""
cp_seq = f"""cp AS (
  UPDATE workflow_checkpoints AS w SET state='{S}'::jsonb, last_node_id='n1', updated_at=now(), step=nextval('step_seq'),
    next_node_id='n2', iterations='{{"n1":1}}'::jsonb, answers='[]'::jsonb, event_seq=w.event_seq+2
  WHERE w.task_id = {ID} AND w.lease_fence = 1
  RETURNING w.task_id, w.step, w.last_node_id, w.next_node_id, w.state, w.iterations, w.answers, w.updated_at, w.event_seq)"""
fence = f"""f AS (SELECT id FROM tasks WHERE id = {ID} AND lease_fence = 1 FOR SHARE)"""
cp_share = f"""cp AS (
  INSERT INTO workflow_checkpoints AS w (task_id, state, last_node_id, updated_at, step, next_node_id, iterations, answers)
  SELECT f.id, '{S}'::jsonb, 'n1', now(), nextval('step_seq'), 'n2', '{{"n1":1}}'::jsonb, '[]'::jsonb FROM f
  ON CONFLICT (task_id) DO UPDATE SET state=EXCLUDED.state, last_node_id=EXCLUDED.last_node_id, updated_at=EXCLUDED.updated_at,
    step=EXCLUDED.step, next_node_id=EXCLUDED.next_node_id, iterations=EXCLUDED.iterations, answers=EXCLUDED.answers,
    event_seq=w.event_seq+2
  RETURNING w.task_id, w.step, w.last_node_id, w.next_node_id, w.state, w.iterations, w.answers, w.updated_at, w.event_seq)"""
hist = """h AS (
  INSERT INTO checkpoint_history (task_id, step, reason, last_node_id, next_node_id, state, iterations, answers, created_at)
  SELECT task_id, step, 'node', last_node_id, next_node_id, state, iterations, answers, updated_at FROM cp)"""
events = f"""INSERT INTO task_events (task_id, seq, type, node, iteration, phase, duration_ms, data, created_at)
SELECT {ID}, t.event_seq - 2 + e.ord, e.type, 'n1', 1, 'n1', 5, '{{}}'::jsonb, now()
FROM unnest(array['node.completed','node.started']) WITH ORDINALITY AS e(type, ord) LEFT JOIN t ON true
RETURNING seq;"""
variants = {
    "1-floor": f"INSERT INTO floor_state (id, state) VALUES ({ID}, '{S}') ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, updated_at = now();",
    "2-step": "WITH " + ",\n".join([task, cp, hist]) + "\n" + events,
    "3-step_without_history": "WITH " + ",\n".join([task, cp]) + "\n" + events,
    "4-step_without_events": "WITH " + ",\n".join([task, cp, hist]) + "\nSELECT event_seq FROM t;",
    "5-task_row_only": "WITH " + task + "\nSELECT event_seq FROM t;",
    "6-checkpoint_only": "WITH " + cp + "\nSELECT step FROM cp;",
    # "step" above is TaskCommit as it was before migration 00100.
    # No update of the task row on a step that keeps the task running; the
    # seq and the fence (a copy, 00101) live on the checkpoint row, which
    # the step updates anyway (a plain UPDATE, no upsert): TaskCommitQuiet.
    "7-step_seq_on_checkpoint": "WITH " + cp_seq + ",\n" + hist + "\n" + events.replace("LEFT JOIN t ON true", "LEFT JOIN cp t ON true"),
    # The same with the fence left on the task row, checked under a share
    # lock (which a claim's SKIP LOCKED passes over and a cancel waits
    # for) instead of an update of the row: the quiet step's shape from
    # 00100 to 00101.
    "8-step_share_locks_task": "WITH " + fence + ",\n" + cp_share + ",\n" + hist + "\n"
        + events.replace("LEFT JOIN t ON true", "LEFT JOIN cp t ON true"),
}
for name, sql in variants.items():
    open(f"{out}/{name}.sql", "w").write(sql + "\n")
PY

cpu_of() { # pids → total utime+stime ticks
	local t=0 p v
	for p in "$@"; do
		v="$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || true)"
		t=$((t + ${v:-0}))
	done
	echo "$t"
}

ticks="$(getconf CLK_TCK)"
printf '%-26s %12s %10s\n' variant "µs CPU/txn" tps
for f in "$work"/*.sql; do
	name="$(basename "$f" .sql)"
	PGOPTIONS="-c synchronous_commit=off" "$bindir/pgbench" -n -c "$clients" -j 2 -T "$secs" -M prepared -f "$f" "$url" >"$work/out" 2>&1 &
	bench=$!
	sleep 0.3
	mapfile -t pids < <(psql "$url" -Atc "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench'")
	last=0
	while kill -0 "$bench" 2>/dev/null; do
		now="$(cpu_of "${pids[@]}")"
		((now > last)) && last=$now
		sleep 0.05
	done
	wait "$bench" || { cat "$work/out" >&2; exit 1; }
	tps="$(grep -oE 'tps = [0-9.]+' "$work/out" | head -1 | cut -d' ' -f3)"
	txns="$(grep -oE 'actually processed: [0-9]+' "$work/out" | grep -oE '[0-9]+$')"
	printf '%-26s %12d %10.0f\n' "${name#*-}" $((last * 1000000 / ticks / txns)) "$tps"
done
