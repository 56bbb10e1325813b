package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/gatehousehq/gatehouse/db"
)

// ErrSchemaTooNew is returned when the database carries migrations this
// binary does not know: an older binary must not write to a newer schema.
var ErrSchemaTooNew = errors.New("database schema is newer than this binary")

// MigrationStatus is one migration and whether it is applied.
type MigrationStatus struct {
	Version int64
	Source  string
	Applied bool
}

func provider(pool *pgxpool.Pool) (*goose.Provider, *sql.DB, error) {
	sqldb := stdlib.OpenDBFromPool(pool)
	migrations, err := fs.Sub(db.Migrations, "migrations")
	if err != nil {
		return nil, nil, err
	}
	// Each line of work numbers its migrations in a block of its own
	// (00010–00019, 00020–00029, …), so a database may have applied a
	// later block before an earlier one exists: apply the earlier one then,
	// instead of refusing to start.
	p, err := goose.NewProvider(goose.DialectPostgres, sqldb, migrations, goose.WithAllowOutofOrder(true))
	if err != nil {
		sqldb.Close()
		return nil, nil, fmt.Errorf("goose: %w", err)
	}
	return p, sqldb, nil
}

// Migrate applies every pending migration. It refuses with ErrSchemaTooNew
// when the database has a version this binary does not carry.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	p, sqldb, err := provider(pool)
	if err != nil {
		return err
	}
	defer sqldb.Close()
	if err := checkNotNewer(ctx, p); err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// MigrateDown rolls back the most recent migration.
func MigrateDown(ctx context.Context, pool *pgxpool.Pool) error {
	p, sqldb, err := provider(pool)
	if err != nil {
		return err
	}
	defer sqldb.Close()
	if _, err := p.Down(ctx); err != nil {
		return fmt.Errorf("migrate down: %w", err)
	}
	return nil
}

// Migrations lists every migration this binary knows and whether it is applied.
func Migrations(ctx context.Context, pool *pgxpool.Pool) ([]MigrationStatus, error) {
	p, sqldb, err := provider(pool)
	if err != nil {
		return nil, err
	}
	defer sqldb.Close()
	st, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate status: %w", err)
	}
	out := make([]MigrationStatus, 0, len(st))
	for _, s := range st {
		out = append(out, MigrationStatus{Version: s.Source.Version, Source: s.Source.Path, Applied: s.State == goose.StateApplied})
	}
	return out, nil
}

func checkNotNewer(ctx context.Context, p *goose.Provider) error {
	dbVersion, err := p.GetDBVersion(ctx)
	if err != nil {
		// A database without goose's table is simply empty.
		return nil
	}
	sources := p.ListSources()
	var latest int64
	if len(sources) > 0 {
		latest = sources[len(sources)-1].Version
	}
	if dbVersion > latest {
		return fmt.Errorf("%w: database is at migration %d, this binary knows up to %d", ErrSchemaTooNew, dbVersion, latest)
	}
	return nil
}

// Ready reports whether the database answers and carries every migration
// this binary knows (readiness of a replica).
func Ready(ctx context.Context, pool *pgxpool.Pool) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := pool.Ping(ctx); err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	p, sqldb, err := provider(pool)
	if err != nil {
		return err
	}
	defer sqldb.Close()
	has, err := p.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("migration status: %w", err)
	}
	if has {
		return errors.New("migrations pending")
	}
	return nil
}
