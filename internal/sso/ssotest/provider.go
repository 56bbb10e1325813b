// Package ssotest runs a real OpenID Provider in the test process: the
// certified provider of github.com/zitadel/oidc's op package over a small
// in-memory storage, with a login page of its own. Tests sign people in
// through it by HTTP (Provider.Login) or with a browser, change their
// groups between logins, and make it misbehave on purpose (Tamper) to see
// the relying party refuse: a token for another audience, a wrong nonce,
// an expired token, a token signed by a key its JWKS does not publish.
//
// Test support: it imports nothing of the module.
package ssotest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is a person the provider knows.
type User struct {
	Subject  string
	Username string // preferred_username ("": not sent)
	Email    string // ("": not sent)
	Password string
	Groups   []string
}

// OtherClient is a second client the provider knows (another application
// of the same company): IDTokenFor signs people in to it.
const (
	OtherClient         = "other-client"
	otherClientSecret   = "other-client-secret"
	otherClientRedirect = "http://127.0.0.1:9/other/callback"
)

// Tamper makes the provider issue tokens a relying party must refuse.
// The zero value tampers with nothing.
type Tamper struct {
	// Audience is the ID token's aud (the provider adds the client's own
	// id when it is missing: a certified provider never leaves it out).
	Audience []string
	// Nonce replaces the nonce the relying party sent.
	Nonce string
	// Expired issues ID tokens that expired an hour ago.
	Expired bool
	// ForeignKey signs with a key of the same id that the JWKS does not
	// publish.
	ForeignKey bool
}

// Options configure a provider.
type Options struct {
	ClientID     string
	ClientSecret string
	// RedirectURIs the client may use (exact match, as the spec wants).
	RedirectURIs []string
	// GroupsClaim is the claim the groups travel in (default "groups").
	GroupsClaim string
	// GroupsInUserinfoOnly leaves the groups out of the ID token: only the
	// userinfo endpoint has them (as Okta's default server does).
	GroupsInUserinfoOnly bool
	// Later: Start only binds the address; Serve starts answering (an
	// issuer that is down when the relying party starts).
	Later bool
}

// Provider is a running OpenID Provider.
type Provider struct {
	// Issuer is the provider's URL (http://127.0.0.1:port).
	Issuer string
	opts   Options
	srv    *httptest.Server
	op     *op.Provider

	mu       sync.Mutex
	users    map[string]*User // by username
	requests map[string]*authRequest
	codes    map[string]string // code → request id
	tokens   map[string]*accessToken
	tamper   Tamper
	key      *rsa.PrivateKey
	foreign  *rsa.PrivateKey
	logins   int
}

// Start runs a provider until the test ends.
func Start(t testing.TB, opts Options) *Provider {
	t.Helper()
	if opts.GroupsClaim == "" {
		opts.GroupsClaim = "groups"
	}
	p := &Provider{opts: opts, users: map[string]*User{}, requests: map[string]*authRequest{},
		codes: map[string]string{}, tokens: map[string]*accessToken{}}
	var err error
	if p.key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	if p.foreign, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	p.srv = httptest.NewUnstartedServer(nil)
	p.Issuer = "http://" + p.srv.Listener.Addr().String()
	cfg := &op.Config{CryptoKey: sha256.Sum256([]byte(p.Issuer)), CodeMethodS256: true, AuthMethodPost: true}
	p.op, err = op.NewProvider(cfg, &storage{p}, op.StaticIssuer(p.Issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", p.loginPage)
	mux.Handle("POST /login", op.NewIssuerInterceptor(p.op.IssuerFromRequest).HandlerFunc(p.login))
	mux.Handle("/", p.op)
	p.srv.Config.Handler = mux
	if !opts.Later {
		p.srv.Start()
	}
	t.Cleanup(p.srv.Close)
	return p
}

// Serve starts answering, for a provider started with Options.Later.
func (p *Provider) Serve() { p.srv.Start() }

// Close stops the provider (an issuer that has gone away).
func (p *Provider) Close() { p.srv.Close() }

// AddUser adds a user, or replaces the one of the same subject (a person
// renamed at the provider).
func (p *Provider) AddUser(u User) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, old := range p.users {
		if old.Subject == u.Subject {
			delete(p.users, name)
		}
	}
	cp := u
	cp.Groups = slices.Clone(u.Groups)
	p.users[u.Username] = &cp
}

// SetGroups changes a user's groups, as an IdP admin would between logins.
func (p *Provider) SetGroups(username string, groups ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.users[username].Groups = slices.Clone(groups)
}

// SetTamper changes how the provider misbehaves from the next token on.
func (p *Provider) SetTamper(t Tamper) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tamper = t
}

// Logins counts the successful sign-ins at the provider's login page.
func (p *Provider) Logins() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logins
}

