package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"regexp"
	"strings"
	"time"
)

// User is a person who logs in.
type User struct {
	ID           string
	Username     string
	PasswordHash string
	Role         Role
	Kinds        []string
	Disabled     bool
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// Email is where notifications go ("": none); SlackID maps a Slack
	// user to this user (SPEC §12).
	Email   string
	SlackID string
	// OIDCIssuer and OIDCSubject bind a user who signs in with SSO to the
	// identity provider's issuer and sub (both "" for a local user);
	// IdPGroups are the provider's groups at the last sign-in (SPEC §21).
	OIDCIssuer  string
	OIDCSubject string
	IdPGroups   []string
	LastLoginAt *time.Time
}

// SSO reports whether the user signs in with the identity provider.
func (u User) SSO() bool { return u.OIDCSubject != "" }

// Token is an API token as stored: never its secret.
type Token struct {
	ID         string
	Name       string
	Role       Role
	CreatedBy  string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

// Session is a browser session as stored, with its user.
type Session struct {
	ID         string
	UserID     string
	CSRFKey    []byte
	CreatedAt  time.Time
	LastSeenAt time.Time
	ExpiresAt  time.Time
	RevokedAt  *time.Time
	// The user, as of the lookup.
	Username string
	Role     Role
	Kinds    []string
	Disabled bool
	// Groups are the user's IdP groups as of their last sign-in.
	Groups []string
}

// NewSession is a session to store.
type NewSession struct {
	TokenHash []byte
	UserID    string
	CSRFKey   []byte
	UserAgent string
	Addr      string
	ExpiresAt time.Time
}

// LoginFailures counts recent failed logins.
type LoginFailures struct {
	ByUser, ByAddr         int
	UserOldest, AddrOldest time.Time
}

// AuditEvent is one entry of the audit trail: an administrative action
// (audit_events) or an action on a task (task_events; TaskID and Seq set).
type AuditEvent struct {
	At      time.Time
	Actor   string
	Kind    string
	Subject string
	Data    json.RawMessage
	TaskID  string
	Seq     int64
}

// AuditFilter selects audit events: empty strings and zero times select
// everything; Kind matches exactly or as a prefix ("user" is user.*).
type AuditFilter struct {
	Actor string
	Kind  string
	Since time.Time
	Until time.Time
	Limit int
}

// Audit event kinds written by this package and the store.
const (
	AuditUserCreated     = "user.created"
	AuditUserDisabled    = "user.disabled"
	AuditUserEnabled     = "user.enabled"
	AuditUserUpdated     = "user.updated"
	AuditUserPassword    = "user.password_set"
	AuditTokenCreated    = "token.created"
	AuditTokenRevoked    = "token.revoked"
	AuditSessionCreated  = "session.created"
	AuditSessionRevoked  = "session.revoked"
	AuditDecisionRefused = "decision.refused"
	// AuditLoginFailed is a sign-in refused (wrong password, unknown or
	// disabled user, or throttled; or an SSO callback refused, with
	// "method": "oidc"); the actor is the user name tried.
	AuditLoginFailed = "login.failed"
	// AuditBreakGlass is a password sign-in of the break-glass user while
	// password sign-in is off for everyone else.
	AuditBreakGlass = "login.break_glass"
)

// SSOActor is the actor of what a sign-in with the identity provider does
// to users: creating them, changing their role to what their groups map to.
const SSOActor = "sso"

// Store keeps users, sessions, tokens, login attempts and the audit trail.
// Every administrative write records its audit event in the same
// transaction, with actor.
type Store interface {
	// CreateUser stores a user. Errors: ErrExists.
	CreateUser(ctx context.Context, u User, actor string) (*User, error)
	// CreateUserIfMissing stores a user unless one of that name exists;
	// false when it existed.
	CreateUserIfMissing(ctx context.Context, u User, actor string) (bool, error)
	// UserByName errors: ErrNotFound.
	UserByName(ctx context.Context, username string) (*User, error)
	Users(ctx context.Context) ([]User, error)
	// SetUserDisabled disables (revoking its sessions) or enables a user.
	// Errors: ErrNotFound.
	SetUserDisabled(ctx context.Context, username string, disabled bool, actor string) error
	// SetUserRole errors: ErrNotFound.
	SetUserRole(ctx context.Context, username string, role Role, kinds []string, actor string) error
	// SetUserPassword replaces the hash and revokes the user's sessions.
	// Errors: ErrNotFound.
	SetUserPassword(ctx context.Context, username, hash, actor string) error
	// SetUserEmail and SetUserSlack set ("" clears) a user's email address
	// and Slack user id. Errors: ErrNotFound, ErrExists (a Slack id that
	// maps to another user).
	SetUserEmail(ctx context.Context, username, email, actor string) error
	SetUserSlack(ctx context.Context, username, slackID, actor string) error
	// UserBySlack errors: ErrNotFound.
	UserBySlack(ctx context.Context, slackID string) (*User, error)
	// UserByOIDC finds the user bound to an issuer and subject. Errors:
	// ErrNotFound.
	UserByOIDC(ctx context.Context, issuer, subject string) (*User, error)
	// CreateOIDCUser stores the user of a first SSO sign-in (no password;
	// u.OIDCIssuer, u.OIDCSubject, u.IdPGroups set). Errors: ErrExists
	// when the name is taken or the subject is bound already.
	CreateOIDCUser(ctx context.Context, u User, actor string) (*User, error)
	// SetOIDCLogin records a later SSO sign-in: role (audited when it
	// changes), groups, time. Errors: ErrNotFound.
	SetOIDCLogin(ctx context.Context, userID string, role Role, groups []string, actor string) (*User, error)
	// EndOIDCAccess records the groups of a sign-in that maps to no role
	// and ends every session of the user; it returns how many ended.
	// Errors: ErrNotFound.
	EndOIDCAccess(ctx context.Context, userID string, groups []string, actor string) (int, error)

	CreateSession(ctx context.Context, s NewSession) (*Session, error)
	// SessionByHash errors: ErrNotFound.
	SessionByHash(ctx context.Context, hash []byte) (*Session, error)
	TouchSession(ctx context.Context, id string) error
	// RevokeSession errors: ErrNotFound when it is not active.
	RevokeSession(ctx context.Context, id, actor string) error

	CreateToken(ctx context.Context, name string, hash []byte, role Role, createdBy string) (*Token, error)
	// TokenByHash errors: ErrNotFound.
	TokenByHash(ctx context.Context, hash []byte) (*Token, error)
	TouchToken(ctx context.Context, id string) error
	Tokens(ctx context.Context) ([]Token, error)
	// RevokeToken errors: ErrNotFound when no active token has that id.
	RevokeToken(ctx context.Context, id, actor string) (*Token, error)

	RecordLogin(ctx context.Context, username, addr string, ok bool) error
	LoginFailures(ctx context.Context, username, addr string, since time.Time) (LoginFailures, error)
	// Prune deletes sessions and login attempts that ended before a time.
	Prune(ctx context.Context, before time.Time) error

	AddAudit(ctx context.Context, e AuditEvent) error
	AuditTrail(ctx context.Context, f AuditFilter) ([]AuditEvent, error)
}

// Throttle limits failed logins within Window: per user name and per
// client address.
type Throttle struct {
	PerUser int
	PerAddr int
	Window  time.Duration
}

// DefaultThrottle: 5 failures per user name, 20 per address, in 15 minutes.
var DefaultThrottle = Throttle{PerUser: 5, PerAddr: 20, Window: 15 * time.Minute}

// ThrottledError refuses a login after too many failures (HTTP 429).
type ThrottledError struct{ RetryAfter time.Duration }

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("too many failed logins; try again in %s", e.RetryAfter.Round(time.Second))
}

