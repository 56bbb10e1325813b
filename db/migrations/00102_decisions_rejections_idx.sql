-- +goose Up
-- The feedback of a task's last rejection at a node (LGInterruptWithFeedback,
-- LGLastRejection: Agent Inbox shows it with every interrupt of a LangGraph
-- stream) was found among all of the task's decisions, or all decisions:
-- PostgreSQL scanned the whole table for a reject it expected to be rare,
-- so each read grew with every approval ever recorded (800 decisions: 70 µs
-- on the stream's way to its interrupt). Rejections alone, by task and
-- time: the read walks the task's few rejections, newest first. Approvals,
-- the usual decisions, are not in it and cost it nothing.
CREATE INDEX decisions_rejections_idx ON decisions (task_id, decided_at DESC) WHERE action = 'reject';

-- +goose Down
DROP INDEX decisions_rejections_idx;
