package sdd_test

import (
	"regexp"
	"testing"

	"github.com/gatehousehq/gatehouse/internal/workflows/sdd"
)

// TestDesignsNameThings (issue 27, item 9): the offline designs name the
// brief's things, not its adjectives: no "smalls", "tinys" or "simples",
// and the main entity of "a tiny invoice tracker for small teams" is the
// invoice.
func TestDesignsNameThings(t *testing.T) {
	t.Parallel()
	bad := regexp.MustCompile(`(?i)\b(smalls|tinys|simples|quicks|lightweights|internals|trackss)\b|\b(small|tiny)_`)
	briefs := []string{"A tiny invoice tracker for small teams.", "A small, simple service that lets tiny shops track orders.",
		"Lightweight internal tool to book meeting rooms."}
	for _, brief := range briefs {
		for _, role := range sdd.Roles() {
			reply, _ := sdd.BuiltinReply(role, brief)
			if m := bad.FindString(reply); m != "" {
				t.Errorf("%s for %q says %q", role, brief, m)
			}
		}
	}
	hld, _ := sdd.BuiltinReply(sdd.RoleArchitect, briefs[0])
	if !regexp.MustCompile(`manage invoices and their trackers`).MatchString(hld) {
		t.Errorf("the design does not manage invoices:\n%s", hld)
	}
}