// Config configures a Service.
type Config struct {
	Store Store
	// BootstrapToken, when set, is an admin bearer token acting as the
	// principal "bootstrap".
	BootstrapToken string
	// SessionIdle ends a session unused for this long (default 12h);
	// SessionMax ends any session this long after login (default 7 days).
	SessionIdle time.Duration
	SessionMax  time.Duration
	Throttle    Throttle
	// LocalLoginOff turns password sign-in off for everyone but
	// BreakGlassUser (GATEHOUSE_LOCAL_LOGIN=false,
	// GATEHOUSE_BREAK_GLASS_USER).
	LocalLoginOff  bool
	BreakGlassUser string
	Logger         *slog.Logger
	Now            func() time.Time
}

// Default session lifetimes.
const (
	DefaultSessionIdle = 12 * time.Hour
	DefaultSessionMax  = 7 * 24 * time.Hour
	// touchEvery is how stale last_seen_at / last_used_at may get before a
	// request writes it: not one write per request.
	touchEvery = time.Minute
)

// Service authenticates principals and administers users and tokens.
type Service struct {
	store        Store
	bootstrapSum [sha256.Size]byte
	hasBootstrap bool
	idle, max    time.Duration
	throttle     Throttle
	localOff     bool
	breakGlass   string
	log          *slog.Logger
	now          func() time.Time
}

