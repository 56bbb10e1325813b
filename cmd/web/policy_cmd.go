package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/gatehousehq/gatehouse/internal/config"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/preflight"
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
		pool, err := postgres.Open(ctx, cfg.DatabaseURL, 1)
		if err != nil {
			return err
		}
		defer pool.Close()
		missing, err := preflight.MissingPolicyUsers(ctx, postgres.NewStore(pool, postgres.Options{}), p)
		if err != nil {
			return err
		}
		for _, u := range missing {
			fmt.Fprintf(stderr, "gatehouse: warning: the policy names user %q, who does not exist yet\n", u)
		}
	}
	return nil
}
