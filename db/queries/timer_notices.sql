-- Who reminders name (SPEC §11) and whom the notices of timer events
-- (reminders, escalations; SPEC §12) mail: the policy picks them
-- (auth.Policy.Recipients) from these.

-- TaskCreators names the creator of each task.
-- name: TaskCreators :many
SELECT id, created_by FROM tasks WHERE id = ANY (@ids::uuid[]);

-- InterruptApprovers lists who approved each interrupt so far (of a kind
-- that needs several approvers): they have decided.
-- name: InterruptApprovers :many
SELECT interrupt_id, approver FROM approvals WHERE interrupt_id = ANY (@ids::uuid[]);

-- UsersDeciding lists the users who may be named as deciders: not
-- disabled; mailable when they have an address.
-- name: UsersDeciding :many
SELECT username, role, kinds, idp_groups, (email <> '')::bool AS mailable FROM users WHERE NOT disabled ORDER BY username;
