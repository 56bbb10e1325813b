// Package sso signs people in with the company's identity provider (SPEC
// §21): OpenID Connect's authorization code flow with PKCE (S256), state
// and nonce, and an ID token verified by a maintained library
// (github.com/coreos/go-oidc with golang.org/x/oauth2): its signature by
// the issuer's JWKS, its issuer, audience (and authorized party) and
// expiry. Roles come from the token's groups claim through a RoleMap.
//
// It knows no SQL and no HTTP routing: a FlowStore keeps each sign-in
// between the redirect to the provider and the callback (server side, so
// the PKCE verifier never leaves the server and every replica can finish
// a flow another began), and internal/auth turns a verified Identity into
// a user and a session.
package sso

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/gatehousehq/gatehouse/internal/auth"
)

// CallbackPath is where the provider sends the browser back:
// <GATEHOUSE_PUBLIC_URL>/auth/oidc/callback.
const CallbackPath = "/auth/oidc/callback"

// StartPath begins a sign-in (the login page's "Sign in with …" button).
const StartPath = "/auth/oidc/start"

// DefaultGroupsClaim is the claim the groups are read from unless
// GATEHOUSE_OIDC_GROUPS_CLAIM names another.
const DefaultGroupsClaim = "groups"

// DefaultName is what the login page's button says unless
// GATEHOUSE_OIDC_NAME says otherwise: "Sign in with SSO".
const DefaultName = "SSO"

// FlowTTL is how long a sign-in may take between the redirect to the
// provider and the callback.
const FlowTTL = 10 * time.Minute

// Config configures a Client.
type Config struct {
	// Issuer is the provider's issuer URL (discovery is read from
	// <Issuer>/.well-known/openid-configuration).
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is <GATEHOUSE_PUBLIC_URL>/auth/oidc/callback.
	RedirectURL string
	// Name is shown on the login page's button.
	Name string
	// GroupsClaim names the claim holding the groups: a top-level claim
	// ("groups", "roles") or a dotted path into an object
	// ("realm_access.roles").
	GroupsClaim string
	RoleMap     RoleMap
	// Scopes are asked for besides openid (default profile and email).
	Scopes []string
	// HTTPClient talks to the provider (default: a client with a 10s
	// timeout).
	HTTPClient *http.Client
	Logger     *slog.Logger
	Store      FlowStore
	// RetryMax caps the wait between discovery attempts (default 1m).
	RetryMax time.Duration
	Now      func() time.Time
}

// Flow is one sign-in under way, kept between the redirect to the
// provider and the callback.
type Flow struct {
	// Nonce is sent in the authorization request and must come back in
	// the ID token.
	Nonce string
	// Verifier is the PKCE code verifier (its S256 challenge went to the
	// provider).
	Verifier string
	// Next is the local path to go to after signing in.
	Next      string
	ExpiresAt time.Time
}

// FlowStore keeps sign-ins under way, by the SHA-256 of their state.
type FlowStore interface {
	// SaveFlow stores a flow.
	SaveFlow(ctx context.Context, stateHash []byte, f Flow) error
	// TakeFlow reads and deletes a flow (a state works once). Errors:
	// auth.ErrNotFound when there is none, or it has expired.
	TakeFlow(ctx context.Context, stateHash []byte) (Flow, error)
}

// Identity is who the provider says signed in, verified.
type Identity struct {
	Issuer  string
	Subject string
	// PreferredUsername and Email are as the provider sent them ("": not
	// sent).
	PreferredUsername string
	Email             string
	Groups            []string
	// Role is the highest role Groups map to ("" when none does).
	Role auth.Role
}

// ErrUnavailable: the provider's discovery document could not be read
// (yet); sign-in with SSO waits for it.
var ErrUnavailable = errors.New("the identity provider cannot be reached")

// RefusedError is a callback refused: Status is the HTTP status, Reason
// what the audit trail records, Message what the person is told.
// Identity is set when the ID token was verified (a person without a
// mapped group, a disabled user).
type RefusedError struct {
	Status   int
	Reason   string
	Message  string
	Identity *Identity
}

