-- +goose Up
-- The triggers of 00040/00041 added every decision to its rollup rows in
-- the decision's own transaction: a few rows per day and kind that every
-- concurrent decision updated, so decisions queued on their row locks,
-- each holding them until its commit was flushed. At 16 concurrent tasks
-- the decision statement waited 40 ms on average. Here the triggers only
-- append a delta row (an insert takes no lock another decision waits
-- for), and gatehouse_analytics_fold moves the deltas into the rollups:
-- before every report (so a report counts every decision committed before
-- it) and once a minute (so the deltas stay few).
CREATE TABLE analytics_deltas (
    -- decision: the day it was made; closed: the day the interrupt was
    -- raised; expired, cancelled: the day it closed
    day        date    NOT NULL,
    workflow   text    NOT NULL,
    kind       text    NOT NULL,
    what       text    NOT NULL CHECK (what IN ('decision', 'closed', 'expired', 'cancelled')),
    decider    text    NOT NULL DEFAULT '',
    action     text    NOT NULL DEFAULT '',
    seconds    float8  NOT NULL DEFAULT 0,
    -- an approval (approve, edit): the rejections of its gate since the
    -- gate's previous approval; NULL for other decisions
    rejections integer,
    -- decided within 10 seconds of the decider's first view
    fast       integer NOT NULL DEFAULT 0
);

