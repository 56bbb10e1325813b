-- name: EventListAfter :many
SELECT * FROM task_events WHERE task_id = @task_id AND seq > @after ORDER BY seq LIMIT @max_rows;
