// Package auth decides who may do what (issue 6): users with cumulative
// roles, browser sessions with CSRF tokens, API tokens, the bootstrap token,
// login throttling, the approval policy of interrupt kinds (separation of
// duties, several distinct approvers) and the audit trail.
//
// It knows no SQL and no HTTP: a Store (internal/postgres) keeps users,
// sessions, tokens, approvals and audit events; internal/web turns requests
// into Principals and asks this package whether they may act.
//
// It imports graph only: never postgres, internal/web nor a handler
// package.
package auth

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gatehousehq/gatehouse/graph"
)

// Role is what a principal may do. Roles are cumulative: each allows what
// the ones before it allow.
type Role string

// The roles of SPEC §7, weakest first.
const (
	RoleViewer   Role = "viewer"   // reads
	RoleOperator Role = "operator" // also starts, cancels and retries tasks
	RoleApprover Role = "approver" // also decides interrupts
	RoleAdmin    Role = "admin"    // also manages users and tokens
)

// Roles lists every role, weakest first.
var Roles = []Role{RoleViewer, RoleOperator, RoleApprover, RoleAdmin}

func (r Role) rank() int {
	return slices.Index(Roles, r) + 1 // 0 for no role
}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return r.rank() > 0 }

// Article is the role with its indefinite article, as messages name a
// principal's role: "an admin", "an operator", "a viewer", and "without a
// role" for none.
func (r Role) Article() string {
	switch {
	case r == "":
		return "without a role"
	case strings.ContainsRune("aeiou", rune(r[0])):
		return "an " + string(r)
	}
	return "a " + string(r)
}

// Allows reports whether r includes min: an approver allows operator and
// viewer, nothing allows more than admin, and an unknown role allows
// nothing.
func (r Role) Allows(min Role) bool { return r.rank() > 0 && r.rank() >= min.rank() }

// ParseRole reads a role name.
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	if !r.Valid() {
		return "", fmt.Errorf("unknown role %q (want viewer, operator, approver or admin)", s)
	}
	return r, nil
}

// PrincipalKind says how a principal authenticated.
type PrincipalKind string

// Principal kinds.
const (
	KindUser      PrincipalKind = "user"      // a person, by password and session
	KindToken     PrincipalKind = "token"     // an API token
	KindBootstrap PrincipalKind = "bootstrap" // GATEHOUSE_BOOTSTRAP_TOKEN
	KindConsole   PrincipalKind = "console"   // gatehouse run at a terminal, trusted by its database access
)

// BootstrapName is the principal of the bootstrap token: it is not the
// admin user.
const BootstrapName = "bootstrap"

// Principal is who makes a request. Name is what the audit trail, the
// task's created_by and a decision's decided_by record.
type Principal struct {
	Name string
	Role Role
	// Kinds limits an approver to these interrupt kinds; empty: every kind.
	Kinds []string
	Kind  PrincipalKind
	// ID is the user's or the token's id ("" for the bootstrap token).
	ID string
	// Groups are the identity provider's groups of a user signed in with
	// SSO, as of their last sign-in (policy deciders idp:<group>).
	Groups []string
}

// UserPrincipal is the principal of a user acting as themselves (a
// session, an action link, a Slack button).
func UserPrincipal(u User) Principal {
	return Principal{Name: u.Username, Role: u.Role, Kinds: u.Kinds, Kind: KindUser, ID: u.ID, Groups: u.IdPGroups}
}

// Can reports whether p's role includes min.
func (p Principal) Can(min Role) bool { return p.Role.Allows(min) }

// MayDecide reports whether p may decide interrupts of kind: an approver
// limited to kinds decides only those; an admin decides every kind.
func (p Principal) MayDecide(kind string) bool {
	if !p.Role.Allows(RoleApprover) {
		return false
	}
	return p.Role == RoleAdmin || len(p.Kinds) == 0 || slices.Contains(p.Kinds, kind)
}

// IsZero reports an unauthenticated principal.
func (p Principal) IsZero() bool { return p.Name == "" }

