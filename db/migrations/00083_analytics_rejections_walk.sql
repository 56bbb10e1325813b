-- +goose Up
-- The decision trigger counted a gate's rejections since its previous
-- approval with two scans of every decision of the task, on every
-- approval: a task cycling through review for hundreds of rounds paid
-- milliseconds per approval (8 ms measured at 84 decisions), inside the
-- decision's transaction. It now walks back from the newest decision
-- (decisions_task_idx) and stops at the gate's previous approval.
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

-- +goose Down
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
