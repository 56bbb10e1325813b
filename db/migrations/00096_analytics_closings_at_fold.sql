-- +goose Up
-- A decided interrupt's "closed" figure was worked out by the interrupts
-- trigger in the decision's own transaction: the task's workflow read and
-- a delta row written, on the approval round trip's critical path (the
-- trigger was a quarter of DecisionRecord's time: 109 of 426 µs with
-- auto_explain, 1 task). Only a decision resolves an interrupt
-- (DecisionRecord), and every decision is queued for the fold already
-- (00095): the fold now writes the closing of each queued decision's
-- interrupt when that interrupt was resolved by it. The trigger keeps the
-- closings no decision makes: expired and cancelled interrupts (an
-- approval on timeout expires its interrupt first, so its system decision
-- adds no second closing).
DROP TRIGGER interrupts_analytics ON interrupts;
CREATE TRIGGER interrupts_analytics AFTER UPDATE OF status ON interrupts
    FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status IN ('expired', 'cancelled'))
    EXECUTE FUNCTION gatehouse_analytics_interrupt_closed();

-- gatehouse_analytics_decision_deltas: as 00095's, plus the closing of
-- each resolved interrupt (the day it was raised, as the trigger wrote it).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION gatehouse_analytics_decision_deltas() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_n integer;
BEGIN
    WITH q AS (
        DELETE FROM analytics_decision_queue RETURNING decision_id
    ), r AS (
        SELECT d.*, i.kind AS i_kind, i.node AS i_node, i.created_at AS i_created_at, i.status AS i_status,
               coalesce(t.workflow, '') AS workflow,
               CASE WHEN d.decided_at - v.first_viewed_at <= interval '10 seconds' THEN 1 ELSE 0 END AS fast
        FROM q
        JOIN decisions d ON d.id = q.decision_id
        JOIN interrupts i ON i.id = d.interrupt_id
        LEFT JOIN tasks t ON t.id = d.task_id
        LEFT JOIN interrupt_views v ON v.interrupt_id = d.interrupt_id AND v.viewer = d.decided_by
    ), c AS (
        INSERT INTO analytics_deltas (day, workflow, kind, what)
        SELECT (r.i_created_at AT TIME ZONE 'UTC')::date, r.workflow, r.i_kind, 'closed'
        FROM r WHERE r.i_status = 'resolved'
    ), x AS (
        INSERT INTO analytics_deltas (day, workflow, kind, what, decider, action, seconds, rejections, fast)
        SELECT (r.decided_at AT TIME ZONE 'UTC')::date, r.workflow, r.i_kind, 'decision', r.decided_by,
               r.action, greatest(extract(epoch FROM r.decided_at - r.i_created_at)::float8, 0),
               CASE WHEN r.action IN ('approve', 'edit') THEN (
                   SELECT count(*)::int FROM decisions rj JOIN interrupts ri ON ri.id = rj.interrupt_id
                   WHERE rj.task_id = r.task_id AND ri.node = r.i_node AND rj.action = 'reject' AND rj.id <> r.id
                     AND rj.decided_at <= r.decided_at
                     AND rj.decided_at > coalesce((
                           SELECT a.decided_at FROM decisions a JOIN interrupts ai ON ai.id = a.interrupt_id
                           WHERE a.task_id = r.task_id AND ai.node = r.i_node AND a.action IN ('approve', 'edit')
                             AND a.id <> r.id AND a.decided_at <= r.decided_at
                           ORDER BY a.decided_at DESC LIMIT 1), '-infinity'))
               END,
               r.fast
        FROM r
        RETURNING 1
    )
    SELECT count(*) FROM x INTO v_n;
    RETURN v_n;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- The closings of the decisions still queued become deltas now: the
-- trigger put back below writes them at the decision, not at the fold.
SELECT pg_advisory_xact_lock(7166824916284798837);
INSERT INTO analytics_deltas (day, workflow, kind, what)
SELECT (i.created_at AT TIME ZONE 'UTC')::date, coalesce(t.workflow, ''), i.kind, 'closed'
FROM analytics_decision_queue q
JOIN decisions d ON d.id = q.decision_id
JOIN interrupts i ON i.id = d.interrupt_id AND i.status = 'resolved'
LEFT JOIN tasks t ON t.id = d.task_id;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION gatehouse_analytics_decision_deltas() RETURNS integer
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

DROP TRIGGER interrupts_analytics ON interrupts;
CREATE TRIGGER interrupts_analytics AFTER UPDATE OF status ON interrupts
    FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status <> 'pending')
    EXECUTE FUNCTION gatehouse_analytics_interrupt_closed();
