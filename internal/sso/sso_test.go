package sso_test

// The relying party against a real OpenID Provider started in the test
// (zitadel/oidc's op, internal/sso/ssotest), with the users, sessions and
// flows on a real PostgreSQL.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/sso"
	"github.com/gatehousehq/gatehouse/internal/sso/ssotest"
)

const (
	clientID     = "gatehouse"
	clientSecret = "s3cret-of-the-client"
	redirect     = "http://127.0.0.1:9/auth/oidc/callback"
	password     = "idp-password"
)

var roleMap = mustRoleMap("idp-admins=admin,payments-leads=approver,staff=viewer")

func mustRoleMap(s string) sso.RoleMap {
	m, err := sso.ParseRoleMap(s)
	if err != nil {
		panic(err)
	}
	return m
}

type bundle struct {
	idp    *ssotest.Provider
	rp     *sso.Client
	store  *postgres.Store
	auth   *auth.Service
	logs   *logLines
	config sso.Config
	swap   *swapIDToken
}

// swapIDToken stands between the relying party and the provider's token
// endpoint and, when given a token, puts it in the place of the ID token
// the provider issued (as an attacker who got hold of a token issued to
// another application would try).
type swapIDToken struct {
	mu    sync.Mutex
	token string
}

func (s *swapIDToken) set(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = tok
}

func (s *swapIDToken) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	s.mu.Lock()
	tok := s.token
	s.mu.Unlock()
	if err != nil || tok == "" || !strings.HasSuffix(r.URL.Path, "/oauth/token") {
		return resp, err
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	body["id_token"] = tok
	b, _ := json.Marshal(body)
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// logLines keeps the lines the relying party logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

// has reports whether a line holds every one of parts.
func (l *logLines) has(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.lines, func(line string) bool {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				return false
			}
		}
		return true
	})
}

