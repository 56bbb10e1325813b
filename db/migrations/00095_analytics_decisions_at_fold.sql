-- +goose Up
-- The decision trigger of 00080/00083 worked a decision's analytics out in
-- the decision's own transaction, on the approval round trip's critical
-- path: the interrupt row read again, the task's workflow, the decider's
-- first view, and for an approval a walk back through the task's
-- decisions to count the gate's rejections (on a cached plan made while
-- the tables were small, a scan of every decision: 0.6 ms of the 1.2 ms
-- DecisionRecord at 1,500 decisions, pg_stat_statements). The decision is
-- all it needs: the trigger now queues the decision's id, and
-- gatehouse_analytics_fold works the figures out from the raw rows when
-- it folds (before every report, and once a minute), as the rebuild does.
-- Nothing the figures read changes after the decision: an interrupt's
-- kind and created_at, the task's workflow, the decision itself, and an
-- earlier decision of the task are never updated (a view recorded after
-- the decision counts as the rebuild and the drill-down count it).
CREATE TABLE analytics_decision_queue (
    decision_id uuid NOT NULL
);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION gatehouse_analytics_decision() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO analytics_decision_queue (decision_id) VALUES (NEW.id);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- (in a DO block: sqlc's schema reader does not know ALTER FUNCTION … RENAME)
DO $$ BEGIN ALTER FUNCTION gatehouse_analytics_fold() RENAME TO gatehouse_analytics_fold_deltas; END $$;

-- gatehouse_analytics_decision_deltas turns the queued decisions into
-- delta rows, with the figures the trigger of 00083 computed: the day,
-- the workflow, the kind, the time to decision, whether the decider had
-- opened the interrupt at most 10 s before (the rebuild's test), and for
-- an approval the gate's rejections since its previous approval (the
-- task's decisions at the gate, walked back from the approval along
-- decisions_task_idx to the previous approval). Returns how many it
-- turned. The caller holds the folders' lock.
-- +goose StatementBegin
CREATE FUNCTION gatehouse_analytics_decision_deltas() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_n integer;
BEGIN
    WITH q AS (
        DELETE FROM analytics_decision_queue RETURNING decision_id
    ), x AS (
        INSERT INTO analytics_deltas (day, workflow, kind, what, decider, action, seconds, rejections, fast)
        SELECT (d.decided_at AT TIME ZONE 'UTC')::date, coalesce(t.workflow, ''), i.kind, 'decision', d.decided_by,
               d.action, greatest(extract(epoch FROM d.decided_at - i.created_at)::float8, 0),
               CASE WHEN d.action IN ('approve', 'edit') THEN (
                   SELECT count(*)::int FROM decisions r JOIN interrupts ri ON ri.id = r.interrupt_id
                   WHERE r.task_id = d.task_id AND ri.node = i.node AND r.action = 'reject' AND r.id <> d.id
                     AND r.decided_at <= d.decided_at
                     AND r.decided_at > coalesce((
                           SELECT a.decided_at FROM decisions a JOIN interrupts ai ON ai.id = a.interrupt_id
                           WHERE a.task_id = d.task_id AND ai.node = i.node AND a.action IN ('approve', 'edit')
                             AND a.id <> d.id AND a.decided_at <= d.decided_at
                           ORDER BY a.decided_at DESC LIMIT 1), '-infinity'))
               END,
               CASE WHEN d.decided_at - v.first_viewed_at <= interval '10 seconds' THEN 1 ELSE 0 END
        FROM q
        JOIN decisions d ON d.id = q.decision_id
        JOIN interrupts i ON i.id = d.interrupt_id
        LEFT JOIN tasks t ON t.id = d.task_id
        LEFT JOIN interrupt_views v ON v.interrupt_id = d.interrupt_id AND v.viewer = d.decided_by
        RETURNING 1
    )
    SELECT count(*) FROM x INTO v_n;
    RETURN v_n;
END
$$;
-- +goose StatementEnd

-- gatehouse_analytics_fold: as 00080's (now gatehouse_analytics_fold_deltas),
-- after turning the queued decisions into deltas; it returns how many
-- decisions and closings it moved.
-- (OR REPLACE: sqlc's schema reader does not see the rename)
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION gatehouse_analytics_fold() RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7166824916284798837);
    PERFORM gatehouse_analytics_decision_deltas();
    RETURN gatehouse_analytics_fold_deltas();
END
$$;
-- +goose StatementEnd

-- The rebuild reads the raw tables: it drops the queue with the deltas.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION gatehouse_analytics_rebuild() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7166824916284798837);
    TRUNCATE analytics_deltas, analytics_decision_queue;
    PERFORM gatehouse_analytics_rebuild_rollups();
END
$$;
-- +goose StatementEnd

-- +goose Down
-- The queued decisions become deltas before the queue goes.
SELECT pg_advisory_xact_lock(7166824916284798837);
SELECT gatehouse_analytics_decision_deltas();

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

DROP FUNCTION gatehouse_analytics_fold();
DROP FUNCTION gatehouse_analytics_decision_deltas();
DO $$ BEGIN ALTER FUNCTION gatehouse_analytics_fold_deltas() RENAME TO gatehouse_analytics_fold; END $$;

-- The trigger's function as 00083 left it.
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
    v_act  text;
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
        -- The gate's rejections since its previous approval: walk the
        -- task's decisions back from this one and stop at that approval.
        v_rej := 0;
        FOR v_act IN
            SELECT d.action FROM decisions d JOIN interrupts i ON i.id = d.interrupt_id
            WHERE d.task_id = NEW.task_id AND i.node = itr.node AND d.id <> NEW.id AND d.decided_at <= NEW.decided_at
            ORDER BY d.decided_at DESC
        LOOP
            EXIT WHEN v_act IN ('approve', 'edit');
            IF v_act = 'reject' THEN
                v_rej := v_rej + 1;
            END IF;
        END LOOP;
    END IF;
    INSERT INTO analytics_deltas (day, workflow, kind, what, decider, action, seconds, rejections, fast)
    VALUES ((NEW.decided_at AT TIME ZONE 'UTC')::date, coalesce(v_wf, ''), itr.kind, 'decision', NEW.decided_by,
            NEW.action, v_secs, v_rej, v_fast);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

DROP TABLE analytics_decision_queue;
