package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/sso"
)

// SSO configures single sign-on with OpenID Connect (SPEC §21). Enabled
// is false when none of its variables is set.
type SSO struct {
	Enabled bool
	// Config is the relying party's settings (main adds its store and
	// logger); its RedirectURL is <GATEHOUSE_PUBLIC_URL>/auth/oidc/callback.
	sso.Config
	// LocalLogin false turns password sign-in off for everyone but
	// BreakGlassUser.
	LocalLogin     bool
	BreakGlassUser string
}

// loadSSO reads the SSO settings; publicURL is GATEHOUSE_PUBLIC_URL
// without its trailing slash.
func loadSSO(getenv func(string) string, publicURL string, boolean func(string, bool) bool) (SSO, []error) {
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	// The issuer is kept as set: ID tokens must name it exactly.
	s := SSO{Config: sso.Config{Issuer: get("GATEHOUSE_OIDC_ISSUER"), ClientID: get("GATEHOUSE_OIDC_CLIENT_ID"),
		ClientSecret: get("GATEHOUSE_OIDC_CLIENT_SECRET"), Name: get("GATEHOUSE_OIDC_NAME"),
		GroupsClaim: get("GATEHOUSE_OIDC_GROUPS_CLAIM")}, LocalLogin: boolean("GATEHOUSE_LOCAL_LOGIN", true),
		BreakGlassUser: get("GATEHOUSE_BREAK_GLASS_USER")}
	var errs []error
	rawMap := get("GATEHOUSE_OIDC_ROLE_MAP")
	s.Enabled = s.Issuer != "" || s.ClientID != "" || s.ClientSecret != "" || rawMap != ""
	if s.Enabled {
		for _, v := range []struct{ name, value string }{{"GATEHOUSE_OIDC_ISSUER", s.Issuer},
			{"GATEHOUSE_OIDC_CLIENT_ID", s.ClientID}, {"GATEHOUSE_OIDC_CLIENT_SECRET", s.ClientSecret},
			{"GATEHOUSE_OIDC_ROLE_MAP", rawMap}, {"GATEHOUSE_PUBLIC_URL", publicURL}} {
			if v.value == "" {
				errs = append(errs, fmt.Errorf("%s is not set: single sign-on needs GATEHOUSE_OIDC_ISSUER, GATEHOUSE_OIDC_CLIENT_ID, "+
					"GATEHOUSE_OIDC_CLIENT_SECRET, GATEHOUSE_OIDC_ROLE_MAP and GATEHOUSE_PUBLIC_URL", v.name))
			}
		}
		if s.Issuer != "" {
			if err := secureURL("GATEHOUSE_OIDC_ISSUER", s.Issuer); err != nil {
				errs = append(errs, err)
			}
		}
		if publicURL != "" {
			if err := secureURL("GATEHOUSE_PUBLIC_URL", publicURL); err != nil {
				errs = append(errs, fmt.Errorf("%w (single sign-on's redirect URI is under it)", err))
			}
			s.RedirectURL = publicURL + sso.CallbackPath
		}
		if rawMap != "" {
			m, err := sso.ParseRoleMap(rawMap)
			if err != nil {
				errs = append(errs, fmt.Errorf("GATEHOUSE_OIDC_ROLE_MAP: %w", err))
			}
			s.RoleMap = m
		}
	}
	if s.Name == "" {
		s.Name = sso.DefaultName
	}
	if len(s.Name) > 60 {
		errs = append(errs, fmt.Errorf("GATEHOUSE_OIDC_NAME=%q: want at most 60 characters", s.Name))
	}
	if s.GroupsClaim == "" {
		s.GroupsClaim = sso.DefaultGroupsClaim
	}
	if raw := get("GATEHOUSE_OIDC_SCOPES"); raw != "" {
		for _, sc := range strings.FieldsFunc(raw, func(r rune) bool { return r == ' ' || r == ',' }) {
			if sc != "openid" {
				s.Scopes = append(s.Scopes, sc)
			}
		}
	}
	if !s.LocalLogin && !s.Enabled {
		errs = append(errs, errors.New("GATEHOUSE_LOCAL_LOGIN=false needs single sign-on (GATEHOUSE_OIDC_ISSUER and the rest): nobody could sign in"))
	}
	if s.BreakGlassUser != "" {
		n, err := auth.NormalizeUsername(s.BreakGlassUser)
		if err != nil {
			errs = append(errs, fmt.Errorf("GATEHOUSE_BREAK_GLASS_USER=%q: %w", s.BreakGlassUser, err))
		}
		s.BreakGlassUser = n
	}
	return s, errs
}

// secureURL checks a URL single sign-on depends on: https, or http on a
// loopback host (a provider or a desk on this machine), with no query or
// fragment.
func secureURL(name, v string) error {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%s=%q: want an https:// URL without user, query or fragment", name, v)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
			return nil
		}
	}
	return fmt.Errorf("%s=%q: want https:// (http only on a loopback address such as http://127.0.0.1:5556)", name, v)
}
