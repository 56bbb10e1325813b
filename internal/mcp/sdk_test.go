package mcp_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/servetest"
)

// sdkTools are the tools `gatehouse serve` offers.
var sdkTools = []string{"ask_human", "cancel_request", "get_request", "get_task", "list_workflows", "request_approval", "start_task"}

// TestOfficialTypeScriptSDK runs testdata/sdk/sdk.test.mjs (the official
// MCP TypeScript SDK at the version its lockfile pins) against a real
// `gatehouse serve` process on a fresh database.
func TestOfficialTypeScriptSDK(t *testing.T) {
	node, dir := servetest.Node(t, "testdata/sdk", "@modelcontextprotocol/sdk", "the official MCP TypeScript SDK")
	bin := servetest.Build(t, "../../cmd/web")
	dbURL := pgtest.NewDB(t)
	base := servetest.Serve(t, bin, "DATABASE_URL="+dbURL, "GATEHOUSE_ADDR=127.0.0.1:0",
		"GATEHOUSE_BOOTSTRAP_TOKEN="+testToken, "GATEHOUSE_ADMIN_PASSWORD=mcp-sdk-test-password-1",
		"GATEHOUSE_WORKERS=2", "LLM_PROVIDER=scripted")
	agent, viewer := tokens(t, dbURL)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "sdk.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GATEHOUSE_URL="+base, "GATEHOUSE_AGENT_TOKEN="+agent,
		"GATEHOUSE_VIEWER_TOKEN="+viewer, "GATEHOUSE_ADMIN_TOKEN="+testToken,
		"GATEHOUSE_MCP_TOOLS="+strings.Join(sdkTools, ","))
	out, err := cmd.CombinedOutput()
	t.Logf("node sdk.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the SDK test failed: %v", err)
	}
}

// tokens makes an operator's and a viewer's API token in the database the
// server uses.
func tokens(t *testing.T, dbURL string) (operator, viewer string) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	svc := auth.NewService(auth.Config{Store: postgres.NewStore(pool, postgres.Options{})})
	ctx := context.Background()
	operator, _, err = svc.CreateToken(ctx, "test", "agent", auth.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	viewer, _, err = svc.CreateToken(ctx, "test", "watcher", auth.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	return operator, viewer
}
