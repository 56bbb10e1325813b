-- +goose Up
-- Counts the desk shows on every page (tasks per status, pending
-- interrupts per kind) without counting rows: at 1,000,000 tasks the
-- dashboard's GROUP BY over tasks took most of a second. Triggers append
-- a delta row per change of a counted column (inserts only: no row lock
-- for concurrent commits to queue on, no deadlock between group-commit
-- batches); readers add the deltas to row_counts, and fold them into it
-- now and then (RowCountsFold). A step that leaves its task's status as
-- it was fires nothing: the triggers' WHEN clauses look first.
CREATE TABLE row_counts (
    scope text   NOT NULL,
    key   text   NOT NULL,
    n     bigint NOT NULL,
    PRIMARY KEY (scope, key)
);

CREATE TABLE row_count_deltas (
    scope text    NOT NULL,
    key   text    NOT NULL,
    delta integer NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION gatehouse_count_tasks() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO row_count_deltas VALUES ('task_status', NEW.status, 1);
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO row_count_deltas VALUES ('task_status', OLD.status, -1);
    ELSE
        INSERT INTO row_count_deltas VALUES ('task_status', OLD.status, -1), ('task_status', NEW.status, 1);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION gatehouse_count_interrupts() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status = 'pending' THEN
        INSERT INTO row_count_deltas VALUES ('pending_interrupt_kind', OLD.kind, -1);
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.status = 'pending' THEN
        INSERT INTO row_count_deltas VALUES ('pending_interrupt_kind', NEW.kind, 1);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION gatehouse_count_truncated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM row_counts WHERE scope = TG_ARGV[0];
    DELETE FROM row_count_deltas WHERE scope = TG_ARGV[0];
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- No write may slip between the first count and the triggers.
LOCK TABLE tasks, interrupts IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO row_counts (scope, key, n)
SELECT 'task_status', status, count(*) FROM tasks GROUP BY status;
INSERT INTO row_counts (scope, key, n)
SELECT 'pending_interrupt_kind', kind, count(*) FROM interrupts WHERE status = 'pending' GROUP BY kind;

CREATE TRIGGER tasks_count_insdel AFTER INSERT OR DELETE ON tasks
    FOR EACH ROW EXECUTE FUNCTION gatehouse_count_tasks();
CREATE TRIGGER tasks_count_status AFTER UPDATE OF status ON tasks
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION gatehouse_count_tasks();
CREATE TRIGGER tasks_count_truncate AFTER TRUNCATE ON tasks
    FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_count_truncated('task_status');
CREATE TRIGGER interrupts_count_insdel AFTER INSERT OR DELETE ON interrupts
    FOR EACH ROW EXECUTE FUNCTION gatehouse_count_interrupts();
CREATE TRIGGER interrupts_count_status AFTER UPDATE OF status, kind ON interrupts
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.kind IS DISTINCT FROM NEW.kind)
    EXECUTE FUNCTION gatehouse_count_interrupts();
CREATE TRIGGER interrupts_count_truncate AFTER TRUNCATE ON interrupts
    FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_count_truncated('pending_interrupt_kind');

-- +goose Down
DROP TRIGGER interrupts_count_truncate ON interrupts;
DROP TRIGGER interrupts_count_status ON interrupts;
DROP TRIGGER interrupts_count_insdel ON interrupts;
DROP TRIGGER tasks_count_truncate ON tasks;
DROP TRIGGER tasks_count_status ON tasks;
DROP TRIGGER tasks_count_insdel ON tasks;
DROP FUNCTION gatehouse_count_truncated();
DROP FUNCTION gatehouse_count_interrupts();
DROP FUNCTION gatehouse_count_tasks();
DROP TABLE row_count_deltas;
DROP TABLE row_counts;
