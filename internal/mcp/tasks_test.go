package mcp_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehousehq/gatehouse/internal/auth"
)

// task is the part of §7's Task the tests read.
type task struct {
	ID               string `json:"id"`
	Workflow         string `json:"workflow"`
	Title            string `json:"title"`
	Status           string `json:"status"`
	PendingInterrupt *struct {
		Kind string `json:"kind"`
	} `json:"pending_interrupt"`
}

func TestTools(t *testing.T) {
	t.Parallel()
	s := setup(t)
	cs := s.client(t, s.token(t, "agent", auth.RoleOperator), nil)
	ctx := context.Background()

	t.Run("ListToolsNoneDecides", func(t *testing.T) {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
			if tool.InputSchema == nil || tool.OutputSchema == nil {
				t.Errorf("%s: input schema %v, output schema %v", tool.Name, tool.InputSchema, tool.OutputSchema)
			}
			// The official TypeScript client refuses a tool list with a
			// boolean property schema.
			for _, schema := range []any{tool.InputSchema, tool.OutputSchema} {
				m, _ := schema.(map[string]any)
				props, _ := m["properties"].(map[string]any)
				for k, v := range props {
					if _, isObject := v.(map[string]any); !isObject {
						t.Errorf("%s: property %s has schema %v", tool.Name, k, v)
					}
				}
			}
		}
		// The seven tools of SPEC §19, and none that decides.
		slices.Sort(names)
		want := []string{"ask_human", "cancel_request", "get_request", "get_task", "list_workflows", "request_approval", "start_task"}
		if !slices.Equal(names, want) {
			t.Fatalf("tools %v, want %v", names, want)
		}
	})

	t.Run("StartAndGet", func(t *testing.T) {
		var wfs struct {
			Workflows []struct {
				Name        string         `json:"name"`
				InputSchema map[string]any `json:"input_schema"`
			} `json:"workflows"`
		}
		ok(t, call(t, cs, "list_workflows", map[string]any{}), &wfs)
		if len(wfs.Workflows) != 1 || wfs.Workflows[0].Name != "feature" || wfs.Workflows[0].InputSchema["type"] != "object" {
			t.Fatalf("workflows %+v", wfs)
		}
		var started task
		ok(t, call(t, cs, "start_task", map[string]any{"workflow": "feature", "title": "From MCP",
			"input": map[string]any{"description": "Add a dark mode toggle to the settings page"}}), &started)
		if started.ID == "" || started.Workflow != "feature" || started.Title != "From MCP" {
			t.Fatalf("started %+v", started)
		}
		// The task runs to its end; get_task shows it as the API does.
		deadline := time.Now().Add(30 * time.Second)
		var got task
		for {
			ok(t, call(t, cs, "get_task", map[string]any{"id": started.ID}), &got)
			if got.Status == "succeeded" || got.Status == "failed" || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if got.Status != "succeeded" {
			t.Fatalf("task %+v, want succeeded", got)
		}
		res := call(t, cs, "get_task", map[string]any{"id": started.ID})
		if api := s.api(t, testToken, http.MethodGet, "/api/v1/tasks/"+started.ID, ""); !sameJSON(t, api, text(res)) {
			t.Fatalf("get_task %s\ndiffers from the API's %s", text(res), api)
		}
		var createdBy string
		if err := s.pool.QueryRow(ctx, `SELECT created_by FROM tasks WHERE id = $1`, started.ID).Scan(&createdBy); err != nil {
			t.Fatal(err)
		}
		if createdBy != "token:agent" {
			t.Fatalf("created_by %q", createdBy)
		}
	})

	t.Run("BadArguments", func(t *testing.T) {
		failed(t, call(t, cs, "start_task", map[string]any{"input": map[string]any{}}), "workflow")
		failed(t, call(t, cs, "start_task", map[string]any{"workflow": "nope", "input": map[string]any{}}), "workflow", "nope")
		failed(t, call(t, cs, "start_task", map[string]any{"workflow": "request", "input": map[string]any{}}), "workflow", "request_approval")
		failed(t, call(t, cs, "start_task", map[string]any{"workflow": "feature", "input": map[string]any{}}), "input")
		failed(t, call(t, cs, "start_task", map[string]any{"workflow": "feature", "input": "text"}), "input")
		failed(t, call(t, cs, "get_task", map[string]any{"id": "not-a-uuid"}), "id")
		failed(t, call(t, cs, "get_task", map[string]any{}), "id")
		failed(t, call(t, cs, "get_task", map[string]any{"id": "00000000-0000-4000-8000-000000000000"}), "not found")
	})

	t.Run("UnknownToolIsAProtocolError", func(t *testing.T) {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "decide", Arguments: map[string]any{}})
		if err == nil {
			t.Fatal("an unknown tool answered")
		}
	})

	t.Run("ViewerCannotStart", func(t *testing.T) {
		viewer := s.client(t, s.token(t, "watcher", auth.RoleViewer), nil)
		failed(t, call(t, viewer, "start_task", map[string]any{"workflow": "feature",
			"input": map[string]any{"description": "Add a dark mode toggle to the settings page"}}), "operator")
		var wfs map[string]any
		ok(t, call(t, viewer, "list_workflows", map[string]any{}), &wfs)
	})
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	s := setup(t)
	revoked := s.token(t, "gone", auth.RoleOperator)
	toks, err := s.auth.Tokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.auth.RevokeToken(context.Background(), "test", toks[0].ID); err != nil {
		t.Fatal(err)
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for name, header := range map[string]string{"None": "", "Wrong": "Bearer gh_wrong", "Basic": "Basic dXNlcjpwYXNz",
		"Revoked": "Bearer " + revoked} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, s.base+"/mcp", strings.NewReader(init))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if header != "" {
				req.Header.Set("Authorization", header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("status %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
	t.Run("SDKClientWithoutToken", func(t *testing.T) {
		c := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.base + "/mcp", MaxRetries: -1}, nil); err == nil {
			t.Fatal("connected without a token")
		}
	})
	t.Run("BootstrapToken", func(t *testing.T) {
		cs := s.client(t, testToken, nil)
		var wfs map[string]any
		ok(t, call(t, cs, "list_workflows", map[string]any{}), &wfs)
	})
}
