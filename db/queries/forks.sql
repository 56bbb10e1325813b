-- TaskForkPoint is what a fork copies, in one round trip: the source task,
-- its checkpoint at a step of the history, and the interrupt that
-- checkpoint waited on. The checkpoint columns are NULL when the history
-- holds no such step (never written, or pruned).
-- name: TaskForkPoint :one
SELECT sqlc.embed(t),
       h.step AS h_step, h.reason AS h_reason, h.last_node_id AS h_last_node_id, h.next_node_id AS h_next_node_id,
       h.state AS h_state, h.state_refs AS h_state_refs, sb.keys AS blob_keys, sb.vals AS blob_values,
       h.iterations AS h_iterations, h.answers AS h_answers,
       h.pending_interrupt_id AS h_pending_interrupt_id, h.created_at AS h_created_at,
       i.id AS i_id, i.task_id AS i_task_id, i.node AS i_node, i.kind AS i_kind, i.iteration AS i_iteration,
       i.payload AS i_payload, i.status AS i_status, i.created_at AS i_created_at, i.resolved_at AS i_resolved_at
FROM tasks t
LEFT JOIN checkpoint_history h ON h.task_id = t.id AND h.step = sqlc.arg(step)::int
-- the state's large fields, stored once per task (00050_state_blobs.sql)
LEFT JOIN LATERAL (SELECT array_agg(r.key ORDER BY r.key)::text[] AS keys, array_agg(b.value ORDER BY r.key)::text[] AS vals
                   FROM jsonb_each_text(h.state_refs) r
                   JOIN state_blobs b ON b.task_id = h.task_id AND b.hash = decode(r.value, 'hex')) sb ON true
LEFT JOIN interrupts i ON i.id = h.pending_interrupt_id
WHERE t.id = sqlc.arg(id)::uuid;

-- TaskForks lists the forks of a task, oldest first.
-- name: TaskForks :many
SELECT * FROM tasks
WHERE forked_from_task = sqlc.arg(id)::uuid
ORDER BY created_at, id
LIMIT sqlc.arg(max_rows)::int;

-- TaskResumeCheck lists what `gatehouse tasks check` and serve's start
-- need to tell whether the waiting and failed tasks can resume under the
-- running definitions: where each stands, and the interrupt it waits on.
-- name: TaskResumeCheck :many
SELECT t.id, t.workflow, t.title, t.status, t.definition_version, t.created_at,
       c.next_node_id, i.node AS i_node, COALESCE(i.payload ->> 'type', '')::text AS i_type
FROM tasks t
JOIN workflow_checkpoints c ON c.task_id = t.id
LEFT JOIN interrupts i ON i.task_id = t.id AND i.status = 'pending'
WHERE t.status IN ('waiting', 'failed')
ORDER BY t.created_at, t.id;