// Login signs username in at the provider for the authorization request
// at authURL, as a browser would: it follows the provider's redirects to
// its login page, posts the form, and returns the URL the provider sends
// the browser back to (the relying party's callback, with code and state),
// without visiting it.
func (p *Provider) Login(ctx context.Context, authURL, username, password string) (*url.URL, error) {
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(u string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		return client.Do(req)
	}
	resp, err := get(authURL)
	if err != nil {
		return nil, err
	}
	loc, err := redirect(resp)
	if err != nil {
		return nil, fmt.Errorf("authorize: %w", err)
	}
	id := loc.Query().Get("authRequestID")
	if id == "" {
		return nil, fmt.Errorf("authorize: redirected to %s, not the login page", loc)
	}
	form := url.Values{"id": {id}, "username": {username}, "password": {password}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Issuer+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err = client.Do(req); err != nil {
		return nil, err
	}
	if loc, err = redirect(resp); err != nil {
		return nil, fmt.Errorf("login: %w", err)
	}
	// The provider's own callback issues the code and redirects to the
	// relying party.
	if resp, err = get(loc.String()); err != nil {
		return nil, err
	}
	if loc, err = redirect(resp); err != nil {
		return nil, fmt.Errorf("authorize callback: %w", err)
	}
	return loc, nil
}

// IDTokenFor signs username in to OtherClient with nonce, through the
// provider's whole code flow, and returns the ID token it issues: a real,
// validly signed token whose audience is OtherClient (plus extraAudience)
// and whose authorized party is OtherClient, for a test to substitute
// for the relying party's own.
func (p *Provider) IDTokenFor(ctx context.Context, username, nonce string, extraAudience ...string) (string, error) {
	p.mu.Lock()
	saved := p.tamper
	p.tamper = Tamper{Audience: append([]string{OtherClient}, extraAudience...)}
	p.mu.Unlock()
	authURL := p.Issuer + "/authorize?" + url.Values{"client_id": {OtherClient}, "response_type": {"code"},
		"scope": {"openid profile email"}, "redirect_uri": {otherClientRedirect}, "state": {"other-state"},
		"nonce": {nonce}}.Encode()
	cb, err := p.Login(ctx, authURL, username, p.password(username))
	p.mu.Lock()
	p.tamper = saved
	p.mu.Unlock()
	if err != nil {
		return "", err
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {cb.Query().Get("code")},
		"redirect_uri": {otherClientRedirect}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Issuer+"/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(OtherClient, otherClientSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		IDToken string `json:"id_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.IDToken == "" {
		return "", fmt.Errorf("token endpoint: status %d, %v", resp.StatusCode, err)
	}
	return body.IDToken, nil
}

func (p *Provider) password(username string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if u := p.users[username]; u != nil {
		return u.Password
	}
	return ""
}

func redirect(resp *http.Response) (*url.URL, error) {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 3 {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return resp.Request.URL.Parse(resp.Header.Get("Location"))
}

var loginTmpl = template.Must(template.New("login").Parse(`<!doctype html>
<html><head><title>Test IdP: sign in</title></head><body>
<h1>Test identity provider</h1>
{{if .Error}}<p id="idp-error">{{.Error}}</p>{{end}}
<form method="post" action="/login">
<input type="hidden" name="id" value="{{.ID}}">
<label>User name <input id="idp-username" name="username"></label>
<label>Password <input id="idp-password" name="password" type="password"></label>
<button id="idp-submit" type="submit">Sign in</button>
</form></body></html>`))

func (p *Provider) loginPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = loginTmpl.Execute(w, map[string]string{"ID": r.URL.Query().Get("authRequestID")})
}

func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	id := r.FormValue("id")
	p.mu.Lock()
	u := p.users[r.FormValue("username")]
	req := p.requests[id]
	ok := u != nil && req != nil && u.Password == r.FormValue("password")
	if ok {
		req.subject, req.done, req.authTime = u.Subject, true, time.Now()
		p.logins++
	}
	p.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = loginTmpl.Execute(w, map[string]string{"ID": id, "Error": "wrong user name or password"})
		return
	}
	http.Redirect(w, r, op.AuthCallbackURL(p.op)(r.Context(), id), http.StatusFound)
}

func (p *Provider) userBySubject(sub string) *User {
	for _, u := range p.users {
		if u.Subject == sub {
			return u
		}
	}
	return nil
}

// --- the op.AuthRequest ---

type authRequest struct {
	id, clientID, redirectURI, state, nonce string
	scopes                                  []string
	responseType                            oidc.ResponseType
	responseMode                            oidc.ResponseMode
	challenge                               *oidc.CodeChallenge
	subject                                 string
	done                                    bool
	authTime                                time.Time
	// audience and nonce as tampered when the request was made.
	audience []string
}

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string                 { return a.audience }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.clientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.challenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.responseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.responseMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }

type accessToken struct {
	subject  string
	clientID string
	scopes   []string
	expires  time.Time
}

// --- the op.Client ---

type client struct {
	p         *Provider
	id        string
	redirects []string
	lifetime  time.Duration
}

