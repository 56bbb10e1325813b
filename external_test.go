package gatehouse_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// TestExternalModule builds testdata/external as a module of its own
// (its go.mod requires this module and replaces it with this checkout),
// offline against the module cache, and runs it on a fresh database: it
// defines a workflow, serves it, decides its gate over HTTP and checks the
// result (see its main.go). Only the public packages are reachable from
// there: the build fails if a public signature needs an internal type.
func TestExternalModule(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "external", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	gomod := "module example.com/external\n\ngo 1.26.0\n\n" +
		"require github.com/gatehousehq/gatehouse v0.0.0\n\n" +
		"replace github.com/gatehousehq/gatehouse => " + root + "\n"
	for name, b := range map[string][]byte{"main.go": src, "go.sum": sum, "go.mod": []byte(gomod)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Offline: the module cache has everything this module needs.
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOSUMDB=off")
	bin := filepath.Join(dir, "external")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir, build.Env = dir, env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the external module: %v\n%s", err, out)
	}
	run := exec.Command(bin)
	run.Dir = dir
	run.Env = append(os.Environ(), "DATABASE_URL="+pgtest.NewDB(t), "GATEHOUSE_LOG_LEVEL=warn")
	out, err := run.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "external: ok") {
		t.Fatalf("the external program: %v\n%s", err, out)
	}
}
