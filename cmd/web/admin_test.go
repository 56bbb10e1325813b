package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// cli runs a gatehouse command in-process against url.
func cli(t *testing.T, url, stdin string, args ...string) (int, string, string) {
	t.Helper()
	env := map[string]string{"DATABASE_URL": url, "USER": "ops"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, func(k string) string { return env[k] }, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestUsersCommands(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	ok := func(stdin string, args ...string) string {
		t.Helper()
		code, out, errOut := cli(t, url, stdin, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}
	if out := ok("s3cret-password\n", "users", "add", "Alice", "--role", "approver", "--kinds", "merge,prd"); !strings.Contains(out, "user alice added (approver of merge, prd)") {
		t.Errorf("add: %q", out)
	}
	ok("another-password", "users", "add", "--role=viewer", "bob")
	out := ok("", "users", "list")
	if !regexp.MustCompile(`alice\s+approver\s+merge,prd\s+active`).MatchString(out) ||
		!regexp.MustCompile(`bob\s+viewer\s+all\s+active`).MatchString(out) {
		t.Errorf("list:\n%s", out)
	}
	ok("", "users", "disable", "bob")
	if out := ok("", "users", "list"); !regexp.MustCompile(`bob\s+viewer\s+all\s+disabled`).MatchString(out) {
		t.Errorf("after disable:\n%s", out)
	}
	ok("", "users", "enable", "bob")
	ok("", "users", "role", "bob", "--role", "operator")
	ok("a-newer-password\n", "users", "passwd", "bob")

	// The password works, the actor is in the audit trail.
	svc := auth.NewService(auth.Config{Store: postgres.NewStore(mustPool(t, url), postgres.Options{})})
	ctx := context.Background()
	if _, err := svc.Login(ctx, "alice", "s3cret-password", "cli-test", "go"); err != nil {
		t.Fatalf("alice's password: %v", err)
	}
	if _, err := svc.Login(ctx, "bob", "a-newer-password", "cli-test", "go"); err != nil {
		t.Fatalf("bob's new password: %v", err)
	}
	ev, err := svc.AuditTrail(ctx, auth.AuditFilter{Actor: "cli:ops", Kind: "user"})
	if err != nil || len(ev) != 6 {
		t.Fatalf("audit trail of cli:ops: %+v %v", ev, err)
	}

	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"pw-pw-pw-pw", []string{"users", "add", "alice", "--role", "viewer"}, "already exists"},
		{"short", []string{"users", "add", "carl", "--role", "viewer"}, "password: needs at least 8 characters"},
		{"", []string{"users", "add", "carl", "--role", "viewer"}, "no password on standard input"},
		{"pw-pw-pw-pw", []string{"users", "add", "carl"}, "needs --role"},
		{"pw-pw-pw-pw", []string{"users", "add", "carl", "--role", "boss"}, "unknown role"},
		{"pw-pw-pw-pw", []string{"users", "add", "carl", "--role", "viewer", "--kinds", "merge"}, "only an approver"},
		{"pw-pw-pw-pw", []string{"users", "add", "bad name", "--role", "viewer"}, "username"},
		{"", []string{"users", "disable", "nobody"}, "not found"},
		{"", []string{"users", "disable"}, "takes one NAME"},
		{"", []string{"users", "frobnicate"}, "want add, list"},
		{"", []string{"users"}, "users needs one of"},
		{"", []string{"users", "list", "--role", "admin"}, "takes no arguments"},
	} {
		code, _, errOut := cli(t, url, c.stdin, c.args...)
		if code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", c.args, code, errOut, c.want)
		}
	}
	if code, out, _ := cli(t, url, "", "users", "--help"); code != 0 || !strings.Contains(out, "users add NAME --role ROLE") {
		t.Errorf("users --help: %d %q", code, out)
	}
}

func mustPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	p, err := postgres.Open(context.Background(), url, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestTokensCommands(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	code, out, errOut := cli(t, url, "", "tokens", "create", "ci-bot", "--role", "operator")
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	secret := strings.TrimSpace(out)
	if !strings.HasPrefix(secret, "gatehouse_") || strings.Contains(secret, "\n") || !strings.Contains(errOut, "shown this once") {
		t.Fatalf("create printed %q / %q", out, errOut)
	}
	svc := auth.NewService(auth.Config{Store: postgres.NewStore(mustPool(t, url), postgres.Options{})})
	ctx := context.Background()
	p, err := svc.Bearer(ctx, secret)
	if err != nil || p.Name != "token:ci-bot" || p.Role != auth.RoleOperator {
		t.Fatalf("the printed token: %+v %v", p, err)
	}
	_, out, _ = cli(t, url, "", "tokens", "list")
	if strings.Contains(out, secret) {
		t.Fatal("tokens list shows the secret")
	}
	m := regexp.MustCompile(`(?m)^([0-9a-f-]{36})\s+ci-bot\s+operator\s+cli:ops\s+\S+\s+\S+\s+active$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("list:\n%s", out)
	}
	if code, out, errOut := cli(t, url, "", "tokens", "revoke", m[1]); code != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("revoke: %d %s %s", code, out, errOut)
	}
	if _, err := svc.Bearer(ctx, secret); err == nil {
		t.Fatal("a revoked token still authenticates")
	}
	if _, out, _ := cli(t, url, "", "tokens", "list"); !strings.Contains(out, "revoked ") {
		t.Errorf("list after revoke:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tokens", "revoke", m[1]}, "not found"},
		{[]string{"tokens", "revoke"}, "takes one ID"},
		{[]string{"tokens", "create", "x"}, "needs --role"},
		{[]string{"tokens", "create", "x y", "--role", "viewer"}, "name"},
		{[]string{"tokens", "create", "x", "--role", "viewer", "--kinds", "merge"}, "flag provided but not defined"},
		{[]string{"tokens", "shred"}, "want create, list or revoke"},
	} {
		code, _, errOut := cli(t, url, "", c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 with %q", c.args, code, errOut, c.want)
		}
	}
}

// TestE2EAdminPassword: the first start without GATEHOUSE_ADMIN_PASSWORD
// generates the admin's password and logs it once; later starts do not;
// GATEHOUSE_ADMIN_PASSWORD sets it.
func TestE2EAdminPassword(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	re := regexp.MustCompile(`created the admin user.* password=(\S+)`)
	p := serve(t, d.url, "GATEHOUSE_WORKERS=0")
	m := re.FindStringSubmatch(p.Logs())
	if m == nil {
		t.Fatalf("no generated password logged:\n%s", p.Logs())
	}
	_ = p.Cmd.Process.Kill()
	<-p.Exited
	p2 := serve(t, d.url, "GATEHOUSE_WORKERS=0")
	if strings.Contains(p2.Logs(), "created the admin user") {
		t.Fatalf("a second start generated a password again:\n%s", p2.Logs())
	}
	svc := auth.NewService(auth.Config{Store: postgres.NewStore(d.pool, postgres.Options{})})
	ctx := context.Background()
	if _, err := svc.Login(ctx, "admin", m[1], "e2e", "go"); err != nil {
		t.Fatalf("the logged password: %v", err)
	}
	_ = p2.Cmd.Process.Kill()
	<-p2.Exited
	p3 := serve(t, d.url, "GATEHOUSE_WORKERS=0", "GATEHOUSE_ADMIN_PASSWORD=set-by-the-environment")
	if strings.Contains(p3.Logs(), "created the admin user") {
		t.Fatalf("generated with GATEHOUSE_ADMIN_PASSWORD set:\n%s", p3.Logs())
	}
	if _, err := svc.Login(ctx, "admin", "set-by-the-environment", "e2e", "go"); err != nil {
		t.Fatalf("GATEHOUSE_ADMIN_PASSWORD: %v", err)
	}
}
