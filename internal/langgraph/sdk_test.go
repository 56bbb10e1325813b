package langgraph_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/servetest"
)

// The official JS SDK, at the version pinned in testdata/sdk/package.json
// and at 1.9.28 (the one Agent Inbox ships), under the package names the
// lockfile installs them as.
var sdkPackages = []string{"@langchain/langgraph-sdk", "langgraph-sdk-1.9.28"}

// TestOfficialJSSDK runs testdata/sdk/sdk.test.mjs, once per SDK version,
// against a real `gatehouse serve` process on a fresh database.
func TestOfficialJSSDK(t *testing.T) {
	node, dir := servetest.Node(t, "testdata/sdk", "@langchain/langgraph-sdk", "the official LangGraph JS SDK")
	bin := servetest.Build(t, "../../cmd/web")
	script := filepath.Join(t.TempDir(), "llm.json")
	// sdd's architect answers too shortly (its task fails); slogan's writer
	// is slow enough to find its thread busy and cancel it.
	if err := os.WriteFile(script, []byte(`{"roles": {"sdd.architect": ["too short"]}, "delays": {"slogan.writer": "4s"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, pkg := range sdkPackages {
		t.Run(pkg, func(t *testing.T) {
			base := serve(t, bin, script)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "sdk.test.mjs")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GATEHOUSE_API_URL="+base+"/langgraph", "GATEHOUSE_API_KEY="+testToken,
				"SDK_PACKAGE="+pkg, "GATEHOUSE_WORKFLOWS=analyze,feature,pm,sdd,slogan",
				"LANGGRAPH_API_KEY=", "LANGSMITH_API_KEY=", "LANGCHAIN_API_KEY=")
			out, err := cmd.CombinedOutput()
			t.Logf("node sdk.test.mjs (%s):\n%s", pkg, out)
			if err != nil {
				t.Fatalf("the SDK test failed: %v", err)
			}
		})
	}
}

// serve starts `gatehouse serve` on a fresh database and a free port and
// returns its base URL; the process is stopped at cleanup.
func serve(t *testing.T, bin, script string) string {
	t.Helper()
	return servetest.Serve(t, bin, "DATABASE_URL="+pgtest.NewDB(t), "GATEHOUSE_ADDR=127.0.0.1:0",
		"GATEHOUSE_BOOTSTRAP_TOKEN="+testToken, "GATEHOUSE_ADMIN_PASSWORD=sdk-test-password-1", "GATEHOUSE_WORKERS=4",
		"LLM_PROVIDER=scripted", "LLM_SCRIPT_FILE="+script, "GATEHOUSE_CORS_ORIGINS="+allowOrigin)
}