// Sentinel errors.
var (
	// ErrUnauthenticated: no valid credentials (HTTP 401).
	ErrUnauthenticated = errors.New("not authenticated")
	// ErrBadCredentials: a login with a wrong user name or password, or of
	// a disabled user; the caller cannot tell which.
	ErrBadCredentials = errors.New("wrong user name or password")
	// ErrForbidden: authenticated, not allowed (HTTP 403).
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound: no such user or token.
	ErrNotFound = errors.New("not found")
	// ErrExists: a user of that name exists.
	ErrExists = errors.New("already exists")
	// ErrInvalid: bad input to an administrative action.
	ErrInvalid = errors.New("invalid")
	// ErrLocalLoginOff: password sign-in is turned off
	// (GATEHOUSE_LOCAL_LOGIN=false) and the user is not the break-glass
	// user.
	ErrLocalLoginOff = errors.New("password sign-in is turned off; sign in with single sign-on")
)

// ForbiddenError is a refusal with the reason a person can act on.
type ForbiddenError struct{ Reason string }

func (e *ForbiddenError) Error() string { return e.Reason }

// Is makes errors.Is(err, ErrForbidden) true.
func (e *ForbiddenError) Is(target error) bool { return target == ErrForbidden }

func forbidden(format string, args ...any) *ForbiddenError {
	return &ForbiddenError{Reason: fmt.Sprintf(format, args...)}
}

// InvalidError names the bad field of an administrative request.
type InvalidError struct {
	Field   string
	Message string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Message }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

var (
	usernameRe  = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	tokenNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	kindRe      = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
)

// NormalizeUsername lower-cases a user name and checks it: letters, digits,
// '.', '_' and '-', at most 63, starting with a letter or digit, and not
// "bootstrap" (the bootstrap token's principal).
func NormalizeUsername(s string) (string, error) {
	n := strings.ToLower(strings.TrimSpace(s))
	switch {
	case n == "":
		return "", &InvalidError{Field: "username", Message: "is required"}
	case n == BootstrapName:
		return "", &InvalidError{Field: "username", Message: `"bootstrap" is the bootstrap token's name`}
	case !usernameRe.MatchString(n):
		return "", &InvalidError{Field: "username",
			Message: "use up to 63 letters, digits, '.', '_' or '-', starting with a letter or digit"}
	}
	return n, nil
}

// CheckTokenName checks an API token's name (same characters as a user
// name, any case).
func CheckTokenName(s string) (string, error) {
	n := strings.TrimSpace(s)
	if !tokenNameRe.MatchString(n) {
		return "", &InvalidError{Field: "name",
			Message: "use up to 63 letters, digits, '.', '_' or '-', starting with a letter or digit"}
	}
	return n, nil
}

// ParseKinds reads a comma-separated list of interrupt kinds ("merge,prd");
// "" and "none" are the empty list.
func ParseKinds(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "none") {
		return []string{}, nil
	}
	out := []string{}
	for _, k := range strings.Split(s, ",") {
		k = strings.ToLower(strings.TrimSpace(k))
		if k == "" {
			continue
		}
		if !kindRe.MatchString(k) {
			return nil, &InvalidError{Field: "kinds", Message: fmt.Sprintf("%q is not an interrupt kind", k)}
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}

// TokenPrincipalName is the principal name of an API token: "token:" and
// its name, so it never passes for a user.
func TokenPrincipalName(name string) string { return "token:" + name }

// MaySee reports whether p may see task. Every role sees every task for
// now; this is the one place that decides it (the API, the streams and
// the desk all ask here).
func MaySee(p Principal, task *graph.Task) bool {
	return task != nil && p.Can(RoleViewer)
}

// CheckIdPGroup checks the name of an identity provider's group (a role
// map entry, an idp: decider): 1 to 256 characters of UTF-8 without
// control characters, '=' or ','. Providers name groups freely (Keycloak
// "/payments/leads", Entra object ids), so little else is refused; groups
// match exactly, case and all.
func CheckIdPGroup(g string) error {
	switch {
	case g == "":
		return errors.New("empty group name")
	case len(g) > 256 || !utf8.ValidString(g):
		return fmt.Errorf("group %q: want at most 256 characters of UTF-8", g)
	case strings.ContainsAny(g, "=,"), strings.ContainsFunc(g, unicode.IsControl):
		return fmt.Errorf("group %q: no '=', ',' or control characters", g)
	}
	return nil
}
