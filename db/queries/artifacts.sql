-- ArtifactInsertMany numbers versions per name after the task's existing ones.
-- name: ArtifactInsertMany :many
INSERT INTO artifacts (task_id, name, version, node, iteration, content_type, content, created_at)
SELECT @task_id::uuid, a.name,
       COALESCE((SELECT max(version) FROM artifacts x WHERE x.task_id = @task_id::uuid AND x.name = a.name), 0)
           + row_number() OVER (PARTITION BY a.name ORDER BY a.ord),
       (@nodes::text[])[a.ord], (@iterations::int[])[a.ord], (@content_types::text[])[a.ord],
       (@contents::text[])[a.ord], (@ats::timestamptz[])[a.ord]
FROM unnest(@names::text[]) WITH ORDINALITY AS a(name, ord)
ORDER BY a.ord
RETURNING version;

-- name: ArtifactListByTask :many
SELECT * FROM artifacts WHERE task_id = @task_id ORDER BY created_at, name, version;
