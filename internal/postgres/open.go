package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Open connects a pool of at most maxConns connections (0: pgx's default)
// to the database at url, configured for the Store (ConfigurePool), and
// pings it within 10 seconds. The caller closes the pool.
func Open(ctx context.Context, url string, maxConns int) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if maxConns > 0 {
		pc.MaxConns = int32(maxConns)
	}
	ConfigurePool(pc)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connect to the database: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to the database: %w", err)
	}
	return pool, nil
}

// OpenMigrated is Open for a program that works on the data: it applies
// pending migrations first, and refuses (saying so, as "refusing to
// <verb>") a database whose schema is newer than this binary.
func OpenMigrated(ctx context.Context, url string, maxConns int, verb string) (*pgxpool.Pool, error) {
	pool, err := Open(ctx, url, maxConns)
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, pool); err != nil {
		pool.Close()
		if errors.Is(err, ErrSchemaTooNew) {
			return nil, fmt.Errorf("refusing to %s: %w; run a newer gatehouse", verb, err)
		}
		return nil, err
	}
	return pool, nil
}
