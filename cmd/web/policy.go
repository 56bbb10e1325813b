package main

import (
	"log/slog"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/config"
	"github.com/gatehousehq/gatehouse/internal/requests"
)

// newDecider takes the approval policy of the configuration
// (GATEHOUSE_POLICY_FILE, GATEHOUSE_APPROVALS, GATEHOUSE_SOD_KINDS) and
// builds the Decider that enforces it: serve (the API, the desk) and run
// (the terminal) decide through the same policy.
func newDecider(cfg config.Config, engine auth.DecisionEngine, store auth.DecisionStore, worker auth.Worker, log *slog.Logger) *auth.Decider {
	policy := cfg.Auth.Policy
	log.Info("approval policy", "source", policy.Source(), "policy", policy.String())
	return auth.NewDecider(engine, store, policy, log.With("component", "auth"), auth.WithWorker(worker),
		auth.WithDecisionCheck(requests.CheckDecision))
}

// consolePrincipal is who decides at gatehouse run's prompt: name (--as,
// default cli:$USER), an admin — whoever runs the command has the
// database — of kind console. The approval policy still applies to it.
func consolePrincipal(name string) auth.Principal {
	return auth.Principal{Name: name, Role: auth.RoleAdmin, Kind: auth.KindConsole}
}
