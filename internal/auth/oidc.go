package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// OIDCLogin is a person the identity provider vouched for (package sso
// verified the ID token and mapped the groups to Role).
type OIDCLogin struct {
	Issuer            string
	Subject           string
	PreferredUsername string
	Email             string
	Groups            []string
	Role              Role
}

// ErrDisabled: the user is disabled (an SSO sign-in is refused, 403).
var ErrDisabled = errors.New("the user is disabled")

// LoginOIDC signs in the person in, found by issuer and subject, never by
// name. The first sign-in creates the user: named after the
// preferred_username (or the email's local part, or "user"), made unique
// with -2, -3, …; it has no password. Every sign-in sets the role its
// groups map to and the groups (policy deciders idp:<group>). Errors:
// ErrDisabled (audited), *InvalidError for a login without issuer,
// subject or role.
func (s *Service) LoginOIDC(ctx context.Context, in OIDCLogin, addr, userAgent string) (*Login, error) {
	if in.Issuer == "" || in.Subject == "" || !in.Role.Valid() {
		return nil, &InvalidError{Field: "identity", Message: "an SSO sign-in needs an issuer, a subject and a mapped role"}
	}
	if in.Groups == nil {
		in.Groups = []string{}
	}
	u, err := s.store.UserByOIDC(ctx, in.Issuer, in.Subject)
	switch {
	case errors.Is(err, ErrNotFound):
		if u, err = s.createOIDCUser(ctx, in); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	case u.Disabled:
		s.OIDCRefused(ctx, u.Username, addr, "the user is disabled", in)
		return nil, ErrDisabled
	default:
		if u, err = s.store.SetOIDCLogin(ctx, u.ID, in.Role, in.Groups, SSOActor); err != nil {
			return nil, err
		}
	}
	return s.openSession(ctx, u, addr, userAgent)
}

// createOIDCUser makes the user of a first SSO sign-in under the first
// free name; a concurrent first sign-in of the same person wins, and this
// one then updates the user it made.
func (s *Service) createOIDCUser(ctx context.Context, in OIDCLogin) (*User, error) {
	base := OIDCUsername(in.PreferredUsername, in.Email)
	email, err := NormalizeEmail(in.Email)
	if err != nil {
		email = ""
	}
	for i := 1; i <= 100; i++ {
		name := base
		if i > 1 {
			suffix := fmt.Sprintf("-%d", i)
			name = strings.TrimRight(base[:min(len(base), 63-len(suffix))], "._-") + suffix
		}
		u, err := s.store.CreateOIDCUser(ctx, User{Username: name, Role: in.Role, Kinds: []string{}, Email: email,
			OIDCIssuer: in.Issuer, OIDCSubject: in.Subject, IdPGroups: in.Groups}, SSOActor)
		if err == nil {
			s.log.Info("SSO: created a user at their first sign-in", "username", u.Username, "issuer", in.Issuer,
				"sub", in.Subject, "role", in.Role)
			return u, nil
		}
		if !errors.Is(err, ErrExists) {
			return nil, err
		}
		if u, err := s.store.UserByOIDC(ctx, in.Issuer, in.Subject); err == nil {
			return s.store.SetOIDCLogin(ctx, u.ID, in.Role, in.Groups, SSOActor)
		}
	}
	return nil, fmt.Errorf("SSO sign-in of %q: no free user name after 100 tries", base)
}

var notNameChars = regexp.MustCompile(`[^a-z0-9._-]+`)

// OIDCUsername is the user name a first SSO sign-in starts from: the
// preferred_username (its local part when it is an email address), else
// the email's local part, else "user"; lower case, other characters
// turned into '-', at most 63, never "bootstrap".
func OIDCUsername(preferred, email string) string {
	for _, cand := range []string{preferred, email} {
		cand = strings.ToLower(strings.TrimSpace(cand))
		if at := strings.LastIndex(cand, "@"); at >= 0 {
			cand = cand[:at]
		}
		cand = notNameChars.ReplaceAllString(cand, "-")
		cand = strings.TrimLeft(cand, "._-")
		if len(cand) > 63 {
			cand = cand[:63]
		}
		cand = strings.TrimRight(cand, "._-")
		if cand == BootstrapName {
			cand += "-user"
		}
		if _, err := NormalizeUsername(cand); err == nil {
			return cand
		}
	}
	return "user"
}

// OIDCUnmapped handles a verified sign-in whose groups map to no role:
// nobody new is created, and a user bound to that issuer and subject
// loses access here too — their sessions end at once, and idp: deciders
// no longer name them. Errors: the store's.
func (s *Service) OIDCUnmapped(ctx context.Context, in OIDCLogin) error {
	u, err := s.store.UserByOIDC(ctx, in.Issuer, in.Subject)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if in.Groups == nil {
		in.Groups = []string{}
	}
	n, err := s.store.EndOIDCAccess(ctx, u.ID, in.Groups, SSOActor)
	if err != nil {
		return err
	}
	s.log.Warn("SSO: a user's groups no longer map to a role; their sessions ended", "username", u.Username,
		"groups", in.Groups, "sessions", n)
	return nil
}

// OIDCRefused records a refused SSO sign-in in the audit trail (kind
// login.failed, "method": "oidc") with the reason: who, as far as it is
// known (the user name, else the preferred_username or email the token
// named, else "(sso)"), and the issuer and subject when the ID token was
// verified.
func (s *Service) OIDCRefused(ctx context.Context, actor, addr, reason string, id OIDCLogin) {
	if actor == "" {
		actor = id.PreferredUsername
	}
	if actor == "" {
		actor = id.Email
	}
	if actor == "" {
		actor = "(sso)"
	}
	if len(actor) > 200 {
		actor = actor[:200]
	}
	d := map[string]any{"method": "oidc", "addr": addr, "reason": reason}
	if id.Issuer != "" {
		d["issuer"], d["sub"], d["groups"] = id.Issuer, id.Subject, id.Groups
	}
	data, _ := json.Marshal(d)
	s.log.Info("SSO sign-in refused", "actor", actor, "addr", addr, "reason", reason)
	s.Record(ctx, AuditEvent{Actor: actor, Kind: AuditLoginFailed, Subject: actor, Data: data})
}
