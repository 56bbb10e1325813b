package auth_test

// Tests of the Service on a real PostgreSQL (internal/postgres), with a
// clock the tests move.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type env struct {
	store *postgres.Store
	svc   *auth.Service
	clock *clock
}

const bootstrapToken = "test-bootstrap-token-0123456789"

func newEnv(t *testing.T) *env {
	t.Helper()
	store := postgres.NewStore(pgtest.NewPool(t), postgres.Options{})
	c := &clock{t: time.Now()}
	svc := auth.NewService(auth.Config{Store: store, BootstrapToken: bootstrapToken, SessionIdle: time.Hour,
		SessionMax: 24 * time.Hour, Now: c.now})
	return &env{store: store, svc: svc, clock: c}
}

func (e *env) addUser(t *testing.T, name string, role auth.Role, kinds ...string) *auth.User {
	t.Helper()
	u, err := e.svc.AddUser(context.Background(), "test", name, name+"-password", role, kinds)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestUsers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	u := e.addUser(t, "Alice", auth.RoleApprover, "merge")
	if u.Username != "alice" || u.Role != auth.RoleApprover || strings.Join(u.Kinds, ",") != "merge" || u.ID == "" {
		t.Fatalf("user: %+v", u)
	}
	if strings.Contains(u.PasswordHash, "alice-password") || !strings.HasPrefix(u.PasswordHash, "$argon2id$") {
		t.Fatalf("stored password: %q", u.PasswordHash)
	}
	if _, err := e.svc.AddUser(ctx, "test", "ALICE", "another-password", auth.RoleViewer, nil); !errors.Is(err, auth.ErrExists) {
		t.Fatalf("duplicate user: %v", err)
	}
	for _, c := range []struct {
		name, pw string
		role     auth.Role
		kinds    []string
		field    string
	}{
		{"bob", "short", auth.RoleViewer, nil, "password"},
		{"bob", "long-enough", auth.Role("root"), nil, "role"},
		{"bob", "long-enough", auth.RoleViewer, []string{"merge"}, "kinds"},
		{"bootstrap", "long-enough", auth.RoleViewer, nil, "username"},
	} {
		var inv *auth.InvalidError
		if _, err := e.svc.AddUser(ctx, "test", c.name, c.pw, c.role, c.kinds); !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("AddUser(%q, %q, %q, %v) = %v, want invalid %s", c.name, c.pw, c.role, c.kinds, err, c.field)
		}
	}
	e.addUser(t, "bob", auth.RoleViewer)
	users, err := e.svc.Users(ctx)
	if err != nil || len(users) != 2 || users[0].Username != "alice" || users[1].Username != "bob" {
		t.Fatalf("Users() = %+v, %v", users, err)
	}
	if err := e.svc.SetRole(ctx, "root", "bob", auth.RoleOperator, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.DisableUser(ctx, "root", "nobody"); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("disable a missing user: %v", err)
	}
	ev, err := e.svc.AuditTrail(ctx, auth.AuditFilter{Kind: "user"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, x := range ev {
		kinds = append(kinds, x.Actor+":"+x.Kind+":"+x.Subject)
	}
	if got := strings.Join(kinds, " "); got != "root:user.updated:bob test:user.created:bob test:user.created:alice" {
		t.Errorf("audit of users: %s", got)
	}
}

func TestLoginSessionsAndRevocation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.addUser(t, "carol", auth.RoleOperator)

	if _, err := e.svc.Login(ctx, "carol", "wrong-password", "10.0.0.1", "ua"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := e.svc.Login(ctx, "nobody", "whatever-pw", "10.0.0.1", "ua"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Fatalf("no such user: %v", err)
	}
	l, err := e.svc.Login(ctx, " Carol ", "carol-password", "10.0.0.1", "test agent")
	if err != nil {
		t.Fatal(err)
	}
	if l.Principal.Name != "carol" || l.Principal.Role != auth.RoleOperator || l.Principal.Kind != auth.KindUser {
		t.Fatalf("principal: %+v", l.Principal)
	}
	p, sess, err := e.svc.Session(ctx, l.Secret)
	if err != nil || p.Name != "carol" || sess.ID != l.Session.ID {
		t.Fatalf("Session() = %+v, %+v, %v", p, sess, err)
	}
	if !auth.CheckCSRF(sess.CSRFKey, auth.CSRFToken(l.Session.CSRFKey)) {
		t.Fatal("the CSRF key read back differs from the one issued")
	}
	// Only the hash is stored.
	var n int
	if err := e.store.Pool().QueryRow(ctx, "SELECT count(*) FROM sessions WHERE token_hash = $1", []byte(l.Secret)).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the session secret is stored as is: %d %v", n, err)
	}
	for _, bad := range []string{"", "ghs_x", l.Secret + "x", strings.ToUpper(l.Secret)} {
		if _, _, err := e.svc.Session(ctx, bad); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("Session(%q) = %v", bad, err)
		}
	}

	// Idle expiry: 59 minutes of use keep it, an hour without ends it.
	e.clock.add(59 * time.Minute)
	if _, _, err := e.svc.Session(ctx, l.Secret); err != nil {
		t.Fatalf("after 59 minutes: %v", err)
	}
	// last_seen_at is the database's now(): move the clock past it.
	e.clock.t = time.Now().Add(61 * time.Minute)
	if _, _, err := e.svc.Session(ctx, l.Secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("idle session: %v", err)
	}

	// Absolute expiry, however busy the session.
	e.clock.t = time.Now()
	l2, err := e.svc.Login(ctx, "carol", "carol-password", "10.0.0.1", "ua")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 25; i++ {
		e.clock.add(59 * time.Minute)
		if _, err := e.store.Pool().Exec(ctx, "UPDATE sessions SET last_seen_at = $1 WHERE id = $2", e.clock.now(), l2.Session.ID); err != nil {
			t.Fatal(err)
		}
		_, _, err := e.svc.Session(ctx, l2.Secret)
		if i < 24 && err != nil {
			t.Fatalf("busy session ended after %d hours: %v", i, err)
		}
		if i == 24 && !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatalf("session outlived its absolute expiry: %v", err)
		}
	}

	// Logout revokes server-side; disabling revokes every session.
	e.clock.t = time.Now()
	l3, _ := e.svc.Login(ctx, "carol", "carol-password", "10.0.0.1", "ua")
	l4, _ := e.svc.Login(ctx, "carol", "carol-password", "10.0.0.2", "ua")
	if err := e.svc.Logout(ctx, l3.Session.ID, "carol"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.svc.Session(ctx, l3.Secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("after logout: %v", err)
	}
	if _, _, err := e.svc.Session(ctx, l4.Secret); err != nil {
		t.Fatalf("logout ended another session: %v", err)
	}
	if err := e.svc.DisableUser(ctx, "admin", "carol"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.svc.Session(ctx, l4.Secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("a disabled user's session: %v", err)
	}
	if _, err := e.svc.Login(ctx, "carol", "carol-password", "10.0.0.1", "ua"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Fatalf("a disabled user logs in: %v", err)
	}
	if err := e.svc.EnableUser(ctx, "admin", "carol"); err != nil {
		t.Fatal(err)
	}
	l5, err := e.svc.Login(ctx, "carol", "carol-password", "10.0.0.1", "ua")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.SetPassword(ctx, "admin", "carol", "a-new-password"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.svc.Session(ctx, l5.Secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("a session survived a password change: %v", err)
	}
	if _, err := e.svc.Login(ctx, "carol", "a-new-password", "10.0.0.1", "ua"); err != nil {
		t.Fatal(err)
	}

	ev, err := e.svc.AuditTrail(ctx, auth.AuditFilter{Actor: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, x := range ev {
		kinds = append(kinds, x.Kind)
	}
	if got := strings.Join(kinds, " "); got != "user.password_set user.enabled user.disabled" {
		t.Errorf("admin's audit trail: %s", got)
	}
	if ev, _ := e.svc.AuditTrail(ctx, auth.AuditFilter{Actor: "carol", Kind: "session.revoked"}); len(ev) != 1 {
		t.Errorf("logout audit: %+v", ev)
	}
}

func TestLoginThrottle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.addUser(t, "dave", auth.RoleViewer)
	e.addUser(t, "erin", auth.RoleViewer)
	for i := 0; i < 5; i++ {
		if _, err := e.svc.Login(ctx, "dave", "guess-"+string(rune('a'+i)), "10.0.0.9", "ua"); !errors.Is(err, auth.ErrBadCredentials) {
			t.Fatalf("failure %d: %v", i+1, err)
		}
	}
	// The sixth attempt is refused before the password is looked at.
	_, err := e.svc.Login(ctx, "dave", "dave-password", "10.0.0.10", "ua")
	var th *auth.ThrottledError
	if !errors.As(err, &th) || th.RetryAfter <= 0 || th.RetryAfter > 16*time.Minute {
		t.Fatalf("sixth attempt: %v", err)
	}
	// Another user from the same address is not throttled by dave's failures.
	if _, err := e.svc.Login(ctx, "erin", "erin-password", "10.0.0.9", "ua"); err != nil {
		t.Fatalf("another user: %v", err)
	}
	// After the window the right password works again, and clears the count.
	e.clock.add(16 * time.Minute)
	if _, err := e.svc.Login(ctx, "dave", "dave-password", "10.0.0.10", "ua"); err != nil {
		t.Fatalf("after the window: %v", err)
	}

	// Per address: 20 failures over many user names.
	e.clock.t = time.Now()
	for i := 0; i < 20; i++ {
		_, _ = e.svc.Login(ctx, "user"+string(rune('a'+i)), "nope-nope", "10.0.0.66", "ua")
	}
	if _, err := e.svc.Login(ctx, "erin", "erin-password", "10.0.0.66", "ua"); !errors.As(err, &th) {
		t.Fatalf("address throttle: %v", err)
	}
	if _, err := e.svc.Login(ctx, "erin", "erin-password", "10.0.0.67", "ua"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	if err := e.svc.Prune(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	p, err := e.svc.Bearer(ctx, bootstrapToken)
	if err != nil || p.Name != "bootstrap" || p.Role != auth.RoleAdmin || p.Kind != auth.KindBootstrap {
		t.Fatalf("bootstrap: %+v %v", p, err)
	}
	secret, tok, err := e.svc.CreateToken(ctx, "bootstrap", "ci", auth.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "gatehouse_") || tok.Name != "ci" || tok.Role != auth.RoleOperator || tok.CreatedBy != "bootstrap" {
		t.Fatalf("token: %q %+v", secret, tok)
	}
	p, err = e.svc.Bearer(ctx, secret)
	if err != nil || p.Name != "token:ci" || p.Role != auth.RoleOperator || p.Kind != auth.KindToken || p.ID != tok.ID {
		t.Fatalf("Bearer(token) = %+v, %v", p, err)
	}
	var stored int
	if err := e.store.Pool().QueryRow(ctx, "SELECT count(*) FROM api_tokens WHERE token_hash = $1 OR name = $2", []byte(secret), secret).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("token stored in clear: %d %v", stored, err)
	}
	toks, err := e.svc.Tokens(ctx)
	if err != nil || len(toks) != 1 || toks[0].LastUsedAt == nil {
		t.Fatalf("Tokens() = %+v, %v", toks, err)
	}
	for _, bad := range []string{"", "nope", secret + "x", flipLast(secret), bootstrapToken + " x"} {
		if _, err := e.svc.Bearer(ctx, bad); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("Bearer(%q) = %v", bad, err)
		}
	}
	if _, err := e.svc.RevokeToken(ctx, "bootstrap", tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Bearer(ctx, secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("a revoked token: %v", err)
	}
	if _, err := e.svc.RevokeToken(ctx, "bootstrap", tok.ID); !errors.Is(err, auth.ErrNotFound) {
		t.Fatalf("revoking twice: %v", err)
	}
	if _, err := e.svc.RevokeToken(ctx, "bootstrap", "not-a-uuid"); !errors.Is(err, auth.ErrNotFound) {
		t.Fatalf("revoking garbage: %v", err)
	}
	if _, _, err := e.svc.CreateToken(ctx, "bootstrap", "ci", auth.Role("god")); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("bad role: %v", err)
	}
	ev, err := e.svc.AuditTrail(ctx, auth.AuditFilter{Kind: "token"})
	if err != nil || len(ev) != 2 || ev[0].Kind != "token.revoked" || ev[1].Kind != "token.created" || ev[0].Subject != tok.ID {
		t.Fatalf("token audit: %+v %v", ev, err)
	}

	// Without a bootstrap token configured, its value is nothing.
	plain := auth.NewService(auth.Config{Store: e.store})
	if _, err := plain.Bearer(ctx, bootstrapToken); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("unconfigured bootstrap: %v", err)
	}
}

func TestEnsureAdmin(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	pw, err := e.svc.EnsureAdmin(ctx, "")
	if err != nil || len(pw) < 16 {
		t.Fatalf("first start: %q %v", pw, err)
	}
	if _, err := e.svc.Login(ctx, "admin", pw, "a", "ua"); err != nil {
		t.Fatalf("generated password: %v", err)
	}
	// Printed once: the next start generates nothing.
	if again, err := e.svc.EnsureAdmin(ctx, ""); err != nil || again != "" {
		t.Fatalf("second start: %q %v", again, err)
	}
	// GATEHOUSE_ADMIN_PASSWORD replaces it.
	if out, err := e.svc.EnsureAdmin(ctx, "from-the-environment"); err != nil || out != "" {
		t.Fatalf("with a password: %q %v", out, err)
	}
	if _, err := e.svc.Login(ctx, "admin", "from-the-environment", "a", "ua"); err != nil {
		t.Fatalf("environment password: %v", err)
	}
	if _, err := e.svc.Login(ctx, "admin", pw, "b", "ua"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Fatalf("the old password still works: %v", err)
	}
	if _, err := e.svc.EnsureAdmin(ctx, "short"); err == nil {
		t.Fatal("a short admin password is accepted")
	}

	// With a password on a fresh database, the admin is created with it;
	// replicas starting at once create it once.
	e2 := newEnv(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e2.svc.EnsureAdmin(ctx, "from-the-environment")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	users, _ := e2.svc.Users(ctx)
	if len(users) != 1 || users[0].Role != auth.RoleAdmin {
		t.Fatalf("users: %+v", users)
	}
}

// flipLast changes a secret's last character.
func flipLast(s string) string {
	last := s[len(s)-1]
	if last == 'A' {
		return s[:len(s)-1] + "B"
	}
	return s[:len(s)-1] + "A"
}

// TestLocalLoginOff: with GATEHOUSE_LOCAL_LOGIN=false only the break-glass
// user signs in with a password; every refusal is audited, and the
// break-glass sign-in too. API tokens are unchanged.
func TestLocalLoginOff(t *testing.T) {
	t.Parallel()
	store := postgres.NewStore(pgtest.NewPool(t), postgres.Options{})
	ctx := context.Background()
	svc := auth.NewService(auth.Config{Store: store, LocalLoginOff: true, BreakGlassUser: " Keyholder "})
	for _, name := range []string{"keyholder", "alice"} {
		if _, err := svc.AddUser(ctx, "test", name, name+"-password", auth.RoleAdmin, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.Login(ctx, "alice", "alice-password", "192.0.2.7", "test"); !errors.Is(err, auth.ErrLocalLoginOff) {
		t.Fatalf("alice with the right password: %v", err)
	}
	if _, err := svc.Login(ctx, "keyholder", "wrong-password", "192.0.2.7", "test"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Fatalf("break-glass user with a wrong password: %v", err)
	}
	l, err := svc.Login(ctx, "KeyHolder", "keyholder-password", "192.0.2.7", "test")
	if err != nil || l.Principal.Name != "keyholder" {
		t.Fatalf("break-glass user: %+v, %v", l, err)
	}
	trail, err := svc.AuditTrail(ctx, auth.AuditFilter{Kind: "login"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range trail {
		got = append(got, e.Kind+" "+e.Actor)
	}
	want := []string{"login.break_glass keyholder", "login.failed keyholder", "login.failed alice"}
	if strings.Join(got, ",") != strings.Join(want, ",") || !strings.Contains(string(trail[2].Data), "GATEHOUSE_LOCAL_LOGIN=false") {
		t.Fatalf("audit = %v, want %v (%s)", got, want, trail[2].Data)
	}
	secret, _, err := svc.CreateToken(ctx, "alice", "ci", auth.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := svc.Bearer(ctx, secret); err != nil || p.Role != auth.RoleOperator {
		t.Fatalf("API token with local login off: %+v, %v", p, err)
	}
	// Nobody at all when no break-glass user is named.
	none := auth.NewService(auth.Config{Store: store, LocalLoginOff: true})
	if _, err := none.Login(ctx, "keyholder", "keyholder-password", "192.0.2.8", "test"); !errors.Is(err, auth.ErrLocalLoginOff) {
		t.Fatalf("no break-glass user configured: %v", err)
	}
}