func (c *client) GetID() string                       { return c.id }
func (c *client) RedirectURIs() []string              { return c.redirects }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType { return []oidc.GrantType{oidc.GrantTypeCode} }
func (c *client) LoginURL(id string) string {
	return c.p.Issuer + "/login?authRequestID=" + url.QueryEscape(id)
}
func (c *client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }
func (c *client) IDTokenLifetime() time.Duration      { return c.lifetime }
func (c *client) DevMode() bool                       { return false }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) IsScopeAllowed(string) bool           { return true }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c *client) ClockSkew() time.Duration             { return 0 }

// --- keys ---

type signingKey struct{ key *rsa.PrivateKey }

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.key }
func (k signingKey) ID() string                                  { return "k1" }

type publicKey struct{ key *rsa.PrivateKey }

func (k publicKey) ID() string                         { return "k1" }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.key.PublicKey }

// --- the op.Storage ---

type storage struct{ p *Provider }

var errNotFound = errors.New("not found")

func (s *storage) CreateAuthRequest(_ context.Context, r *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	req := &authRequest{id: rand.Text(), clientID: r.ClientID, redirectURI: r.RedirectURI, state: r.State,
		nonce: r.Nonce, scopes: r.Scopes, responseType: r.ResponseType, responseMode: r.ResponseMode,
		audience: []string{r.ClientID}}
	if r.CodeChallenge != "" {
		req.challenge = &oidc.CodeChallenge{Challenge: r.CodeChallenge, Method: r.CodeChallengeMethod}
	}
	if p.tamper.Audience != nil {
		req.audience = slices.Clone(p.tamper.Audience)
	}
	if p.tamper.Nonce != "" {
		req.nonce = p.tamper.Nonce
	}
	p.requests[req.id] = req
	return req, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if r, ok := s.p.requests[id]; ok {
		return r, nil
	}
	return nil, errNotFound
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.p.mu.Lock()
	id, ok := s.p.codes[code]
	s.p.mu.Unlock()
	if !ok {
		return nil, errNotFound
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	delete(s.p.requests, id)
	for code, rid := range s.p.codes {
		if rid == id {
			delete(s.p.codes, code)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, r op.TokenRequest) (string, time.Time, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	id := rand.Text()
	t := &accessToken{subject: r.GetSubject(), scopes: r.GetScopes(), expires: time.Now().Add(5 * time.Minute)}
	if ar, ok := r.(*authRequest); ok {
		t.clientID = ar.clientID
	}
	s.p.tokens[id] = t
	return id, t.expires, nil
}

func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errors.New("refresh tokens are not offered")
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *storage) TerminateSession(context.Context, string, string) error { return nil }

func (s *storage) RevokeToken(_ context.Context, token, _, _ string) *oidc.Error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	delete(s.p.tokens, token)
	return nil
}

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.p.tamper.ForeignKey {
		return signingKey{s.p.foreign}, nil
	}
	return signingKey{s.p.key}, nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{s.p.key}}, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	c := &client{p: s.p, id: id, lifetime: 5 * time.Minute}
	switch id {
	case s.p.opts.ClientID:
		c.redirects = s.p.opts.RedirectURIs
	case OtherClient:
		c.redirects = []string{otherClientRedirect}
	default:
		return nil, errNotFound
	}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.p.tamper.Expired {
		c.lifetime = -time.Hour
	}
	return c, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	if (id == s.p.opts.ClientID && secret == s.p.opts.ClientSecret) || (id == OtherClient && secret == otherClientSecret) {
		return nil
	}
	return errors.New("invalid client")
}

// setUserinfo fills the standard claims the scopes ask for, and the
// groups.
func (s *storage) setUserinfo(info *oidc.UserInfo, subject string, scopes []string, idToken bool) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	u := s.p.userBySubject(subject)
	if u == nil {
		return errNotFound
	}
	info.Subject = u.Subject
	for _, sc := range scopes {
		switch sc {
		case oidc.ScopeProfile:
			info.PreferredUsername = u.Username
		case oidc.ScopeEmail:
			info.Email, info.EmailVerified = u.Email, oidc.Bool(u.Email != "")
		}
	}
	if !idToken || !s.p.opts.GroupsInUserinfoOnly {
		info.AppendClaims(s.p.opts.GroupsClaim, slices.Clone(u.Groups))
	}
	return nil
}

func (s *storage) SetUserinfoFromScopes(_ context.Context, info *oidc.UserInfo, userID, _ string, scopes []string) error {
	return s.setUserinfo(info, userID, scopes, true)
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, subject, _ string) error {
	s.p.mu.Lock()
	t, ok := s.p.tokens[tokenID]
	s.p.mu.Unlock()
	if !ok || time.Now().After(t.expires) {
		return errors.New("token is not valid")
	}
	return s.setUserinfo(info, t.subject, t.scopes, false)
}

func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errors.New("introspection is not offered")
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errNotFound
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("JWT profile is not offered")
}

func (s *storage) Health(context.Context) error { return nil }
