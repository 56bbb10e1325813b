package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"
)

// ConfigurePool prepares pool connections for the Store. It teaches pgx
// google/uuid's type: without it every uuid.UUID argument goes through
// driver.Valuer — formatted as text, a failed binary plan built with its
// error message, then parsed back — which was a tenth of the server's CPU
// when tasks ran at full speed.
func ConfigurePool(pc *pgxpool.Config) {
	next := pc.AfterConnect
	pc.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		pgxuuid.Register(conn.TypeMap())
		if next != nil {
			return next(ctx, conn)
		}
		return nil
	}
}
