package deps_test

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/gatehousehq/gatehouse"

// deps lists every package of the module with the packages it depends on,
// directly or not (go list -deps), module packages only, without the
// module's prefix.
func deps(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	all := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := short(fields[0])
		var own []string
		for _, d := range fields[1:] {
			if d == module || strings.HasPrefix(d, module+"/") {
				own = append(own, short(d))
			}
		}
		all[pkg] = own
	}
	return all
}

func short(path string) string {
	if path == module {
		return "."
	}
	return strings.TrimPrefix(path, module+"/")
}

// TestImportDirections: the handler packages of internal/web never depend
// on one another nor on internal/web (the server mounts them); the
// request, response and socket kernels below them on none of them;
// runner, timekeeper, notify and metrics not on postgres (they declare the
// Store they need); requests not on postgres, live, the runner, nor the
// channels that serve it (internal/web and its rooms, mcp); graph, the public engine, on nothing of the module but
// its small helpers; pgtext on nothing of the module.
func TestImportDirections(t *testing.T) {
	all := deps(t)
	handlers := []string{"internal/web/api", "internal/web/desk", "internal/web/act", "internal/web/slack"}
	kernels := []string{"internal/web/request", "internal/web/response", "internal/web/socket"}
	rules := []struct {
		pkg    string
		banned []string
	}{
		{"internal/runner", []string{"internal/postgres"}},
		{"internal/timekeeper", []string{"internal/postgres"}},
		{"internal/notify", []string{"internal/postgres"}},
		{"internal/metrics", []string{"internal/postgres"}},
		{"internal/requests", []string{"internal/postgres", "internal/live", "internal/runner", "internal/web",
			"internal/web/api", "internal/web/desk", "internal/mcp"}},
	}
	for _, h := range handlers {
		banned := []string{"internal/web"}
		for _, other := range handlers {
			if other != h {
				banned = append(banned, other)
			}
		}
		rules = append(rules, struct {
			pkg    string
			banned []string
		}{h, banned})
	}
	for _, k := range kernels {
		rules = append(rules, struct {
			pkg    string
			banned []string
		}{k, append([]string{"internal/web"}, handlers...)})
	}
	for _, r := range rules {
		ds, ok := all[r.pkg]
		if !ok {
			t.Errorf("no package %s: is the layout still the one this test knows?", r.pkg)
			continue
		}
		for _, b := range r.banned {
			if slices.Contains(ds, b) {
				t.Errorf("%s depends on %s, which it must not import", r.pkg, b)
			}
		}
	}

	// pgtext, the one check of text PostgreSQL cannot store, sits below
	// every channel that reads a request (internal/web's, langgraph, mcp).
	if ds, ok := all["internal/pgtext"]; !ok || len(ds) > 0 {
		t.Errorf("internal/pgtext must exist and import only the standard library (it imports %v)", ds)
	}

	helpers := []string{"internal/jsonobj", "internal/jcs"}
	ds, ok := all["graph"]
	if !ok {
		t.Fatal("no package graph")
	}
	for _, d := range ds {
		if !slices.Contains(helpers, d) {
			t.Errorf("graph depends on %s: it may import only the standard library and %v", d, helpers)
		}
	}
}