func (e *RefusedError) Error() string { return e.Reason }

func refused(status int, message, format string, args ...any) *RefusedError {
	return &RefusedError{Status: status, Message: message, Reason: clip(fmt.Sprintf(format, args...), 500)}
}

// clip cuts what a callback's query brought (the provider's error and
// its description) to n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Client is the relying party of one provider. Start begins discovery in
// the background; until it succeeds Ready is false and Begin returns
// ErrUnavailable.
type Client struct {
	cfg  Config
	log  *slog.Logger
	http *http.Client

	mu       sync.RWMutex
	provider *gooidc.Provider
	verifier *gooidc.IDTokenVerifier
	oauth    oauth2.Config

	stop context.CancelFunc
	done chan struct{}
}

// New returns a Client; call Start.
func New(cfg Config) *Client {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = DefaultGroupsClaim
	}
	if cfg.Scopes == nil {
		cfg.Scopes = []string{"profile", "email"}
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Client{cfg: cfg, log: cfg.Logger, http: cfg.HTTPClient}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: 10 * time.Second}
	}
	return c
}

// Name is what the login page's button says after "Sign in with".
func (c *Client) Name() string { return c.cfg.Name }

// Issuer is the configured issuer URL.
func (c *Client) Issuer() string { return c.cfg.Issuer }

// Ready reports whether discovery has succeeded.
func (c *Client) Ready() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.provider != nil
}

// Start reads the provider's discovery document in the background,
// retrying (1s, 2s, 4s, … up to RetryMax) with a warning each time until
// it succeeds or Stop is called.
func (c *Client) Start(ctx context.Context) {
	ctx, c.stop = context.WithCancel(context.WithoutCancel(ctx))
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		wait := time.Second
		for attempt := 1; ; attempt++ {
			err := c.Discover(ctx)
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				return
			}
			c.log.Warn("SSO: the identity provider cannot be reached; sign-in with SSO is unavailable until it can, retrying",
				"issuer", c.cfg.Issuer, "attempt", attempt, "retry_in", wait, "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, c.cfg.RetryMax)
		}
	}()
}

// Stop ends the discovery attempts and waits for them (nil: nothing to
// stop).
func (c *Client) Stop() {
	if c != nil && c.stop != nil {
		c.stop()
		<-c.done
	}
}

