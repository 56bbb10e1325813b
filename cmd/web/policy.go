package main

import (
	"log/slog"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/config"
)

// newDecider builds the approval policy from the configuration
// (GATEHOUSE_APPROVALS, GATEHOUSE_SOD_KINDS) and the Decider that enforces
// it: serve (the API, the desk) and run (the terminal) decide through the
// same policy.
func newDecider(cfg config.Config, engine auth.DecisionEngine, store auth.DecisionStore, log *slog.Logger) *auth.Decider {
	policy := auth.NewPolicy(cfg.Auth.Approvals, cfg.Auth.SoDKinds)
	log.Info("approval policy", "policy", policy.String())
	return auth.NewDecider(engine, store, policy, log.With("component", "auth"))
}

// consolePrincipal is who decides at gatehouse run's prompt: name (--as,
// default cli:$USER), an admin — whoever runs the command has the
// database — of kind console. The approval policy still applies to it.
func consolePrincipal(name string) auth.Principal {
	return auth.Principal{Name: name, Role: auth.RoleAdmin, Kind: auth.KindConsole}
}
