-- +goose Up
-- The rollups of 00040 kept one row per duration code: on a history of a
-- million decisions over 90 days that was about 570,000 rows to group at
-- every report (most of them a decider's day of a kind), and the report
-- took seconds. Here a day of a kind (of a decider) is one row and its
-- histogram an array indexed by code: 630 rows and 25,000 rows for that
-- history, summed in Go. The arrays compress well (mostly zeros), and a
-- decision updates one element of each.

-- Decisions by the day they were made: counts by action, the longest
-- time to decision, and hist[code + 1] decisions per duration code
-- (gatehouse_duration_code, two significant digits; codes past 999 count
-- as 999, about 2.8 years).
CREATE TABLE analytics_kind_days (
    day         date      NOT NULL,
    workflow    text      NOT NULL,
    kind        text      NOT NULL,
    approved    integer   NOT NULL DEFAULT 0,
    rejected    integer   NOT NULL DEFAULT 0,
    edited      integer   NOT NULL DEFAULT 0,
    answered    integer   NOT NULL DEFAULT 0,
    max_seconds float8    NOT NULL DEFAULT 0,
    hist        integer[] NOT NULL,
    PRIMARY KEY (day, workflow, kind)
);

-- Decisions by decider and day, with hist[code + 1] per one-digit code
-- (gatehouse_duration_code1; past 99, about 31 years, as 99).
CREATE TABLE analytics_decider_days (
    day        date      NOT NULL,
    workflow   text      NOT NULL,
    kind       text      NOT NULL,
    decider    text      NOT NULL,
    decisions  integer   NOT NULL DEFAULT 0,
    approvals  integer   NOT NULL DEFAULT 0,
    rejections integer   NOT NULL DEFAULT 0,
    fast       integer   NOT NULL DEFAULT 0,
    hist       integer[] NOT NULL,
    PRIMARY KEY (day, workflow, kind, decider)
);

-- gatehouse_hist builds a histogram array of size n from codes and their
-- counts (the rebuild's aggregate).
-- +goose StatementBegin
CREATE FUNCTION gatehouse_hist(codes integer[], counts integer[], n integer) RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    h integer[] := array_fill(0, ARRAY[n]);
    i integer;
BEGIN
    FOR i IN 1 .. coalesce(array_length(codes, 1), 0) LOOP
        h[least(codes[i], n - 1) + 1] := h[least(codes[i], n - 1) + 1] + counts[i];
    END LOOP;
    RETURN h;
END
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
CREATE OR REPLACE FUNCTION gatehouse_analytics_rebuild() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
TRUNCATE analytics_interrupts, analytics_kind_days, analytics_approvals, analytics_decider_days;
INSERT INTO analytics_interrupts (day, workflow, kind, closed)
SELECT (i.created_at AT TIME ZONE 'UTC')::date, t.workflow, i.kind, count(*)
FROM interrupts i JOIN tasks t ON t.id = i.task_id
WHERE i.status <> 'pending'
GROUP BY 1, 2, 3;

INSERT INTO analytics_interrupts AS a (day, workflow, kind, expired, cancelled)
SELECT (coalesce(i.resolved_at, i.created_at) AT TIME ZONE 'UTC')::date, t.workflow, i.kind,
       count(*) FILTER (WHERE i.status = 'expired'), count(*) FILTER (WHERE i.status = 'cancelled')
FROM interrupts i JOIN tasks t ON t.id = i.task_id
WHERE i.status IN ('expired', 'cancelled')
GROUP BY 1, 2, 3
ON CONFLICT (day, workflow, kind) DO UPDATE SET expired = excluded.expired, cancelled = excluded.cancelled;

INSERT INTO analytics_kind_days (day, workflow, kind, approved, rejected, edited, answered, max_seconds, hist)
SELECT day, workflow, kind, sum(approved), sum(rejected), sum(edited), sum(answered), max(max_seconds),
       gatehouse_hist(array_agg(code), array_agg(n), 1000)
FROM (
    SELECT (d.decided_at AT TIME ZONE 'UTC')::date AS day, t.workflow, i.kind,
           gatehouse_duration_code(greatest(extract(epoch FROM d.decided_at - i.created_at)::float8, 0))::int AS code,
           count(*)::int AS n,
           count(*) FILTER (WHERE d.action = 'approve') AS approved, count(*) FILTER (WHERE d.action = 'reject') AS rejected,
           count(*) FILTER (WHERE d.action = 'edit') AS edited, count(*) FILTER (WHERE d.action = 'respond') AS answered,
           max(greatest(extract(epoch FROM d.decided_at - i.created_at)::float8, 0)) AS max_seconds
    FROM decisions d JOIN interrupts i ON i.id = d.interrupt_id JOIN tasks t ON t.id = d.task_id
    GROUP BY 1, 2, 3, 4
) x
GROUP BY 1, 2, 3;

INSERT INTO analytics_approvals (day, workflow, kind, rejections, n)
SELECT day, workflow, kind, rejections, count(*)
FROM (
    SELECT (d.decided_at AT TIME ZONE 'UTC')::date AS day, t.workflow, i.kind,
           (SELECT count(*) FROM decisions r JOIN interrupts ri ON ri.id = r.interrupt_id
            WHERE r.task_id = d.task_id AND ri.node = i.node AND r.action = 'reject' AND r.decided_at < d.decided_at
              AND r.decided_at > coalesce((
                    SELECT max(a.decided_at) FROM decisions a JOIN interrupts ai ON ai.id = a.interrupt_id
                    WHERE a.task_id = d.task_id AND ai.node = i.node AND a.action IN ('approve', 'edit')
                      AND a.decided_at < d.decided_at), '-infinity'))::int AS rejections
    FROM decisions d JOIN interrupts i ON i.id = d.interrupt_id JOIN tasks t ON t.id = d.task_id
    WHERE d.action IN ('approve', 'edit')
) x
GROUP BY 1, 2, 3, 4;

INSERT INTO analytics_decider_days (day, workflow, kind, decider, decisions, approvals, rejections, fast, hist)
SELECT day, workflow, kind, decider, sum(n), sum(approvals), sum(rejections), sum(fast),
       gatehouse_hist(array_agg(code), array_agg(n), 100)
FROM (
    SELECT (d.decided_at AT TIME ZONE 'UTC')::date AS day, t.workflow, i.kind, d.decided_by AS decider,
           gatehouse_duration_code1(greatest(extract(epoch FROM d.decided_at - i.created_at)::float8, 0))::int AS code,
           count(*)::int AS n, count(*) FILTER (WHERE d.action IN ('approve', 'edit')) AS approvals,
           count(*) FILTER (WHERE d.action = 'reject') AS rejections,
           count(*) FILTER (WHERE d.decided_at - v.first_viewed_at <= interval '10 seconds') AS fast
    FROM decisions d JOIN interrupts i ON i.id = d.interrupt_id JOIN tasks t ON t.id = d.task_id
    LEFT JOIN interrupt_views v ON v.interrupt_id = d.interrupt_id AND v.viewer = d.decided_by
    GROUP BY 1, 2, 3, 4, 5
) x
GROUP BY 1, 2, 3, 4;
END
$$;
-- +goose StatementEnd

DROP TABLE analytics_decisions;
DROP TABLE analytics_deciders;
SELECT gatehouse_analytics_rebuild();

-- +goose Down
-- Decisions by the day they were made, action and time to decision (code).
CREATE TABLE analytics_decisions (
    day         date     NOT NULL,
    workflow    text     NOT NULL,
    kind        text     NOT NULL,
    code        smallint NOT NULL,
    approved    integer  NOT NULL DEFAULT 0,
    rejected    integer  NOT NULL DEFAULT 0,
    edited      integer  NOT NULL DEFAULT 0,
    answered    integer  NOT NULL DEFAULT 0,
    max_seconds float8   NOT NULL DEFAULT 0,
    PRIMARY KEY (day, workflow, kind, code)
);

-- Decisions by decider, with a coarse histogram of their time to decision.
CREATE TABLE analytics_deciders (
    day        date     NOT NULL,
    workflow   text     NOT NULL,
    kind       text     NOT NULL,
    decider    text     NOT NULL,
    code       smallint NOT NULL,
    decisions  integer  NOT NULL DEFAULT 0,
    approvals  integer  NOT NULL DEFAULT 0,
    rejections integer  NOT NULL DEFAULT 0,
    fast       integer  NOT NULL DEFAULT 0,
    PRIMARY KEY (day, workflow, kind, decider, code)
);

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

    INSERT INTO analytics_decisions AS a (day, workflow, kind, code, approved, rejected, edited, answered, max_seconds)
    VALUES (v_day, v_wf, itr.kind, gatehouse_duration_code(v_secs), (NEW.action = 'approve')::int,
            (NEW.action = 'reject')::int, (NEW.action = 'edit')::int, (NEW.action = 'respond')::int, v_secs)
    ON CONFLICT (day, workflow, kind, code) DO UPDATE
        SET approved = a.approved + excluded.approved, rejected = a.rejected + excluded.rejected,
            edited = a.edited + excluded.edited, answered = a.answered + excluded.answered,
            max_seconds = greatest(a.max_seconds, excluded.max_seconds);

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

    INSERT INTO analytics_deciders AS a (day, workflow, kind, decider, code, decisions, approvals, rejections, fast)
    VALUES (v_day, v_wf, itr.kind, NEW.decided_by, gatehouse_duration_code1(v_secs), 1, v_appr::int,
            (NEW.action = 'reject')::int, v_fast)
    ON CONFLICT (day, workflow, kind, decider, code) DO UPDATE
        SET decisions = a.decisions + 1, approvals = a.approvals + excluded.approvals,
            rejections = a.rejections + excluded.rejections, fast = a.fast + excluded.fast;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION gatehouse_analytics_rebuild() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
TRUNCATE analytics_interrupts, analytics_decisions, analytics_approvals, analytics_deciders;
INSERT INTO analytics_interrupts (day, workflow, kind, closed)
SELECT (i.created_at AT TIME ZONE 'UTC')::date, t.workflow, i.kind, count(*)
FROM interrupts i JOIN tasks t ON t.id = i.task_id
WHERE i.status <> 'pending'
GROUP BY 1, 2, 3;

INSERT INTO analytics_interrupts AS a (day, workflow, kind, expired, cancelled)
SELECT (coalesce(i.resolved_at, i.created_at) AT TIME ZONE 'UTC')::date, t.workflow, i.kind,
       count(*) FILTER (WHERE i.status = 'expired'), count(*) FILTER (WHERE i.status = 'cancelled')
FROM interrupts i JOIN tasks t ON t.id = i.task_id
WHERE i.status IN ('expired', 'cancelled')
GROUP BY 1, 2, 3
ON CONFLICT (day, workflow, kind) DO UPDATE SET expired = excluded.expired, cancelled = excluded.cancelled;

INSERT INTO analytics_decisions (day, workflow, kind, code, approved, rejected, edited, answered, max_seconds)
SELECT (d.decided_at AT TIME ZONE 'UTC')::date, t.workflow, i.kind,
       gatehouse_duration_code(greatest(extract(epoch FROM d.decided_at - i.created_at)::float8, 0)),
       count(*) FILTER (WHERE d.action = 'approve'), count(*) FILTER (WHERE d.action = 'reject'),
       count(*) FILTER (WHERE d.action = 'edit'), count(*) FILTER (WHERE d.action = 'respond'),
       max(greatest(extract(epoch FROM d.decided_at - i.created_at)::float8, 0))
FROM decisions d JOIN interrupts i ON i.id = d.interrupt_id JOIN tasks t ON t.id = d.task_id
GROUP BY 1, 2, 3, 4;

INSERT INTO analytics_approvals (day, workflow, kind, rejections, n)
SELECT day, workflow, kind, rejections, count(*)
FROM (
    SELECT (d.decided_at AT TIME ZONE 'UTC')::date AS day, t.workflow, i.kind,
           (SELECT count(*) FROM decisions r JOIN interrupts ri ON ri.id = r.interrupt_id
            WHERE r.task_id = d.task_id AND ri.node = i.node AND r.action = 'reject' AND r.decided_at < d.decided_at
              AND r.decided_at > coalesce((
                    SELECT max(a.decided_at) FROM decisions a JOIN interrupts ai ON ai.id = a.interrupt_id
                    WHERE a.task_id = d.task_id AND ai.node = i.node AND a.action IN ('approve', 'edit')
                      AND a.decided_at < d.decided_at), '-infinity'))::int AS rejections
    FROM decisions d JOIN interrupts i ON i.id = d.interrupt_id JOIN tasks t ON t.id = d.task_id
    WHERE d.action IN ('approve', 'edit')
) x
GROUP BY 1, 2, 3, 4;

INSERT INTO analytics_deciders (day, workflow, kind, decider, code, decisions, approvals, rejections, fast)
SELECT (d.decided_at AT TIME ZONE 'UTC')::date, t.workflow, i.kind, d.decided_by,
       gatehouse_duration_code1(greatest(extract(epoch FROM d.decided_at - i.created_at)::float8, 0)),
       count(*), count(*) FILTER (WHERE d.action IN ('approve', 'edit')), count(*) FILTER (WHERE d.action = 'reject'),
       count(*) FILTER (WHERE d.decided_at - v.first_viewed_at <= interval '10 seconds')
FROM decisions d JOIN interrupts i ON i.id = d.interrupt_id JOIN tasks t ON t.id = d.task_id
LEFT JOIN interrupt_views v ON v.interrupt_id = d.interrupt_id AND v.viewer = d.decided_by
GROUP BY 1, 2, 3, 4, 5;
END
$$;
-- +goose StatementEnd

DROP FUNCTION gatehouse_hist(integer[], integer[], integer);
DROP TABLE analytics_decider_days;
DROP TABLE analytics_kind_days;
SELECT gatehouse_analytics_rebuild();
