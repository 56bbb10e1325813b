// Package pgtest gives tests a fresh, migrated PostgreSQL database each.
//
// The server is DATABASE_URL when set; otherwise the project's private
// cluster, started on demand with scripts/pg.sh. Every test database is a
// copy of a template database that holds the migrated schema; the template is
// named after a hash of the migration files, so it is built once per schema
// and shared by all test processes.
//
// Tests in package postgres itself must use the external test package
// (package postgres_test): pgtest imports postgres for Migrate.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/db"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// templateLockKey is the pg_advisory_lock key that guards building the
// template database across processes ("gatehous" in ASCII).
const templateLockKey int64 = 0x6761746568_6f7573

// poolMaxConns is the pool size NewPool uses.
const poolMaxConns = 20

var (
	urlOnce sync.Once
	baseURL string
	urlErr  error

	tmplOnce sync.Once
	tmplName string
	tmplErr  error
)

// URL returns the connection URL of the server tests use: DATABASE_URL when
// set, otherwise the private cluster of scripts/pg.sh, which it starts. The
// URL names the server's maintenance database; tests should not write to it —
// use NewDB or NewPool.
func URL(tb testing.TB) string {
	tb.Helper()
	urlOnce.Do(func() { baseURL, urlErr = resolveURL() })
	if urlErr != nil {
		tb.Fatalf("pgtest: no PostgreSQL server: %v", urlErr)
	}
	return baseURL
}

// NewDB creates an empty-but-migrated database for this test and returns its
// connection string. The database is dropped (even with open connections) when
// the test and its subtests finish.
func NewDB(tb testing.TB) (connString string) {
	tb.Helper()
	base := URL(tb)
	tmplOnce.Do(func() { tmplName, tmplErr = ensureTemplate(base) })
	if tmplErr != nil {
		tb.Fatalf("pgtest: template database: %v", tmplErr)
	}

	name := "gh_test_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := adminExec(ctx, base, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(tmplName)); err != nil {
		tb.Fatalf("pgtest: create test database %s from %s: %v", name, tmplName, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := adminExec(ctx, base, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop test database %s: %v", name, err)
		}
	})
	cs, err := withDatabase(base, name)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return cs
}

// NewPool is NewDB plus a pgxpool (at most 20 connections) on the new
// database. The pool is closed before the database is dropped.
func NewPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	cs := NewDB(tb) // registers the drop first, so it runs after pool.Close
	cfg, err := pgxpool.ParseConfig(cs)
	if err != nil {
		tb.Fatalf("pgtest: parse connection string: %v", err)
	}
	cfg.MaxConns = poolMaxConns
	postgres.ConfigurePool(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("pgtest: open pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		tb.Fatalf("pgtest: ping test database: %v", err)
	}
	return pool
}

// resolveURL finds the server: DATABASE_URL, or the private cluster.
func resolveURL() (string, error) {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, "scripts", "pg.sh")
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("DATABASE_URL is unset and %s is missing: %w", script, err)
	}

	// go test runs package test binaries in parallel: serialise the start.
	// (pg.sh locks too; this lock is a different file, so they nest safely.)
	sum := sha256.Sum256([]byte(root))
	lockPath := filepath.Join(os.TempDir(), "gatehouse-pgtest-"+hex.EncodeToString(sum[:6])+".lock")
	unlock, err := flockFile(lockPath)
	if err != nil {
		return "", err
	}
	defer unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := runScript(ctx, root, script, "start"); err != nil {
		return "", err
	}
	out, err := runScript(ctx, root, script, "url")
	if err != nil {
		return "", err
	}
	u := strings.TrimSpace(out)
	if u == "" {
		return "", fmt.Errorf("%s url printed nothing", script)
	}
	return u, nil
}

func runScript(ctx context.Context, root, script, arg string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", script, arg)
	cmd.Dir = root
	var stdout, stderr strings.Builder
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("scripts/pg.sh %s: %w\n%s%s", arg, err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// repoRoot walks up from the working directory to the directory with go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("DATABASE_URL is unset and no go.mod found above the working directory")
		}
		dir = parent
	}
}

func flockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// templateName is gatehouse_tmpl_ plus 12 hex digits of a hash over every
// migration file (name and contents), so a schema change gets a new template.
func templateName() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(db.Migrations, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(db.Migrations, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash migrations: %w", err)
	}
	return "gatehouse_tmpl_" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// ensureTemplate returns the name of the migrated template database, building
// it if no process has yet. An advisory lock, held on a dedicated connection,
// serialises the check-and-build across test processes.
func ensureTemplate(base string) (string, error) {
	name, err := templateName()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", fmt.Errorf("connect %s: %w", redact(base), err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return "", fmt.Errorf("advisory lock: %w", err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", templateLockKey) //nolint:errcheck

	var isTemplate bool
	err = conn.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&isTemplate)
	switch {
	case err == nil && isTemplate:
		return name, nil // built by an earlier run or another process
	case err == nil:
		// A half-built leftover (a process died mid-migration): rebuild.
		if _, err := conn.Exec(ctx, "DROP DATABASE "+ident(name)+" WITH (FORCE)"); err != nil {
			return "", fmt.Errorf("drop half-built %s: %w", name, err)
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return "", fmt.Errorf("look up %s: %w", name, err)
	}

	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(name)); err != nil {
		return "", fmt.Errorf("create %s: %w", name, err)
	}
	if err := migrate(ctx, base, name); err != nil {
		return "", fmt.Errorf("migrate %s: %w", name, err)
	}
	// Refuse further connections, so CREATE DATABASE … TEMPLATE never finds
	// another session in it, then mark it a template.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(name)+" ALLOW_CONNECTIONS false"); err != nil {
		return "", fmt.Errorf("seal %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(name)+" IS_TEMPLATE true"); err != nil {
		return "", fmt.Errorf("mark %s a template: %w", name, err)
	}
	return name, nil
}

func migrate(ctx context.Context, base, dbname string) error {
	cs, err := withDatabase(base, dbname)
	if err != nil {
		return err
	}
	cfg, err := pgxpool.ParseConfig(cs)
	if err != nil {
		return err
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	return postgres.Migrate(ctx, pool)
}

// adminExec runs one statement on its own connection to the server's
// maintenance database (CREATE/DROP DATABASE cannot run in a transaction).
func adminExec(ctx context.Context, base, sql string) error {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return fmt.Errorf("connect %s: %w", redact(base), err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns base with its database replaced by dbname. It accepts
// both URL (postgres://…) and keyword/value (host=… dbname=…) forms.
func withDatabase(base, dbname string) (string, error) {
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		u, err := url.Parse(base)
		if err != nil {
			return "", fmt.Errorf("parse database URL: %w", err)
		}
		u.Path = "/" + dbname
		u.RawPath = ""
		q := u.Query()
		if q.Has("dbname") {
			q.Set("dbname", dbname)
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	// keyword/value: a later keyword overrides an earlier one.
	return base + " dbname=" + dbname, nil
}

func redact(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
	}
	return s
}

func ident(s string) string {
	return pgx.Identifier{s}.Sanitize()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
