package postgres

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

// Batches of sqlc's queries: the statements its generated methods send,
// captured to travel in one pgx.Batch, and their results scanned by the
// generated code (dbsqlc holds generated code only).

// errCaptured stops a generated query method after its SQL and arguments
// were captured.
var errCaptured = errors.New("postgres: query captured for a batch")

// capture is a DBTX that records the statement a generated method would
// send, so several generated queries can travel in one pgx.Batch (one
// round trip, one implicit transaction) with sqlc's own argument order.
type capture struct {
	sql  string
	args []any
}

func (c *capture) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.sql, c.args = sql, args
	return pgconn.CommandTag{}, nil
}

func (c *capture) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.sql, c.args = sql, args
	return nil, errCaptured
}

func (c *capture) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	c.sql, c.args = sql, args
	return errRow{}
}

type errRow struct{}

func (errRow) Scan(...any) error { return errCaptured }

// capturer is a capture with the Queries that writes to it, reused: a
// node run queues several statements, and each made both anew.
type capturer struct {
	c capture
	q *dbsqlc.Queries
}

var capturers = sync.Pool{New: func() any {
	x := &capturer{}
	x.q = dbsqlc.New(&x.c)
	return x
}}

// queue adds to b the statement that call sends through its Queries.
// Example: queue(b, func(q *dbsqlc.Queries) error { return q.CheckpointSave(ctx, p) }).
// call must not keep q.
func queue(b *pgx.Batch, call func(q *dbsqlc.Queries) error) *pgx.QueuedQuery {
	x := capturers.Get().(*capturer)
	if err := call(x.q); err != nil && !errors.Is(err, errCaptured) {
		// Generated methods fail before I/O only on captured errors; any
		// other error is a programming mistake worth surfacing loudly.
		panic("postgres.queue: " + err.Error())
	}
	qq := b.Queue(x.c.sql, x.c.args...)
	x.c = capture{} // the batch keeps the arguments, not the capture
	capturers.Put(x)
	return qq
}

// fromRow returns Queries whose QueryRow answers with row, a row already
// read (a batch's): a generated :one method then scans it in its own
// column order, so a batch's result needs no hand-kept copy of the scan.
func fromRow(row pgx.Row) *dbsqlc.Queries { return dbsqlc.New(rowDB{row}) }

type rowDB struct{ row pgx.Row }

var errRowOnly = errors.New("postgres: fromRow answers QueryRow only")

func (rowDB) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errRowOnly
}

func (rowDB) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, errRowOnly }

func (r rowDB) QueryRow(context.Context, string, ...any) pgx.Row { return r.row }

// fromRows returns Queries whose Query answers with rows, a batch's result:
// a generated :many method then scans them in its own column order.
func fromRows(rows pgx.Rows) *dbsqlc.Queries { return dbsqlc.New(rowsDB{rows}) }

type rowsDB struct{ rows pgx.Rows }

var errRowsOnly = errors.New("postgres: fromRows answers Query only")

func (rowsDB) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errRowsOnly
}

func (r rowsDB) Query(context.Context, string, ...any) (pgx.Rows, error) { return r.rows, nil }

func (rowsDB) QueryRow(context.Context, string, ...any) pgx.Row { return failedRow{errRowsOnly} }

type failedRow struct{ err error }

func (f failedRow) Scan(...any) error { return f.err }
