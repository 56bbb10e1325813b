-- Approval analytics (SPEC §13), read from the rollups of migration 00040.
-- Days are UTC days, since inclusive, until exclusive; an empty kind or
-- workflow matches every one.

-- AnalyticsInterruptDays: per day and kind, the interrupts raised that day
-- that are no longer pending, and those that expired or were cancelled
-- that day.
-- name: AnalyticsInterruptDays :many
SELECT day, kind, sum(closed)::int AS closed, sum(expired)::int AS expired, sum(cancelled)::int AS cancelled
FROM analytics_interrupts
WHERE day >= sqlc.arg(since)::date AND day < sqlc.arg(until)::date
  AND (sqlc.arg(kind)::text = '' OR kind = sqlc.arg(kind)::text)
  AND (sqlc.arg(workflow)::text = '' OR workflow = sqlc.arg(workflow)::text)
GROUP BY day, kind
ORDER BY day, kind;

-- AnalyticsDecisionDays: per day and kind (one row per workflow: their
-- histograms are summed in Go), the decisions by action, the longest time
-- to decision, and the histogram of duration codes (hist[code + 1]).
-- name: AnalyticsDecisionDays :many
SELECT day, kind, approved, rejected, edited, answered, max_seconds, hist
FROM analytics_kind_days
WHERE day >= sqlc.arg(since)::date AND day < sqlc.arg(until)::date
  AND (sqlc.arg(kind)::text = '' OR kind = sqlc.arg(kind)::text)
  AND (sqlc.arg(workflow)::text = '' OR workflow = sqlc.arg(workflow)::text);

-- AnalyticsApprovals: approvals by kind and the rejections before them.
-- name: AnalyticsApprovals :many
SELECT kind, rejections, sum(n)::int AS n
FROM analytics_approvals
WHERE day >= sqlc.arg(since)::date AND day < sqlc.arg(until)::date
  AND (sqlc.arg(kind)::text = '' OR kind = sqlc.arg(kind)::text)
  AND (sqlc.arg(workflow)::text = '' OR workflow = sqlc.arg(workflow)::text)
GROUP BY kind, rejections
ORDER BY kind, rejections;

-- AnalyticsDeciders: per decider, day, workflow and kind, the decisions
-- and the histogram of one-digit duration codes (hist[code + 1]).
-- name: AnalyticsDeciders :many
SELECT decider, decisions, approvals, rejections, fast, hist
FROM analytics_decider_days
WHERE day >= sqlc.arg(since)::date AND day < sqlc.arg(until)::date
  AND (sqlc.arg(kind)::text = '' OR kind = sqlc.arg(kind)::text)
  AND (sqlc.arg(workflow)::text = '' OR workflow = sqlc.arg(workflow)::text);

-- AnalyticsPending: the interrupts pending now, by kind, the UTC day they
-- were raised and their age band at the report's instant (0: under an
-- hour, 1: under a day, 2: under a week, 3: older), with the oldest one's
-- age in seconds.
-- name: AnalyticsPending :many
SELECT i.kind, (i.created_at AT TIME ZONE 'UTC')::date AS day,
       (CASE WHEN sqlc.arg(now)::timestamptz - i.created_at < interval '1 hour' THEN 0
             WHEN sqlc.arg(now)::timestamptz - i.created_at < interval '1 day' THEN 1
             WHEN sqlc.arg(now)::timestamptz - i.created_at < interval '7 days' THEN 2
             ELSE 3 END)::int AS band,
       count(*)::int AS n,
       max(greatest(extract(epoch FROM sqlc.arg(now)::timestamptz - i.created_at), 0))::float8 AS oldest_seconds
FROM interrupts i
JOIN tasks t ON t.id = i.task_id
WHERE i.status = 'pending'
  AND (sqlc.arg(kind)::text = '' OR i.kind = sqlc.arg(kind)::text)
  AND (sqlc.arg(workflow)::text = '' OR t.workflow = sqlc.arg(workflow)::text)
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3;

-- InterruptPendingStats: per kind, the pending interrupts and the age of the
-- oldest (the gauges of /metrics; the database's clock, the same on every
-- replica).
-- name: InterruptPendingStats :many
SELECT kind, count(*)::int AS pending,
       max(greatest(extract(epoch FROM now() - created_at), 0))::float8 AS oldest_seconds
FROM interrupts
WHERE status = 'pending'
GROUP BY kind
ORDER BY kind;

-- InterruptViewRecord records the first time a person opened an interrupt;
-- later openings change nothing. The database's clock, as decided_at's:
-- the 10 s of the rubber-stamp flag compare two readings of one clock.
-- name: InterruptViewRecord :exec
INSERT INTO interrupt_views (interrupt_id, viewer, first_viewed_at)
VALUES (sqlc.arg(interrupt_id)::uuid, sqlc.arg(viewer)::text, now())
ON CONFLICT (interrupt_id, viewer) DO NOTHING;