// Discover reads the provider's discovery document once (Start does it
// in the background). The document's issuer must be the configured one.
func (c *Client) Discover(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(gooidc.ClientContext(ctx, c.http), 15*time.Second)
	defer cancel()
	p, err := gooidc.NewProvider(ctx, c.cfg.Issuer)
	if err != nil {
		return err
	}
	var meta struct {
		Challenges []string `json:"code_challenge_methods_supported"`
	}
	if err := p.Claims(&meta); err == nil && len(meta.Challenges) > 0 && !slices.Contains(meta.Challenges, "S256") {
		c.log.Warn("SSO: the provider does not list PKCE S256 among its code_challenge_methods_supported; sending it anyway",
			"issuer", c.cfg.Issuer, "supported", meta.Challenges)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.provider = p
	c.verifier = p.VerifierContext(gooidc.ClientContext(context.WithoutCancel(ctx), c.http),
		&gooidc.Config{ClientID: c.cfg.ClientID, Now: c.cfg.Now})
	c.oauth = oauth2.Config{ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: c.cfg.RedirectURL, Scopes: append([]string{gooidc.ScopeOpenID}, c.cfg.Scopes...)}
	c.log.Info("SSO: identity provider ready", "issuer", c.cfg.Issuer, "name", c.cfg.Name)
	return nil
}

// AuthOrigin is the origin (scheme://host) of the provider's
// authorization endpoint, "" before discovery: the login page's form
// redirects there, so its form-action must allow it.
func (c *Client) AuthOrigin() string {
	p, _, _, ok := c.current()
	if !ok {
		return ""
	}
	u, err := url.Parse(p.Endpoint().AuthURL)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

func (c *Client) current() (*gooidc.Provider, *gooidc.IDTokenVerifier, oauth2.Config, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.provider, c.verifier, c.oauth, c.provider != nil
}

// Begin starts a sign-in: it stores a flow and returns the provider's
// authorization URL (code flow, PKCE S256, state, nonce) and the state,
// which the caller also binds to the browser (a cookie) so that only the
// browser that began a sign-in can finish it. next is the local path to
// return to. Errors: ErrUnavailable.
func (c *Client) Begin(ctx context.Context, next string) (authURL, state string, err error) {
	_, _, oc, ok := c.current()
	if !ok {
		return "", "", ErrUnavailable
	}
	state, nonce, verifier := rand.Text()+rand.Text(), rand.Text()+rand.Text(), oauth2.GenerateVerifier()
	f := Flow{Nonce: nonce, Verifier: verifier, Next: next, ExpiresAt: c.cfg.Now().Add(FlowTTL)}
	if err := c.cfg.Store.SaveFlow(ctx, StateHash(state), f); err != nil {
		return "", "", fmt.Errorf("saving the sign-in flow: %w", err)
	}
	return oc.AuthCodeURL(state, gooidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), state, nil
}

// StateHash is how a flow's state is stored: its SHA-256.
func StateHash(state string) []byte {
	sum := sha256.Sum256([]byte(state))
	return sum[:]
}

// Callback finishes a sign-in from the provider's redirect: query is the
// callback's query string, browserState the state bound to the browser
// when the sign-in began ("" when it has none). It checks the state
// against both, takes the flow (once), exchanges the code with the PKCE
// verifier, verifies the ID token (signature, issuer, audience and
// authorized party, expiry) and its nonce, reads the groups and maps them
// to a role. It returns the flow (for Next) and the identity. Errors:
// *RefusedError (4xx), ErrUnavailable, or another error (5xx).
func (c *Client) Callback(ctx context.Context, query url.Values, browserState string) (*Identity, Flow, error) {
	p, verifier, oc, ok := c.current()
	if !ok {
		return nil, Flow{}, ErrUnavailable
	}
	state := query.Get("state")
	const again = "The sign-in could not be completed. Start again from the sign-in page."
	switch {
	case state == "":
		return nil, Flow{}, refused(http.StatusBadRequest, again, "callback without state")
	case browserState == "" || len(state) != len(browserState) || state != browserState:
		return nil, Flow{}, refused(http.StatusBadRequest, again, "state does not match the one this browser was given")
	}
	flow, err := c.cfg.Store.TakeFlow(ctx, StateHash(state))
	if errors.Is(err, auth.ErrNotFound) {
		return nil, Flow{}, refused(http.StatusBadRequest, "This sign-in has expired or was used already. Start again from the sign-in page.",
			"unknown, expired or reused state")
	}
	if err != nil {
		return nil, Flow{}, err
	}
	if e := query.Get("error"); e != "" {
		return nil, flow, refused(http.StatusForbidden, "The identity provider did not sign you in ("+clip(e, 60)+"). Start again from the sign-in page.",
			"provider returned error %q: %s", e, query.Get("error_description"))
	}
	code := query.Get("code")
	if code == "" {
		return nil, flow, refused(http.StatusBadRequest, again, "callback without code")
	}
	hctx := gooidc.ClientContext(ctx, c.http)
	tok, err := oc.Exchange(hctx, code, oauth2.VerifierOption(flow.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			// A code that is not good (forged, used, of another sign-in)
			// is the browser's doing; anything else is between us and
			// the provider (a wrong client secret).
			status := http.StatusBadGateway
			if re.ErrorCode == "invalid_grant" {
				status = http.StatusBadRequest
			}
			return nil, flow, refused(status, again, "code exchange refused by the provider: %s %s",
				re.ErrorCode, re.ErrorDescription)
		}
		return nil, flow, fmt.Errorf("code exchange: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, flow, refused(http.StatusBadGateway, again, "token response without an id_token")
	}
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		return nil, flow, refused(http.StatusUnauthorized, again, "ID token refused: %s", err)
	}
	switch {
	case idt.Nonce != flow.Nonce:
		return nil, flow, refused(http.StatusUnauthorized, again, "ID token refused: nonce does not match the sign-in's")
	case idt.Subject == "" || len(idt.Subject) > 255:
		return nil, flow, refused(http.StatusUnauthorized, again, "ID token refused: sub is empty or longer than 255 characters")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return nil, flow, refused(http.StatusUnauthorized, again, "ID token refused: claims: %s", err)
	}
	// Several audiences: the token must have been issued to us (azp).
	if len(idt.Audience) > 1 {
		if azp, _ := claims["azp"].(string); azp != c.cfg.ClientID {
			return nil, flow, refused(http.StatusUnauthorized, again, "ID token refused: several audiences and azp %q is not this client", azp)
		}
	}
	id := &Identity{Issuer: idt.Issuer, Subject: idt.Subject}
	id.PreferredUsername, _ = claims["preferred_username"].(string)
	id.Email, _ = claims["email"].(string)
	groups, found, err := readGroups(claims, c.cfg.GroupsClaim)
	if err == nil && !found && p.UserInfoEndpoint() != "" {
		// Some providers (Okta's default server, Keycloak without the
		// mapper in the ID token) give groups only at userinfo.
		groups, found, err = c.userinfoGroups(hctx, p, tok, idt.Subject)
	}
	if err != nil {
		return nil, flow, refused(http.StatusForbidden, "Your identity provider sent groups Gatehouse cannot read. Ask an administrator.",
			"groups claim %q: %s", c.cfg.GroupsClaim, err)
	}
	id.Groups = groups
	role, ok := c.cfg.RoleMap.Role(groups)
	if !ok {
		msg := "You signed in with " + c.cfg.Name + " as " + displayName(id) + ", but none of your groups gives a role in Gatehouse. " +
			"Ask an administrator to add you to one of: " + strings.Join(mappedGroups(c.cfg.RoleMap), ", ") + "."
		e := refused(http.StatusForbidden, msg, "no mapped group (groups: %s)", orNone(groups))
		e.Identity = id
		return nil, flow, e
	}
	id.Role = role
	return id, flow, nil
}

func (c *Client) userinfoGroups(ctx context.Context, p *gooidc.Provider, tok *oauth2.Token, sub string) ([]string, bool, error) {
	ui, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		c.log.Warn("SSO: reading groups from userinfo", "issuer", c.cfg.Issuer, "error", err)
		return nil, false, nil
	}
	if ui.Subject != sub {
		return nil, false, fmt.Errorf("userinfo is about sub %q, not %q", ui.Subject, sub)
	}
	var claims map[string]any
	if err := ui.Claims(&claims); err != nil {
		return nil, false, err
	}
	return readGroups(claims, c.cfg.GroupsClaim)
}

// readGroups reads the groups claim at path (dots go into objects): a
// list of strings, or one string. Absent: not found, no error.
func readGroups(claims map[string]any, path string) ([]string, bool, error) {
	var v any = claims
	for _, part := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		if v, ok = m[part]; !ok {
			// A claim whose name has a dot in it.
			if whole, ok := claims[path]; ok {
				v = whole
				break
			}
			return nil, false, nil
		}
	}
	var out []string
	switch g := v.(type) {
	case nil:
		return nil, true, nil
	case string:
		out = []string{g}
	case []any:
		for _, x := range g {
			s, ok := x.(string)
			if !ok {
				b, _ := json.Marshal(x)
				return nil, true, fmt.Errorf("a group is %s, not a string", b)
			}
			out = append(out, s)
		}
	default:
		b, _ := json.Marshal(v)
		return nil, true, fmt.Errorf("want a list of strings, got %.100s", b)
	}
	slices.Sort(out)
	return slices.Compact(out), true, nil
}

func displayName(id *Identity) string {
	switch {
	case id.PreferredUsername != "":
		return id.PreferredUsername
	case id.Email != "":
		return id.Email
	}
	return id.Subject
}

func mappedGroups(m RoleMap) []string {
	out := make([]string, len(m))
	for i, mp := range m {
		out[i] = mp.Group
	}
	return out
}

func orNone(groups []string) string {
	if len(groups) == 0 {
		return "none"
	}
	return strings.Join(groups, ", ")
}