// NewService returns a Service over c.Store.
func NewService(c Config) *Service {
	s := &Service{store: c.Store, idle: c.SessionIdle, max: c.SessionMax, throttle: c.Throttle, log: c.Logger, now: c.Now,
		localOff: c.LocalLoginOff, breakGlass: strings.ToLower(strings.TrimSpace(c.BreakGlassUser))}
	if c.BootstrapToken != "" {
		s.bootstrapSum, s.hasBootstrap = sha256.Sum256([]byte(c.BootstrapToken)), true
	}
	if s.idle <= 0 {
		s.idle = DefaultSessionIdle
	}
	if s.max <= 0 {
		s.max = DefaultSessionMax
	}
	if s.throttle.Window <= 0 {
		s.throttle = DefaultThrottle
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// LocalLogin reports whether password sign-in is open to everyone (false:
// only to BreakGlassUser).
func (s *Service) LocalLogin() bool { return !s.localOff }

// BreakGlassUser is the one user who may sign in with a password while
// password sign-in is off ("": nobody).
func (s *Service) BreakGlassUser() string { return s.breakGlass }

// Store returns the service's store.
func (s *Service) Store() Store { return s.store }

// SessionIdle is the idle timeout of sessions; SessionMax their absolute
// lifetime.
func (s *Service) SessionIdle() time.Duration { return s.idle }

// SessionMax is the absolute lifetime of sessions.
func (s *Service) SessionMax() time.Duration { return s.max }

// HasBootstrap reports whether a bootstrap token is configured.
func (s *Service) HasBootstrap() bool { return s.hasBootstrap }

// --- bearer tokens ---

// Bearer authenticates a bearer token: the bootstrap token (principal
// "bootstrap", admin), or an API token that is not revoked. Errors:
// ErrUnauthenticated.
func (s *Service) Bearer(ctx context.Context, token string) (Principal, error) {
	token = strings.TrimSpace(token)
	if token == "" {
		return Principal{}, ErrUnauthenticated
	}
	if s.hasBootstrap {
		// Equal-length digests: neither the value nor its length leaks.
		sum := sha256.Sum256([]byte(token))
		if subtle.ConstantTimeCompare(sum[:], s.bootstrapSum[:]) == 1 {
			return Principal{Name: BootstrapName, Role: RoleAdmin, Kind: KindBootstrap}, nil
		}
	}
	if !looksLikeToken(token) {
		return Principal{}, ErrUnauthenticated
	}
	t, err := s.store.TokenByHash(ctx, HashSecret(token))
	if errors.Is(err, ErrNotFound) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, err
	}
	if t.RevokedAt != nil || !t.Role.Valid() {
		return Principal{}, ErrUnauthenticated
	}
	if t.LastUsedAt == nil || s.now().Sub(*t.LastUsedAt) > touchEvery {
		if err := s.store.TouchToken(ctx, t.ID); err != nil {
			s.log.Warn("token last use", "token", t.ID, "error", err)
		}
	}
	return Principal{Name: TokenPrincipalName(t.Name), Role: t.Role, Kind: KindToken, ID: t.ID}, nil
}

// CreateToken makes an API token: the secret is returned once and only
// its hash is stored.
func (s *Service) CreateToken(ctx context.Context, actor, name string, role Role) (string, *Token, error) {
	n, err := CheckTokenName(name)
	if err != nil {
		return "", nil, err
	}
	if !role.Valid() {
		return "", nil, &InvalidError{Field: "role", Message: fmt.Sprintf("unknown role %q", role)}
	}
	secret := tokenPrefix + randomSecret()
	t, err := s.store.CreateToken(ctx, n, HashSecret(secret), role, actor)
	if err != nil {
		return "", nil, err
	}
	return secret, t, nil
}

// Tokens lists the API tokens, revoked ones too.
func (s *Service) Tokens(ctx context.Context) ([]Token, error) { return s.store.Tokens(ctx) }

// RevokeToken revokes a token by id. Errors: ErrNotFound.
func (s *Service) RevokeToken(ctx context.Context, actor, id string) (*Token, error) {
	return s.store.RevokeToken(ctx, strings.TrimSpace(id), actor)
}

// --- users ---

// AddUser creates a user with a password. kinds limits an approver; other
// roles take none.
func (s *Service) AddUser(ctx context.Context, actor, username, password string, role Role, kinds []string) (*User, error) {
	return s.AddUserWithEmail(ctx, actor, username, password, role, kinds, "")
}

// AddUserWithEmail is AddUser with an email address ("" for none).
func (s *Service) AddUserWithEmail(ctx context.Context, actor, username, password string, role Role, kinds []string, email string) (*User, error) {
	name, err := NormalizeUsername(username)
	if err != nil {
		return nil, err
	}
	if email, err = NormalizeEmail(email); err != nil {
		return nil, err
	}
	if err := checkRoleKinds(role, kinds); err != nil {
		return nil, err
	}
	if err := CheckPassword(password); err != nil {
		return nil, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return nil, err
	}
	if kinds == nil {
		kinds = []string{}
	}
	return s.store.CreateUser(ctx, User{Username: name, PasswordHash: hash, Role: role, Kinds: kinds, Email: email}, actor)
}

// NormalizeEmail checks an email address: a bare address (alice@example.com,
// no display name), at most 254 characters; "" stays "" (no address).
func NormalizeEmail(email string) (string, error) {
	email = strings.TrimSpace(email)
	if email == "" {
		return "", nil
	}
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || a.Name != "" || len(email) > 254 || !strings.Contains(email, "@") {
		return "", &InvalidError{Field: "email", Message: fmt.Sprintf("%q is not an email address such as alice@example.com", email)}
	}
	return email, nil
}

// SetEmail sets ("" clears) a user's email address. Errors: ErrNotFound,
// *InvalidError.
func (s *Service) SetEmail(ctx context.Context, actor, username, email string) error {
	email, err := NormalizeEmail(email)
	if err != nil {
		return err
	}
	return s.store.SetUserEmail(ctx, strings.ToLower(strings.TrimSpace(username)), email, actor)
}

// slackIDRe is the shape of a Slack user id (U024BE7LH, W012A3CDE).
var slackIDRe = regexp.MustCompile(`^[UW][A-Z0-9]{2,20}$`)

// CheckSlackID checks the shape of a Slack user id ("" passes: none).
func CheckSlackID(id string) error {
	if id = strings.TrimSpace(id); id != "" && !slackIDRe.MatchString(id) {
		return &InvalidError{Field: "slack_id", Message: fmt.Sprintf("%q is not a Slack user id such as U024BE7LH", id)}
	}
	return nil
}

// SetSlack maps a Slack user id to a user ("" clears it). Errors:
// ErrNotFound, ErrExists (another user has it), *InvalidError.
func (s *Service) SetSlack(ctx context.Context, actor, username, slackID string) error {
	slackID = strings.TrimSpace(slackID)
	if err := CheckSlackID(slackID); err != nil {
		return err
	}
	return s.store.SetUserSlack(ctx, strings.ToLower(strings.TrimSpace(username)), slackID, actor)
}

func checkRoleKinds(role Role, kinds []string) error {
	if !role.Valid() {
		return &InvalidError{Field: "role", Message: fmt.Sprintf("unknown role %q (want viewer, operator, approver or admin)", role)}
	}
	if len(kinds) > 0 && role != RoleApprover {
		return &InvalidError{Field: "kinds", Message: "only an approver is limited to interrupt kinds"}
	}
	for _, k := range kinds {
		if !kindRe.MatchString(k) {
			return &InvalidError{Field: "kinds", Message: fmt.Sprintf("%q is not an interrupt kind", k)}
		}
	}
	return nil
}

// Users lists the users by name.
func (s *Service) Users(ctx context.Context) ([]User, error) { return s.store.Users(ctx) }

// DisableUser disables a user and ends its sessions. Errors: ErrNotFound.
func (s *Service) DisableUser(ctx context.Context, actor, username string) error {
	return s.store.SetUserDisabled(ctx, strings.ToLower(strings.TrimSpace(username)), true, actor)
}

// EnableUser enables a disabled user. Errors: ErrNotFound.
func (s *Service) EnableUser(ctx context.Context, actor, username string) error {
	return s.store.SetUserDisabled(ctx, strings.ToLower(strings.TrimSpace(username)), false, actor)
}

// SetRole changes a user's role and kinds. Errors: ErrNotFound.
func (s *Service) SetRole(ctx context.Context, actor, username string, role Role, kinds []string) error {
	if err := checkRoleKinds(role, kinds); err != nil {
		return err
	}
	if kinds == nil {
		kinds = []string{}
	}
	return s.store.SetUserRole(ctx, strings.ToLower(strings.TrimSpace(username)), role, kinds, actor)
}

// SetPassword replaces a user's password and ends its sessions. Errors:
// ErrNotFound.
func (s *Service) SetPassword(ctx context.Context, actor, username, password string) error {
	if err := CheckPassword(password); err != nil {
		return err
	}
	if u, err := s.store.UserByName(ctx, strings.ToLower(strings.TrimSpace(username))); err == nil && u.SSO() {
		return &InvalidError{Field: "password", Message: u.Username + " signs in with single sign-on and has no password here"}
	}
	hash, err := HashPassword(password)
	if err != nil {
		return err
	}
	return s.store.SetUserPassword(ctx, strings.ToLower(strings.TrimSpace(username)), hash, actor)
}

// ChangePassword is a user changing their own password: current must be
// their password now. Their sessions end (this one too). Errors:
// ErrBadCredentials for a wrong current password, *InvalidError for a
// new password that is too weak, ErrNotFound.
func (s *Service) ChangePassword(ctx context.Context, username, current, next string) error {
	name := strings.ToLower(strings.TrimSpace(username))
	u, err := s.store.UserByName(ctx, name)
	if err != nil {
		return err
	}
	if u.Disabled || !VerifyPassword(u.PasswordHash, current) {
		return ErrBadCredentials
	}
	return s.SetPassword(ctx, name, name, next)
}

// AdminUser is the name of the administrator created at start-up.
const AdminUser = "admin"

// EnsureAdmin makes the admin user exist at start-up. With a password
// (GATEHOUSE_ADMIN_PASSWORD), the admin user is created with it, or given
// it when its password differs. Without, a missing admin user is created
// with a random password, which is returned (to be shown once); "" when
// the user existed. Several replicas may start at once: one creates.
func (s *Service) EnsureAdmin(ctx context.Context, password string) (generated string, err error) {
	const actor = "system"
	if password != "" {
		if err := CheckPassword(password); err != nil {
			return "", fmt.Errorf("GATEHOUSE_ADMIN_PASSWORD %w", err)
		}
		u, err := s.store.UserByName(ctx, AdminUser)
		switch {
		case errors.Is(err, ErrNotFound):
			hash, err := HashPassword(password)
			if err != nil {
				return "", err
			}
			if _, err := s.store.CreateUserIfMissing(ctx, User{Username: AdminUser, PasswordHash: hash, Role: RoleAdmin}, actor); err != nil {
				return "", err
			}
			return "", nil
		case err != nil:
			return "", err
		case VerifyPassword(u.PasswordHash, password):
			return "", nil
		default:
			hash, err := HashPassword(password)
			if err != nil {
				return "", err
			}
			return "", s.store.SetUserPassword(ctx, AdminUser, hash, actor)
		}
	}
	if _, err := s.store.UserByName(ctx, AdminUser); err == nil || !errors.Is(err, ErrNotFound) {
		return "", err
	}
	pw := RandomPassword()
	hash, err := HashPassword(pw)
	if err != nil {
		return "", err
	}
	created, err := s.store.CreateUserIfMissing(ctx, User{Username: AdminUser, PasswordHash: hash, Role: RoleAdmin}, actor)
	if err != nil || !created {
		return "", err
	}
	return pw, nil
}

// --- sessions ---

// Login is a successful login: the session's secret (the cookie's value,
// never stored) and the session.
type Login struct {
	Secret    string
	Session   *Session
	Principal Principal
}

// Login checks a user name and password and opens a session. Errors:
// *ThrottledError after too many recent failures (per user name and per
// address), ErrBadCredentials.
func (s *Service) Login(ctx context.Context, username, password, addr, userAgent string) (*Login, error) {
	name := strings.ToLower(strings.TrimSpace(username))
	if len(name) > 200 {
		name = name[:200]
	}
	now := s.now()
	f, err := s.store.LoginFailures(ctx, name, addr, now.Add(-s.throttle.Window))
	if err != nil {
		return nil, err
	}
	if s.throttle.PerUser > 0 && f.ByUser >= s.throttle.PerUser {
		s.loginFailed(ctx, name, addr, "too many failed attempts for this user name")
		return nil, s.throttled(f.UserOldest, now, "user", name, addr)
	}
	if s.throttle.PerAddr > 0 && f.ByAddr >= s.throttle.PerAddr {
		s.loginFailed(ctx, name, addr, "too many failed attempts from this address")
		return nil, s.throttled(f.AddrOldest, now, "addr", name, addr)
	}
	if s.localOff && (s.breakGlass == "" || name != s.breakGlass) {
		if err := s.store.RecordLogin(ctx, name, addr, false); err != nil {
			return nil, err
		}
		s.loginFailed(ctx, name, addr, "password sign-in is off (GATEHOUSE_LOCAL_LOGIN=false) and this is not the break-glass user")
		return nil, ErrLocalLoginOff
	}
	u, err := s.store.UserByName(ctx, name)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	ok := false
	reason := "wrong password"
	switch {
	case u == nil:
		VerifyPassword(dummyHash(), password) // as long as a wrong password
		reason = "no such user"
	case u.SSO():
		VerifyPassword(dummyHash(), password)
		reason = "the user signs in with single sign-on"
	default:
		ok = VerifyPassword(u.PasswordHash, password) && !u.Disabled && u.Role.Valid()
		if u.Disabled {
			reason = "the user is disabled"
		}
	}
	if err := s.store.RecordLogin(ctx, name, addr, ok); err != nil {
		return nil, err
	}
	if !ok {
		s.log.Info("login failed", "username", name, "addr", addr)
		s.loginFailed(ctx, name, addr, reason)
		return nil, ErrBadCredentials
	}
	if s.localOff {
		// Only the break-glass user gets here: loud, and in the audit trail.
		s.log.Warn("break-glass sign-in with a password while password sign-in is off", "username", name, "addr", addr)
		data, _ := json.Marshal(map[string]string{"addr": addr})
		s.Record(ctx, AuditEvent{Actor: name, Kind: AuditBreakGlass, Subject: name, Data: data})
	}
	return s.openSession(ctx, u, addr, userAgent)
}

// openSession opens a session for u, signed in.
func (s *Service) openSession(ctx context.Context, u *User, addr, userAgent string) (*Login, error) {
	secret := sessionPrefix + randomSecret()
	key := newSecretKey()
	if len(userAgent) > 300 {
		userAgent = userAgent[:300]
	}
	sess, err := s.store.CreateSession(ctx, NewSession{TokenHash: HashSecret(secret), UserID: u.ID, CSRFKey: key,
		UserAgent: userAgent, Addr: addr, ExpiresAt: s.now().Add(s.max)})
	if err != nil {
		return nil, err
	}
	sess.CSRFKey, sess.Username, sess.Role, sess.Kinds, sess.UserID, sess.Groups = key, u.Username, u.Role, u.Kinds, u.ID, u.IdPGroups
	return &Login{Secret: secret, Session: sess, Principal: sessionPrincipal(sess)}, nil
}

// loginFailed records a refused sign-in in the audit trail (the page
// itself says only "wrong user name or password").
func (s *Service) loginFailed(ctx context.Context, name, addr, reason string) {
	data, _ := json.Marshal(map[string]string{"addr": addr, "reason": reason})
	if name == "" {
		name = "(empty)"
	}
	s.Record(ctx, AuditEvent{Actor: name, Kind: AuditLoginFailed, Subject: name, Data: data})
}

func (s *Service) throttled(oldest, now time.Time, by, name, addr string) error {
	wait := oldest.Add(s.throttle.Window).Sub(now)
	if wait < time.Second {
		wait = time.Second
	}
	s.log.Warn("login throttled", "by", by, "username", name, "addr", addr, "retry_after", wait.Round(time.Second))
	return &ThrottledError{RetryAfter: wait}
}

func sessionPrincipal(sess *Session) Principal {
	return Principal{Name: sess.Username, Role: sess.Role, Kinds: sess.Kinds, Kind: KindUser, ID: sess.UserID, Groups: sess.Groups}
}

// Session authenticates a session secret (the cookie): it must not be
// revoked, past its absolute expiry, idle too long, or of a disabled user.
// Errors: ErrUnauthenticated.
func (s *Service) Session(ctx context.Context, secret string) (Principal, *Session, error) {
	if !looksLikeSession(secret) {
		return Principal{}, nil, ErrUnauthenticated
	}
	sess, err := s.store.SessionByHash(ctx, HashSecret(secret))
	if errors.Is(err, ErrNotFound) {
		return Principal{}, nil, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, nil, err
	}
	now := s.now()
	switch {
	case sess.RevokedAt != nil, !now.Before(sess.ExpiresAt), now.Sub(sess.LastSeenAt) >= s.idle, sess.Disabled,
		!sess.Role.Valid():
		return Principal{}, nil, ErrUnauthenticated
	}
	if now.Sub(sess.LastSeenAt) > touchEvery {
		if err := s.store.TouchSession(ctx, sess.ID); err != nil {
			s.log.Warn("session last seen", "session", sess.ID, "error", err)
		}
	}
	return sessionPrincipal(sess), sess, nil
}

// Valid checks a session secret again, as Session does, without counting
// as use (an open live page does not keep its session from idling out).
// Errors: ErrUnauthenticated.
func (s *Service) Valid(ctx context.Context, secret string) error {
	if !looksLikeSession(secret) {
		return ErrUnauthenticated
	}
	sess, err := s.store.SessionByHash(ctx, HashSecret(secret))
	if errors.Is(err, ErrNotFound) {
		return ErrUnauthenticated
	}
	if err != nil {
		return err
	}
	now := s.now()
	if sess.RevokedAt != nil || !now.Before(sess.ExpiresAt) || now.Sub(sess.LastSeenAt) >= s.idle || sess.Disabled || !sess.Role.Valid() {
		return ErrUnauthenticated
	}
	return nil
}

// Logout revokes a session (server-side: the cookie is worthless after).
func (s *Service) Logout(ctx context.Context, sessionID, actor string) error {
	err := s.store.RevokeSession(ctx, sessionID, actor)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// Prune deletes sessions and login attempts that ended a day ago or more.
func (s *Service) Prune(ctx context.Context) error {
	return s.store.Prune(ctx, s.now().Add(-24*time.Hour))
}

// --- audit ---

// Record writes an administrative audit event; a failure is logged, not
// returned (the action it records has happened).
func (s *Service) Record(ctx context.Context, e AuditEvent) {
	if err := s.store.AddAudit(ctx, e); err != nil {
		s.log.Error("audit event lost", "kind", e.Kind, "actor", e.Actor, "error", err)
	}
}

// AuditTrail lists audit events, newest first.
func (s *Service) AuditTrail(ctx context.Context, f AuditFilter) ([]AuditEvent, error) {
	return s.store.AuditTrail(ctx, f)
}
