package graph_test

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// ownHelpers are the module's own small packages the engine may use.
var ownHelpers = map[string]bool{
	"github.com/gatehousehq/gatehouse/graph":            true,
	"github.com/gatehousehq/gatehouse/internal/jsonobj": true,
}

// TestDependsOnTheStandardLibraryOnly: graph, the public engine, imports
// (directly or not) nothing but the standard library and the module's
// own small helpers (SPEC §20), so a program that embeds Gatehouse pulls
// in no database driver or web framework through it.
func TestDependsOnTheStandardLibraryOnly(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if !ownHelpers[p] {
			t.Errorf("graph depends on %s", p)
		}
	}
}

// TestPublicSignaturesNameNoInternalType: neither public package's API
// (go doc -all) names a type of an internal package, which a program of
// another module could not spell.
func TestPublicSignaturesNameNoInternalType(t *testing.T) {
	t.Parallel()
	names, err := exec.Command("go", "list", "-f", "{{.Name}}", "github.com/gatehousehq/gatehouse/internal/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	qualified := regexp.MustCompile(`\b(` + strings.Join(strings.Fields(string(names)), "|") + `)\.[A-Z]\w*`)
	for _, pkg := range []string{"github.com/gatehousehq/gatehouse", "github.com/gatehousehq/gatehouse/graph"} {
		doc, err := exec.Command("go", "doc", "-all", pkg).Output()
		if err != nil {
			t.Fatalf("go doc %s: %v", pkg, err)
		}
		for _, line := range strings.Split(string(doc), "\n") {
			// Declarations are indented by none or a tab; prose by four spaces.
			if strings.HasPrefix(line, "    ") {
				continue
			}
			if m := qualified.FindString(line); m != "" {
				t.Errorf("%s: %q names %s", pkg, strings.TrimSpace(line), m)
			}
		}
	}
}