func setup(t *testing.T, opts ssotest.Options, edit func(*sso.Config)) *bundle {
	t.Helper()
	opts.ClientID, opts.ClientSecret, opts.RedirectURIs = clientID, clientSecret, []string{redirect}
	idp := ssotest.Start(t, opts)
	idp.AddUser(ssotest.User{Subject: "sub-alice", Username: "alice", Email: "alice@example.com", Password: password,
		Groups: []string{"staff"}})
	store := postgres.NewStore(pgtest.NewPool(t), postgres.Options{})
	b := &bundle{idp: idp, store: store, auth: auth.NewService(auth.Config{Store: store}), logs: &logLines{}, swap: &swapIDToken{}}
	b.config = sso.Config{Issuer: idp.Issuer, ClientID: clientID, ClientSecret: clientSecret, RedirectURL: redirect,
		HTTPClient: &http.Client{Transport: b.swap, Timeout: 10 * time.Second},
		RoleMap:    roleMap, Store: store, Logger: slog.New(slog.NewTextHandler(b.logs, nil)), RetryMax: 200 * time.Millisecond}
	if edit != nil {
		edit(&b.config)
	}
	b.rp = sso.New(b.config)
	if !opts.Later {
		if err := b.rp.Discover(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// signIn runs one sign-in of username through the provider's login page
// and the callback, and opens a session for the identity.
func (b *bundle) signIn(t *testing.T, username string) (*auth.Login, error) {
	t.Helper()
	id, err := b.callback(t, username, nil)
	if err != nil {
		return nil, err
	}
	return b.auth.LoginOIDC(t.Context(), auth.OIDCLogin{Issuer: id.Issuer, Subject: id.Subject,
		PreferredUsername: id.PreferredUsername, Email: id.Email, Groups: id.Groups, Role: id.Role}, "192.0.2.1", "test")
}

// callback begins a sign-in, logs username in at the provider and hands
// the provider's redirect to Callback; tamper may change the query and
// the browser's state first.
func (b *bundle) callback(t *testing.T, username string, tamper func(b *bundle, q url.Values, state *string, nonce string)) (*sso.Identity, error) {
	t.Helper()
	ctx := t.Context()
	authURL, state, err := b.rp.Begin(ctx, "/tasks")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"code_challenge_method=S256", "code_challenge=", "nonce=", "state=", "response_type=code"} {
		if !strings.Contains(authURL, want) {
			t.Fatalf("authorization URL %s lacks %s", authURL, want)
		}
	}
	cb, err := b.idp.Login(ctx, authURL, username, password)
	if err != nil {
		t.Fatal(err)
	}
	if got := cb.Scheme + "://" + cb.Host + cb.Path; got != redirect {
		t.Fatalf("provider redirected to %s, want %s", got, redirect)
	}
	q := cb.Query()
	if tamper != nil {
		u, _ := url.Parse(authURL)
		tamper(b, q, &state, u.Query().Get("nonce"))
	}
	id, flow, err := b.rp.Callback(ctx, q, state)
	if err == nil && flow.Next != "/tasks" {
		t.Fatalf("flow next = %q", flow.Next)
	}
	return id, err
}

func refusal(t *testing.T, err error, status int, reason string) {
	t.Helper()
	var re *sso.RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("want a refusal (%d, %q), got %v", status, reason, err)
	}
	if re.Status != status || !strings.Contains(re.Reason, reason) {
		t.Fatalf("refusal = %d %q, want %d containing %q", re.Status, re.Reason, status, reason)
	}
	if re.Message == "" {
		t.Fatal("refusal without a message for the person")
	}
}

func (b *bundle) users(t *testing.T) []auth.User {
	t.Helper()
	us, err := b.auth.Users(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return us
}

func TestFirstSignInCreatesTheUserBoundToIssuerAndSubject(t *testing.T) {
	t.Parallel()
	b := setup(t, ssotest.Options{}, nil)
	l, err := b.signIn(t, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if l.Principal.Name != "alice" || l.Principal.Role != auth.RoleViewer || !slices.Equal(l.Principal.Groups, []string{"staff"}) {
		t.Fatalf("principal = %+v", l.Principal)
	}
	u, err := b.store.UserByOIDC(t.Context(), b.idp.Issuer, "sub-alice")
	if err != nil {
		t.Fatal(err)
	}
	if u.Username != "alice" || u.Email != "alice@example.com" || u.PasswordHash != "" || u.LastLoginAt == nil {
		t.Fatalf("user = %+v", u)
	}
	// The session carries the groups (policy deciders idp:<group>).
	p, _, err := b.auth.Session(t.Context(), l.Secret)
	if err != nil || !slices.Equal(p.Groups, []string{"staff"}) {
		t.Fatalf("session principal = %+v, %v", p, err)
	}
	// An SSO user has no password to sign in with.
	if _, err := b.auth.Login(t.Context(), "alice", "", "192.0.2.1", "test"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Fatalf("password sign-in of an SSO user: %v", err)
	}
	if err := b.auth.SetPassword(t.Context(), "admin", "alice", "a-long-enough-password"); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("setting an SSO user's password: %v", err)
	}
}

func TestRolesFollowTheGroupsAtEverySignIn(t *testing.T) {
	t.Parallel()
	b := setup(t, ssotest.Options{}, nil)
	steps := []struct {
		groups []string
		want   auth.Role
	}{
		{[]string{"staff", "payments-leads", "unrelated"}, auth.RoleApprover}, // the highest wins
		{[]string{"idp-admins", "staff"}, auth.RoleAdmin},
		{[]string{"staff"}, auth.RoleViewer}, // taken away at the IdP: taken away here
	}
	for _, st := range steps {
		b.idp.SetGroups("alice", st.groups...)
		l, err := b.signIn(t, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if l.Principal.Role != st.want || l.Principal.Name != "alice" {
			t.Fatalf("groups %v: principal %+v, want role %s", st.groups, l.Principal, st.want)
		}
	}
	if us := b.users(t); len(us) != 1 {
		t.Fatalf("users = %+v, want one", us)
	}
	trail, err := b.auth.AuditTrail(t.Context(), auth.AuditFilter{Kind: "user"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range trail {
		kinds = append(kinds, e.Kind+" by "+e.Actor)
	}
	// user.updated at each change of role (approver→admin, admin→viewer), created once.
	want := []string{"user.updated by sso", "user.updated by sso", "user.created by sso"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("audit = %v, want %v", kinds, want)
	}
}

func TestUsersAreFoundBySubjectNeverByName(t *testing.T) {
	t.Parallel()
	b := setup(t, ssotest.Options{}, nil)
	ctx := t.Context()
	// A local alice exists: the SSO alice is someone else.
	if _, err := b.auth.AddUser(ctx, "admin", "alice", "local-alice-password", auth.RoleAdmin, nil); err != nil {
		t.Fatal(err)
	}
	l, err := b.signIn(t, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if l.Principal.Name != "alice-2" || l.Principal.Role != auth.RoleViewer {
		t.Fatalf("SSO alice became %+v, want alice-2, a viewer", l.Principal)
	}
	// Another person whose preferred_username is alice too, and one with
	// only an email address.
	b.idp.AddUser(ssotest.User{Subject: "sub-other", Username: "Alice", Password: password, Groups: []string{"staff"}})
	b.idp.AddUser(ssotest.User{Subject: "sub-carol", Email: "Carol.Jones+x@example.com", Password: password, Groups: []string{"staff"}})
	if l, err = b.signIn(t, "Alice"); err != nil || l.Principal.Name != "alice-3" {
		t.Fatalf("second alice: %+v, %v", l, err)
	}
	if l, err = b.signIn(t, ""); err != nil || l.Principal.Name != "carol.jones-x" {
		t.Fatalf("email only: %+v, %v", l, err)
	}
	// alice renames herself at the IdP: still the same user.
	b.idp.AddUser(ssotest.User{Subject: "sub-alice", Username: "mallory", Password: password, Groups: []string{"payments-leads"}})
	if l, err = b.signIn(t, "mallory"); err != nil || l.Principal.Name != "alice-2" || l.Principal.Role != auth.RoleApprover {
		t.Fatalf("renamed alice: %+v, %v", l, err)
	}
	local, err := b.store.UserByName(ctx, "alice")
	if err != nil || local.Role != auth.RoleAdmin || local.SSO() {
		t.Fatalf("the local alice changed: %+v, %v", local, err)
	}
}

func TestNoMappedGroupIsRefusedAndCreatesNoUser(t *testing.T) {
	t.Parallel()
	b := setup(t, ssotest.Options{}, nil)
	b.idp.SetGroups("alice", "contractors", "Staff") // matching is exact
	_, err := b.callback(t, "alice", nil)
	refusal(t, err, http.StatusForbidden, "no mapped group (groups: Staff, contractors)")
	var re *sso.RefusedError
	errors.As(err, &re)
	if re.Identity == nil || re.Identity.Subject != "sub-alice" ||
		!strings.Contains(re.Message, "idp-admins, payments-leads, staff") {
		t.Fatalf("refusal = %+v", re)
	}
	if us := b.users(t); len(us) != 0 {
		t.Fatalf("users = %+v, want none", us)
	}
}

func TestDisabledUserIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, ssotest.Options{}, nil)
	if _, err := b.signIn(t, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := b.auth.DisableUser(t.Context(), "admin", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.signIn(t, "alice"); !errors.Is(err, auth.ErrDisabled) {
		t.Fatalf("disabled user signed in: %v", err)
	}
	trail, _ := b.auth.AuditTrail(t.Context(), auth.AuditFilter{Kind: auth.AuditLoginFailed})
	if len(trail) != 1 || !strings.Contains(string(trail[0].Data), "the user is disabled") {
		t.Fatalf("audit = %+v", trail)
	}
}

func TestTamperedCallbacksAreRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		tamper ssotest.Tamper
		edit   func(b *bundle, q url.Values, state *string, nonce string)
		status int
		reason string
	}{
		{name: "StateOfAnotherBrowser", edit: func(_ *bundle, q url.Values, state *string, _ string) { *state = "someone-elses-state" },
			status: 400, reason: "state does not match"},
		{name: "StateChangedInTheURL", edit: func(_ *bundle, q url.Values, state *string, _ string) {
			q["state"] = []string{"forged"}
			*state = "forged"
		}, status: 400, reason: "unknown, expired or reused state"},
		{name: "NoState", edit: func(_ *bundle, q url.Values, state *string, _ string) { delete(q, "state") },
			status: 400, reason: "without state"},
		{name: "CodeOfAnotherSignIn", edit: func(_ *bundle, q url.Values, state *string, _ string) { q["code"] = []string{"not-a-code"} },
			status: 400, reason: "code exchange refused by the provider: invalid_grant"},
		{name: "ProviderError", edit: func(_ *bundle, q url.Values, state *string, _ string) {
			delete(q, "code")
			q["error"] = []string{"access_denied"}
		}, status: 403, reason: `provider returned error "access_denied"`},
		{name: "WrongNonce", tamper: ssotest.Tamper{Nonce: "replayed-nonce"}, status: 401, reason: "nonce does not match"},
		{name: "TokenOfAnotherClient", edit: otherToken(), status: 401, reason: "expected audience"},
		{name: "TokenOfAnotherClientNamingUsToo", edit: otherToken(clientID), status: 401, reason: `azp "other-client" is not this client`},
		{name: "ForeignSignature", tamper: ssotest.Tamper{ForeignKey: true}, status: 401, reason: "signature"},
		{name: "Expired", tamper: ssotest.Tamper{Expired: true}, status: 401, reason: "expired"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, ssotest.Options{}, nil)
			b.idp.SetGroups("alice", "idp-admins")
			b.idp.SetTamper(tc.tamper)
			_, err := b.callback(t, "alice", tc.edit)
			refusal(t, err, tc.status, tc.reason)
			if us := b.users(t); len(us) != 0 {
				t.Fatalf("users = %+v, want none", us)
			}
			// The same provider, untampered, signs alice in.
			b.idp.SetTamper(ssotest.Tamper{})
			b.swap.set("")
			if _, err := b.signIn(t, "alice"); err != nil {
				t.Fatalf("untampered sign-in: %v", err)
			}
		})
	}
}

// otherToken substitutes an ID token the provider issued to another of
// its clients, for the same person and with the same nonce.
func otherToken(extraAudience ...string) func(b *bundle, q url.Values, state *string, nonce string) {
	return func(b *bundle, q url.Values, state *string, nonce string) {
		tok, err := b.idp.IDTokenFor(context.Background(), "alice", nonce, extraAudience...)
		if err != nil {
			panic(err)
		}
		b.swap.set(tok)
	}
}

func TestAStateWorksOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, ssotest.Options{}, nil)
	ctx := t.Context()
	authURL, state, err := b.rp.Begin(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	cb, err := b.idp.Login(ctx, authURL, "alice", password)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.rp.Callback(ctx, cb.Query(), state); err != nil {
		t.Fatal(err)
	}
	_, _, err = b.rp.Callback(ctx, cb.Query(), state)
	refusal(t, err, 400, "reused state")
}

func TestGroupsFromUserinfoWhenTheIDTokenHasNone(t *testing.T) {
	t.Parallel()
	b := setup(t, ssotest.Options{GroupsInUserinfoOnly: true, GroupsClaim: "roles"}, func(c *sso.Config) { c.GroupsClaim = "roles" })
	b.idp.SetGroups("alice", "payments-leads")
	l, err := b.signIn(t, "alice")
	if err != nil || l.Principal.Role != auth.RoleApprover {
		t.Fatalf("%+v, %v", l, err)
	}
}

func TestAnUnreachableIssuerIsRetriedInTheBackground(t *testing.T) {
	t.Parallel()
	b := setup(t, ssotest.Options{Later: true}, func(c *sso.Config) {
		c.HTTPClient = &http.Client{Timeout: 300 * time.Millisecond}
	})
	b.rp.Start(t.Context())
	t.Cleanup(b.rp.Stop)
	if _, _, err := b.rp.Begin(t.Context(), "/"); !errors.Is(err, sso.ErrUnavailable) {
		t.Fatalf("Begin before discovery: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !b.logs.has("attempt=2") {
		if time.Now().After(deadline) {
			t.Fatal("no retry logged")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b.rp.Ready() {
		t.Fatal("ready while the issuer is down")
	}
	if !b.logs.has("WARN", "identity provider cannot be reached", "retrying", "issuer="+b.idp.Issuer, "retry_in=") {
		t.Fatal("the log does not say what is wrong")
	}
	b.idp.Serve()
	for !b.rp.Ready() {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatal("not ready after the issuer came up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := b.signIn(t, "alice"); err != nil {
		t.Fatal(err)
	}
}

func TestParseRoleMap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want, err string }{
		{in: "idp-admins=admin, payments-leads=approver,staff=viewer", want: "idp-admins=admin,payments-leads=approver,staff=viewer"},
		{in: "/corp/ops team=operator", want: "/corp/ops team=operator"},
		{in: "", err: "no group=role pairs"},
		{in: "staff", err: "want group=role"},
		{in: "staff=owner", err: "unknown role"},
		{in: "=admin", err: "empty group"},
		{in: "staff=viewer,staff=admin", err: "mapped twice"},
	} {
		m, err := sso.ParseRoleMap(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseRoleMap(%q) error = %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || m.String() != tc.want):
			t.Errorf("ParseRoleMap(%q) = %v, %v; want %s", tc.in, m, err, tc.want)
		}
	}
}

func TestOIDCUsername(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ preferred, email, want string }{
		{"alice", "x@example.com", "alice"},
		{"Alice.Smith@corp.example", "", "alice.smith"},
		{"", "bob@example.com", "bob"},
		{"  ", "", "user"},
		{"Zoë Ärger", "", "zo-rger"},
		{"bootstrap", "", "bootstrap-user"},
		{"___", "carol@x", "carol"},
		{strings.Repeat("a", 80), "", strings.Repeat("a", 63)},
	} {
		if got := auth.OIDCUsername(tc.preferred, tc.email); got != tc.want {
			t.Errorf("OIDCUsername(%q, %q) = %q, want %q", tc.preferred, tc.email, got, tc.want)
		}
	}
}

// TestLosingTheMappedGroupEndsAccess: a user whose groups no longer map
// (moved out at the IdP) is refused, and their open sessions end.
func TestLosingTheMappedGroupEndsAccess(t *testing.T) {
	t.Parallel()
	b := setup(t, ssotest.Options{}, nil)
	ctx := t.Context()
	l, err := b.signIn(t, "alice")
	if err != nil {
		t.Fatal(err)
	}
	b.idp.SetGroups("alice", "alumni")
	_, err = b.callback(t, "alice", nil)
	refusal(t, err, http.StatusForbidden, "no mapped group (groups: alumni)")
	var re *sso.RefusedError
	errors.As(err, &re)
	id := re.Identity
	if err := b.auth.OIDCUnmapped(ctx, auth.OIDCLogin{Issuer: id.Issuer, Subject: id.Subject, Groups: id.Groups}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.auth.Session(ctx, l.Secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("the session outlived the group: %v", err)
	}
	u, err := b.store.UserByOIDC(ctx, b.idp.Issuer, "sub-alice")
	if err != nil || !slices.Equal(u.IdPGroups, []string{"alumni"}) {
		t.Fatalf("user after: %+v, %v", u, err)
	}
	trail, _ := b.auth.AuditTrail(ctx, auth.AuditFilter{Kind: auth.AuditSessionRevoked})
	if len(trail) != 1 || trail[0].Actor != auth.SSOActor || !strings.Contains(string(trail[0].Data), "no group") {
		t.Fatalf("audit: %+v", trail)
	}
	// Someone never seen before is simply refused.
	if err := b.auth.OIDCUnmapped(ctx, auth.OIDCLogin{Issuer: b.idp.Issuer, Subject: "sub-nobody"}); err != nil {
		t.Fatal(err)
	}
}
