-- TaskSnapshot is everything a run resumes from, in one round trip: the
-- task, its current checkpoint with the blobs of its large fields
-- (blob_keys[i] is the field of blob_values[i]; 00050_state_blobs.sql), and
-- the interrupt the checkpoint waits on with its decision, if any. A blob
-- whose hash is in have (the caller holds its value already) comes as '',
-- which no JSON value is: its row is still joined, so a blob that went
-- missing is still seen, but its value is neither read nor sent.
-- name: TaskSnapshot :one
SELECT t.id, t.workflow, t.title, t.input, t.options, t.status, t.current_node, t.result, t.error,
       t.created_by, t.created_at, t.updated_at, t.completed_at, t.lease_fence,
       c.state, c.last_node_id, c.step, c.next_node_id, c.iterations, c.answers, c.pending_interrupt_id,
       c.updated_at AS checkpoint_updated_at, c.state_refs, sb.keys AS blob_keys, sb.vals AS blob_values,
       i.task_id AS i_task_id, i.node AS i_node, i.kind AS i_kind, i.iteration AS i_iteration,
       i.payload AS i_payload, i.status AS i_status, i.created_at AS i_created_at, i.resolved_at AS i_resolved_at,
       d.id AS d_id, d.action AS d_action, d.feedback AS d_feedback, d.value AS d_value,
       d.decided_by AS d_decided_by, d.decided_at AS d_decided_at
FROM tasks t
JOIN workflow_checkpoints c ON c.task_id = t.id
LEFT JOIN LATERAL (SELECT array_agg(r.key ORDER BY r.key)::text[] AS keys,
                          array_agg(CASE WHEN b.hash = ANY(@have::bytea[]) THEN '' ELSE b.value END ORDER BY r.key)::text[] AS vals
                   FROM jsonb_each_text(c.state_refs) r
                   JOIN state_blobs b ON b.task_id = c.task_id AND b.hash = decode(r.value, 'hex')
                   -- a one-time filter: a state without large fields (most)
                   -- skips the walk and the join
                   WHERE c.state_refs <> '{}'::jsonb) sb ON true
LEFT JOIN interrupts i ON i.id = c.pending_interrupt_id
LEFT JOIN decisions d ON d.interrupt_id = c.pending_interrupt_id
WHERE t.id = @id;

-- TaskRunState is TaskSnapshot without the interrupt and the decision:
-- what a decision that leased the task reads in its own transaction, the
-- rest coming from DecisionRecord's row (a join on interrupts and decisions
-- by the checkpoint's pending id, on a plan cached while they were small,
-- scanned them whole).
-- name: TaskRunState :one
SELECT t.id, t.workflow, t.title, t.input, t.options, t.status, t.current_node, t.result, t.error,
       t.created_by, t.created_at, t.updated_at, t.completed_at, t.lease_fence,
       c.state, c.last_node_id, c.step, c.next_node_id, c.iterations, c.answers, c.pending_interrupt_id,
       c.updated_at AS checkpoint_updated_at, c.state_refs, sb.keys AS blob_keys, sb.vals AS blob_values
FROM tasks t
JOIN workflow_checkpoints c ON c.task_id = t.id
LEFT JOIN LATERAL (SELECT array_agg(r.key ORDER BY r.key)::text[] AS keys,
                          array_agg(CASE WHEN b.hash = ANY(@have::bytea[]) THEN '' ELSE b.value END ORDER BY r.key)::text[] AS vals
                   FROM jsonb_each_text(c.state_refs) r
                   JOIN state_blobs b ON b.task_id = c.task_id AND b.hash = decode(r.value, 'hex')
                   -- a one-time filter, as TaskSnapshot's
                   WHERE c.state_refs <> '{}'::jsonb) sb ON true
WHERE t.id = @id;

-- name: CheckpointHistoryList :many
SELECT task_id, step, reason, last_node_id, next_node_id, created_at
FROM checkpoint_history
WHERE task_id = @task_id
ORDER BY step;


-- name: CheckpointHistoryGet :one
SELECT c.task_id, c.step, c.reason, c.last_node_id, c.next_node_id, c.state, c.created_at,
       c.state_refs, sb.keys AS blob_keys, sb.vals AS blob_values
FROM checkpoint_history c
LEFT JOIN LATERAL (SELECT array_agg(r.key ORDER BY r.key)::text[] AS keys, array_agg(b.value ORDER BY r.key)::text[] AS vals
                   FROM jsonb_each_text(c.state_refs) r
                   JOIN state_blobs b ON b.task_id = c.task_id AND b.hash = decode(r.value, 'hex')) sb ON true
WHERE c.task_id = @task_id AND c.step = @step;