-- AnalyticsRaisedList: the interrupts raised in [since, until), newest
-- first, with their task and decision (the drill-down behind "raised").
-- name: AnalyticsRaisedList :many
SELECT i.id, i.task_id, i.kind, i.node, i.status, i.created_at, t.title, t.workflow,
       d.action AS d_action, d.decided_by AS d_decided_by, d.decided_at AS d_decided_at
FROM interrupts i
JOIN tasks t ON t.id = i.task_id
LEFT JOIN decisions d ON d.interrupt_id = i.id
WHERE i.created_at >= sqlc.arg(since)::timestamptz AND i.created_at < sqlc.arg(until)::timestamptz
  AND (sqlc.arg(kind)::text = '' OR i.kind = sqlc.arg(kind)::text)
  AND (sqlc.arg(workflow)::text = '' OR t.workflow = sqlc.arg(workflow)::text)
  AND (sqlc.arg(status)::text = '' OR i.status = sqlc.arg(status)::text)
ORDER BY i.created_at DESC, i.id DESC
LIMIT sqlc.arg(max_rows)::int;

-- AnalyticsDecisionList: the decisions made in [since, until), newest
-- first, with their interrupt and task; action and decider narrow it, fast
-- keeps those made within 10 s of the decider's first view.
-- name: AnalyticsDecisionList :many
SELECT i.id, i.task_id, i.kind, i.node, i.status, i.created_at, t.title, t.workflow,
       d.action AS d_action, d.decided_by AS d_decided_by, d.decided_at AS d_decided_at
FROM decisions d
JOIN interrupts i ON i.id = d.interrupt_id
JOIN tasks t ON t.id = d.task_id
LEFT JOIN interrupt_views v ON v.interrupt_id = d.interrupt_id AND v.viewer = d.decided_by
WHERE d.decided_at >= sqlc.arg(since)::timestamptz AND d.decided_at < sqlc.arg(until)::timestamptz
  AND (sqlc.arg(kind)::text = '' OR i.kind = sqlc.arg(kind)::text)
  AND (sqlc.arg(workflow)::text = '' OR t.workflow = sqlc.arg(workflow)::text)
  AND (cardinality(sqlc.arg(actions)::text[]) = 0 OR d.action = ANY(sqlc.arg(actions)::text[]))
  AND (sqlc.arg(decider)::text = '' OR d.decided_by = sqlc.arg(decider)::text)
  AND (NOT sqlc.arg(fast)::bool OR d.decided_at - v.first_viewed_at <= interval '10 seconds')
ORDER BY d.decided_at DESC, d.id DESC
LIMIT sqlc.arg(max_rows)::int;

-- AnalyticsClosedList: the interrupts that expired or were cancelled in
-- [since, until), newest first.
-- name: AnalyticsClosedList :many
SELECT i.id, i.task_id, i.kind, i.node, i.status, i.created_at, t.title, t.workflow, i.resolved_at
FROM interrupts i
JOIN tasks t ON t.id = i.task_id
WHERE i.status = sqlc.arg(status)::text
  AND coalesce(i.resolved_at, i.created_at) >= sqlc.arg(since)::timestamptz
  AND coalesce(i.resolved_at, i.created_at) < sqlc.arg(until)::timestamptz
  AND (sqlc.arg(kind)::text = '' OR i.kind = sqlc.arg(kind)::text)
  AND (sqlc.arg(workflow)::text = '' OR t.workflow = sqlc.arg(workflow)::text)
ORDER BY coalesce(i.resolved_at, i.created_at) DESC, i.id DESC
LIMIT sqlc.arg(max_rows)::int;

-- AnalyticsFold moves the deltas the triggers appended into the rollups
-- (migration 00080); a report folds first, so it counts every decision
-- committed before it.
-- name: AnalyticsFold :one
SELECT gatehouse_analytics_fold()::int AS moved;

-- AnalyticsRuled: the decisions rules of the policy took (decided by
-- policy:<rule>, SPEC §18), by kind, in the period.
-- name: AnalyticsRuled :many
SELECT i.kind, (count(*) FILTER (WHERE d.action = 'approve'))::int AS approved,
       (count(*) FILTER (WHERE d.action = 'reject'))::int AS rejected
FROM decisions d
JOIN interrupts i ON i.id = d.interrupt_id
JOIN tasks t ON t.id = d.task_id
WHERE d.decided_by LIKE 'policy:%'
  AND d.decided_at >= sqlc.arg(since)::timestamptz AND d.decided_at < sqlc.arg(until)::timestamptz
  AND (sqlc.arg(kind)::text = '' OR i.kind = sqlc.arg(kind)::text)
  AND (sqlc.arg(workflow)::text = '' OR t.workflow = sqlc.arg(workflow)::text)
GROUP BY i.kind
ORDER BY i.kind;
