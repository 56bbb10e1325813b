package gatehouse

import (
	"context"
	"log/slog"

	"github.com/gatehousehq/gatehouse/internal/config"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/sso"
)

// startSSO begins single sign-on when it is configured (SPEC §21): the
// identity provider's discovery is read in the background, retried with a
// warning while the provider cannot be reached (the login page says SSO
// is unavailable meanwhile). Nil without SSO; Stop on nil does nothing.
func startSSO(ctx context.Context, cfg config.Config, store *postgres.Store, log *slog.Logger) *sso.Client {
	s := cfg.SSO
	if !s.LocalLogin {
		if s.BreakGlassUser == "" {
			log.Warn("password sign-in is off (GATEHOUSE_LOCAL_LOGIN=false) and no GATEHOUSE_BREAK_GLASS_USER is set: " +
				"nobody can sign in while the identity provider is down (API tokens still work)")
		} else if _, err := store.UserByName(ctx, s.BreakGlassUser); err != nil {
			log.Warn("GATEHOUSE_BREAK_GLASS_USER names no user yet; create it with: gatehouse users add "+s.BreakGlassUser+" --role admin",
				"user", s.BreakGlassUser)
		}
	}
	if !s.Enabled {
		return nil
	}
	rp := s.Config
	rp.Store, rp.Logger = store, log
	c := sso.New(rp)
	log.Info("single sign-on", "issuer", s.Issuer, "client_id", s.ClientID, "redirect_uri", s.RedirectURL,
		"groups_claim", s.GroupsClaim, "role_map", s.RoleMap.String(), "local_login", s.LocalLogin)
	c.Start(ctx)
	return c
}
