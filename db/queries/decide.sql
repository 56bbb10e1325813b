-- DecisionSubject is what a decision is about, in one round trip: the task
-- and the interrupt the decision names. The interrupt is looked up by its
-- id alone, so that one of another task is told apart from none; its
-- columns are NULL when no interrupt has that id.
-- name: DecisionSubject :one
SELECT sqlc.embed(t),
       i.id AS i_id, i.task_id AS i_task_id, i.node AS i_node, i.kind AS i_kind, i.iteration AS i_iteration,
       i.payload AS i_payload, i.status AS i_status, i.created_at AS i_created_at, i.resolved_at AS i_resolved_at,
       i.deadline_at AS i_deadline_at, i.overdue AS i_overdue, i.escalation_level AS i_escalation_level,
       i.claimed_by AS i_claimed_by, i.claim_expires_at AS i_claim_expires_at, i.payload_sha256 AS i_payload_sha256
FROM tasks t
LEFT JOIN interrupts i ON i.id = sqlc.narg(interrupt_id)::uuid
WHERE t.id = sqlc.arg(task_id)::uuid;

-- TaskWithPending is a task with the interrupt it waits on, in one round
-- trip and one snapshot (at most one pending interrupt per task:
-- interrupts_one_pending_idx); the interrupt columns are NULL when it waits
-- on none.
-- name: TaskWithPending :one
SELECT sqlc.embed(t),
       i.id AS i_id, i.task_id AS i_task_id, i.node AS i_node, i.kind AS i_kind, i.iteration AS i_iteration,
       i.payload AS i_payload, i.status AS i_status, i.created_at AS i_created_at, i.resolved_at AS i_resolved_at,
       i.deadline_at AS i_deadline_at, i.overdue AS i_overdue, i.escalation_level AS i_escalation_level,
       i.claimed_by AS i_claimed_by, i.claim_expires_at AS i_claim_expires_at, i.payload_sha256 AS i_payload_sha256
FROM tasks t
LEFT JOIN interrupts i ON i.task_id = t.id AND i.status = 'pending'
WHERE t.id = sqlc.arg(task_id)::uuid;
