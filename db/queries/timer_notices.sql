-- Who the notices of timer events (reminders, escalations; SPEC §12) are
-- mailed to: the policy picks them (auth.Policy.Recipients) from these.

-- UsersMailable lists the users who can be mailed: an address, not
-- disabled.
-- name: UsersMailable :many
SELECT username, role, kinds FROM users WHERE email <> '' AND NOT disabled ORDER BY username;

-- TaskCreators names the creator of each task.
-- name: TaskCreators :many
SELECT id, created_by FROM tasks WHERE id = ANY (@ids::uuid[]);

-- InterruptApprovers lists who approved each interrupt so far (of a kind
-- that needs several approvers): they have decided.
-- name: InterruptApprovers :many
SELECT interrupt_id, approver FROM approvals WHERE interrupt_id = ANY (@ids::uuid[]);