-- gatehouse_hist_add adds two histograms element by element.
-- +goose StatementBegin
CREATE FUNCTION gatehouse_hist_add(a integer[], b integer[]) RETURNS integer[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT array_agg(coalesce(x, 0) + coalesce(y, 0) ORDER BY i) FROM unnest(a, b) WITH ORDINALITY AS t (x, y, i)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION gatehouse_analytics_decision() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    itr    interrupts%ROWTYPE;
    v_wf   text;
    v_secs float8;
    v_seen timestamptz;
    v_fast integer := 0;
    v_rej  integer;
BEGIN
    SELECT * INTO itr FROM interrupts WHERE id = NEW.interrupt_id;
    SELECT workflow INTO v_wf FROM tasks WHERE id = NEW.task_id;
    v_secs := greatest(extract(epoch FROM NEW.decided_at - itr.created_at)::float8, 0);
    SELECT first_viewed_at INTO v_seen FROM interrupt_views
    WHERE interrupt_id = NEW.interrupt_id AND viewer = NEW.decided_by;
    IF v_seen IS NOT NULL AND NEW.decided_at - v_seen <= interval '10 seconds' THEN
        v_fast := 1;
    END IF;
    IF NEW.action IN ('approve', 'edit') THEN
        SELECT count(*) INTO v_rej
        FROM decisions d JOIN interrupts i ON i.id = d.interrupt_id
        WHERE d.task_id = NEW.task_id AND i.node = itr.node AND d.action = 'reject' AND d.id <> NEW.id
          AND d.decided_at > coalesce((
                SELECT max(d2.decided_at) FROM decisions d2 JOIN interrupts i2 ON i2.id = d2.interrupt_id
                WHERE d2.task_id = NEW.task_id AND i2.node = itr.node AND d2.action IN ('approve', 'edit')
                  AND d2.id <> NEW.id), '-infinity');
    END IF;
    INSERT INTO analytics_deltas (day, workflow, kind, what, decider, action, seconds, rejections, fast)
    VALUES ((NEW.decided_at AT TIME ZONE 'UTC')::date, coalesce(v_wf, ''), itr.kind, 'decision', NEW.decided_by,
            NEW.action, v_secs, v_rej, v_fast);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION gatehouse_analytics_interrupt_closed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_wf text;
BEGIN
    SELECT workflow INTO v_wf FROM tasks WHERE id = NEW.task_id;
    v_wf := coalesce(v_wf, '');
    INSERT INTO analytics_deltas (day, workflow, kind, what)
    VALUES ((NEW.created_at AT TIME ZONE 'UTC')::date, v_wf, NEW.kind, 'closed');
    IF NEW.status IN ('expired', 'cancelled') THEN
        INSERT INTO analytics_deltas (day, workflow, kind, what)
        VALUES ((coalesce(NEW.resolved_at, now()) AT TIME ZONE 'UTC')::date, v_wf, NEW.kind, NEW.status);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- gatehouse_analytics_fold moves every delta into the rollups, one folder
-- at a time (a second waits for the first, then folds what is left), and
-- returns how many it moved. Rollup rows are written in key order.
-- +goose StatementBegin
CREATE FUNCTION gatehouse_analytics_fold() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_moved integer;
BEGIN
    PERFORM pg_advisory_xact_lock(7166824916284798837);
    WITH moved AS (
        DELETE FROM analytics_deltas RETURNING *
    ), i AS (
        INSERT INTO analytics_interrupts AS a (day, workflow, kind, closed, expired, cancelled)
        SELECT day, workflow, kind, count(*) FILTER (WHERE what = 'closed'), count(*) FILTER (WHERE what = 'expired'),
               count(*) FILTER (WHERE what = 'cancelled')
        FROM moved WHERE what <> 'decision'
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (day, workflow, kind) DO UPDATE
            SET closed = a.closed + excluded.closed, expired = a.expired + excluded.expired,
                cancelled = a.cancelled + excluded.cancelled
    ), k AS (
        INSERT INTO analytics_kind_days AS a (day, workflow, kind, approved, rejected, edited, answered, max_seconds, hist)
        SELECT day, workflow, kind, sum(approved), sum(rejected), sum(edited), sum(answered), max(max_seconds),
               gatehouse_hist(array_agg(code), array_agg(n), 1000)
        FROM (
            SELECT day, workflow, kind, gatehouse_duration_code(seconds)::int AS code, count(*)::int AS n,
                   count(*) FILTER (WHERE action = 'approve') AS approved, count(*) FILTER (WHERE action = 'reject') AS rejected,
                   count(*) FILTER (WHERE action = 'edit') AS edited, count(*) FILTER (WHERE action = 'respond') AS answered,
                   max(seconds) AS max_seconds
            FROM moved WHERE what = 'decision'
            GROUP BY 1, 2, 3, 4
        ) x
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (day, workflow, kind) DO UPDATE
            SET approved = a.approved + excluded.approved, rejected = a.rejected + excluded.rejected,
                edited = a.edited + excluded.edited, answered = a.answered + excluded.answered,
                max_seconds = greatest(a.max_seconds, excluded.max_seconds), hist = gatehouse_hist_add(a.hist, excluded.hist)
    ), p AS (
        INSERT INTO analytics_approvals AS a (day, workflow, kind, rejections, n)
        SELECT day, workflow, kind, rejections, count(*)
        FROM moved WHERE what = 'decision' AND rejections IS NOT NULL
        GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (day, workflow, kind, rejections) DO UPDATE SET n = a.n + excluded.n
    ), d AS (
        INSERT INTO analytics_decider_days AS a (day, workflow, kind, decider, decisions, approvals, rejections, fast, hist)
        SELECT day, workflow, kind, decider, sum(n), sum(approvals), sum(rejections), sum(fast),
               gatehouse_hist(array_agg(code), array_agg(n), 100)
        FROM (
            SELECT day, workflow, kind, decider, gatehouse_duration_code1(seconds)::int AS code, count(*)::int AS n,
                   count(*) FILTER (WHERE action IN ('approve', 'edit')) AS approvals,
                   count(*) FILTER (WHERE action = 'reject') AS rejections, sum(fast) AS fast
            FROM moved WHERE what = 'decision'
            GROUP BY 1, 2, 3, 4, 5
        ) x
        GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (day, workflow, kind, decider) DO UPDATE
            SET decisions = a.decisions + excluded.decisions, approvals = a.approvals + excluded.approvals,
                rejections = a.rejections + excluded.rejections, fast = a.fast + excluded.fast,
                hist = gatehouse_hist_add(a.hist, excluded.hist)
    )
    -- (every data-modifying WITH runs to completion, read or not)
    SELECT count(*) FROM moved INTO v_moved;
    RETURN v_moved;
END
$$;
-- +goose StatementEnd

-- The rebuild recomputes the rollups from the raw tables: the deltas are
-- in what it reads, so it drops them (under the folders' lock).
-- (in a DO block: sqlc's schema reader does not know ALTER FUNCTION … RENAME)
DO $$ BEGIN ALTER FUNCTION gatehouse_analytics_rebuild() RENAME TO gatehouse_analytics_rebuild_rollups; END $$;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION gatehouse_analytics_rebuild() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7166824916284798837);
    TRUNCATE analytics_deltas;
    PERFORM gatehouse_analytics_rebuild_rollups();
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION gatehouse_analytics_rebuild();
ALTER FUNCTION gatehouse_analytics_rebuild_rollups() RENAME TO gatehouse_analytics_rebuild;
SELECT gatehouse_analytics_fold();
DROP FUNCTION gatehouse_analytics_fold();
DROP FUNCTION gatehouse_hist_add(integer[], integer[]);
DROP TABLE analytics_deltas;
-- The triggers' functions as 00041 and 00040 left them.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION gatehouse_analytics_decision() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    itr    interrupts%ROWTYPE;
    v_wf   text;
    v_secs float8;
    v_seen timestamptz;
    v_fast integer := 0;
    v_rej  integer;
    v_day  date := (NEW.decided_at AT TIME ZONE 'UTC')::date;
    v_appr boolean := NEW.action IN ('approve', 'edit');
    v_i    integer;
    v_j    integer;
    v_h    integer[];
BEGIN
    SELECT * INTO itr FROM interrupts WHERE id = NEW.interrupt_id;
    SELECT workflow INTO v_wf FROM tasks WHERE id = NEW.task_id;
    v_wf := coalesce(v_wf, '');
    v_secs := greatest(extract(epoch FROM NEW.decided_at - itr.created_at)::float8, 0);
    SELECT first_viewed_at INTO v_seen FROM interrupt_views
    WHERE interrupt_id = NEW.interrupt_id AND viewer = NEW.decided_by;
    IF v_seen IS NOT NULL AND NEW.decided_at - v_seen <= interval '10 seconds' THEN
        v_fast := 1;
    END IF;

    v_i := least(gatehouse_duration_code(v_secs), 999) + 1;
    v_h := array_fill(0, ARRAY[1000]);
    v_h[v_i] := 1;
    INSERT INTO analytics_kind_days AS a (day, workflow, kind, approved, rejected, edited, answered, max_seconds, hist)
    VALUES (v_day, v_wf, itr.kind, (NEW.action = 'approve')::int, (NEW.action = 'reject')::int,
            (NEW.action = 'edit')::int, (NEW.action = 'respond')::int, v_secs, v_h)
    ON CONFLICT (day, workflow, kind) DO UPDATE
        SET approved = a.approved + excluded.approved, rejected = a.rejected + excluded.rejected,
            edited = a.edited + excluded.edited, answered = a.answered + excluded.answered,
            max_seconds = greatest(a.max_seconds, excluded.max_seconds), hist[v_i] = a.hist[v_i] + 1;

    IF v_appr THEN
        SELECT count(*) INTO v_rej
        FROM decisions d JOIN interrupts i ON i.id = d.interrupt_id
        WHERE d.task_id = NEW.task_id AND i.node = itr.node AND d.action = 'reject' AND d.id <> NEW.id
          AND d.decided_at > coalesce((
                SELECT max(d2.decided_at) FROM decisions d2 JOIN interrupts i2 ON i2.id = d2.interrupt_id
                WHERE d2.task_id = NEW.task_id AND i2.node = itr.node AND d2.action IN ('approve', 'edit')
                  AND d2.id <> NEW.id), '-infinity');
        INSERT INTO analytics_approvals AS a (day, workflow, kind, rejections, n)
        VALUES (v_day, v_wf, itr.kind, v_rej, 1)
        ON CONFLICT (day, workflow, kind, rejections) DO UPDATE SET n = a.n + 1;
    END IF;

    v_j := least(gatehouse_duration_code1(v_secs), 99) + 1;
    v_h := array_fill(0, ARRAY[100]);
    v_h[v_j] := 1;
    INSERT INTO analytics_decider_days AS a (day, workflow, kind, decider, decisions, approvals, rejections, fast, hist)
    VALUES (v_day, v_wf, itr.kind, NEW.decided_by, 1, v_appr::int, (NEW.action = 'reject')::int, v_fast, v_h)
    ON CONFLICT (day, workflow, kind, decider) DO UPDATE
        SET decisions = a.decisions + 1, approvals = a.approvals + excluded.approvals,
            rejections = a.rejections + excluded.rejections, fast = a.fast + excluded.fast,
            hist[v_j] = a.hist[v_j] + 1;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION gatehouse_analytics_interrupt_closed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_wf     text;
    v_closed date := (coalesce(NEW.resolved_at, now()) AT TIME ZONE 'UTC')::date;
BEGIN
    SELECT workflow INTO v_wf FROM tasks WHERE id = NEW.task_id;
    v_wf := coalesce(v_wf, '');
    INSERT INTO analytics_interrupts AS a (day, workflow, kind, closed)
    VALUES ((NEW.created_at AT TIME ZONE 'UTC')::date, v_wf, NEW.kind, 1)
    ON CONFLICT (day, workflow, kind) DO UPDATE SET closed = a.closed + 1;
    IF NEW.status IN ('expired', 'cancelled') THEN
        INSERT INTO analytics_interrupts AS a (day, workflow, kind, expired, cancelled)
        VALUES (v_closed, v_wf, NEW.kind, (NEW.status = 'expired')::int, (NEW.status = 'cancelled')::int)
        ON CONFLICT (day, workflow, kind) DO UPDATE
            SET expired = a.expired + excluded.expired, cancelled = a.cancelled + excluded.cancelled;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
