package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/config"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

const policySynopsis = `policy show

Prints the effective approval policy (SPEC §11) in the policy file's shape:
GATEHOUSE_POLICY_FILE with GATEHOUSE_APPROVALS and GATEHOUSE_SOD_KINDS
filling what the file leaves unset. A bad file or a conflict exits 2 with
"<file>:<line>: <key>: <problem>". With DATABASE_URL set, users the policy
names who do not exist yet are listed as warnings.`

// cmdPolicy: gatehouse policy show.
func cmdPolicy(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("policy", policySynopsis, stdout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) != "show" {
		return usageError{"usage: gatehouse policy show"}
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return usageError{strings.ReplaceAll(err.Error(), "\n", "; ")}
	}
	p := cfg.Auth.Policy
	fmt.Fprintf(stdout, "# effective approval policy, from %s\n", p.Source())
	fmt.Fprint(stdout, p.YAML())
	if cfg.DatabaseURL != "" {
		pool, err := openPool(ctx, cfg.DatabaseURL, 1)
		if err != nil {
			return err
		}
		defer pool.Close()
		missing, err := missingPolicyUsers(ctx, postgres.NewStore(pool), p)
		if err != nil {
			return err
		}
		for _, u := range missing {
			fmt.Fprintf(stderr, "gatehouse: warning: the policy names user %q, who does not exist yet\n", u)
		}
	}
	return nil
}

// missingPolicyUsers lists the users the policy names that the database
// does not have (a warning, not an error: SPEC §11).
func missingPolicyUsers(ctx context.Context, store *postgres.Store, p auth.Policy) ([]string, error) {
	named := p.NamedUsers()
	if len(named) == 0 {
		return nil, nil
	}
	users, err := store.Users(ctx)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, n := range named {
		if strings.HasPrefix(n, "token:") {
			continue
		}
		if !slices.ContainsFunc(users, func(u auth.User) bool { return u.Username == n }) {
			missing = append(missing, n)
		}
	}
	return missing, nil
}

// warnPolicyUsers logs the users the policy names who do not exist yet.
func warnPolicyUsers(ctx context.Context, store *postgres.Store, p auth.Policy, log *slog.Logger) {
	missing, err := missingPolicyUsers(ctx, store, p)
	if err != nil {
		log.Warn("checking the policy's users", "error", err)
		return
	}
	for _, u := range missing {
		log.Warn("the approval policy names a user who does not exist yet", "user", u)
	}
}
