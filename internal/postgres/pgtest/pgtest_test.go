package pgtest_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// dbExists reports whether the server still has a database called name.
func dbExists(t *testing.T, name string) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatalf("query pg_database: %v", err)
	}
	return n > 0
}

// TestParallelDatabases: parallel tests get distinct, migrated databases,
// and each is dropped when its test ends.
func TestParallelDatabases(t *testing.T) {
	var (
		mu    sync.Mutex
		names []string
	)
	t.Run("group", func(t *testing.T) {
		for _, sub := range []string{"a", "b", "c"} {
			t.Run(sub, func(t *testing.T) {
				t.Parallel()
				pool := pgtest.NewPool(t)
				ctx := context.Background()
				var name string
				if err := pool.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil {
					t.Fatalf("current_database: %v", err)
				}
				var n int
				if err := pool.QueryRow(ctx, "SELECT count(*) FROM tasks").Scan(&n); err != nil {
					t.Fatalf("tasks table missing (migrations not applied?): %v", err)
				}
				if n != 0 {
					t.Errorf("fresh database has %d tasks, want 0", n)
				}
				// Writes in one test must not show up in another.
				if _, err := pool.Exec(ctx, "CREATE TABLE only_in_"+sub+" (x int)"); err != nil {
					t.Fatalf("create table: %v", err)
				}
				mu.Lock()
				names = append(names, name)
				mu.Unlock()
				if !dbExists(t, name) {
					t.Errorf("database %s not listed while in use", name)
				}
			})
		}
	})
	if len(names) != 3 {
		t.Fatalf("got %d database names, want 3", len(names))
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("database %s handed out twice", n)
		}
		seen[n] = true
		if dbExists(t, n) {
			t.Errorf("database %s still exists after its test finished", n)
		}
	}
}

// TestNewDBConnString: NewDB returns a usable connection string for a
// migrated database that is dropped after the (sub)test, even with a
// connection left open.
func TestNewDBConnString(t *testing.T) {
	var name string
	t.Run("inner", func(t *testing.T) {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, pgtest.NewDB(t))
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		// Deliberately not closed: the drop uses WITH (FORCE).
		if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil {
			t.Fatalf("current_database: %v", err)
		}
		if _, err := conn.Exec(ctx, "SELECT count(*) FROM tasks"); err != nil {
			t.Fatalf("tasks table missing: %v", err)
		}
	})
	if name == "" {
		t.Fatal("inner test recorded no database")
	}
	if dbExists(t, name) {
		t.Errorf("database %s still exists after cleanup", name)
	}
}
