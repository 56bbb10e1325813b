package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/internal/auth"
)

// TestHostileText: a tool call with U+0000 (the JSON escape) or invalid
// UTF-8 in any argument — a task's title or input, a request's title,
// payload or question — is a tool error naming the argument, and nothing
// is started or asked; another message with such text is a JSON-RPC
// invalid-params error. Before, a NUL was "internal error" (PostgreSQL
// refused it) and invalid UTF-8 was stored as U+FFFD. The official SDK's
// client sees the tool error as any other.
func TestHostileText(t *testing.T) {
	t.Parallel()
	s := setup(t)
	op := s.token(t, "agent", auth.RoleOperator)
	counts := func() string {
		var out string
		if err := s.pool.QueryRow(context.Background(), `SELECT concat_ws(' ', (SELECT count(*) FROM tasks),
			(SELECT count(*) FROM interrupts), (SELECT count(*) FROM task_events))`).Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := counts()
	rpc := func(body string) (int, map[string]any) {
		t.Helper()
		status, b := s.raw(t, op, http.MethodPost, "/mcp", body, "Accept", "application/json, text/event-stream")
		// The SDK answers as an event stream; the refusal as JSON.
		if _, data, ok := strings.Cut(string(b), "data: "); ok {
			b = []byte(strings.TrimSpace(data))
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("answer %q is not one JSON-RPC message: %v", b, err)
		}
		return status, m
	}
	const nul, bad = `\u0000`, "\xff\xfe"
	callTool := func(name, args string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `}}`
	}
	for _, c := range []struct{ name, body, arg, problem string }{
		{"task title NUL", callTool("start_task", `{"workflow":"feature","title":"a`+nul+`b","input":{"description":"x"}}`), "title", "NUL"},
		{"task input UTF-8", callTool("start_task", `{"workflow":"feature","input":{"description":"x`+bad+`"}}`), "input.description", "UTF-8"},
		{"task options NUL", callTool("start_task", `{"workflow":"feature","input":{"description":"x"},"options":{"gates":{"allowPrd`+nul+`":true}}}`), "options.gates", "NUL"},
		{"approval title UTF-8", callTool("request_approval", `{"title":"Deploy `+bad+`"}`), "title", "UTF-8"},
		{"approval payload NUL", callTool("request_approval", `{"title":"Deploy","payload":{"cmd":"rm`+nul+`"}}`), "payload.cmd", "NUL"},
		{"question NUL", callTool("ask_human", `{"question":"Which`+nul+` region?"}`), "question", "NUL"},
		{"get_request id UTF-8", callTool("get_request", `{"id":"`+bad+`"}`), "id", "UTF-8"},
	} {
		code, m := rpc(c.body)
		res, _ := m["result"].(map[string]any)
		if code != http.StatusOK || res == nil || res["isError"] != true {
			t.Errorf("%s: %d %v, want a tool error", c.name, code, m)
			continue
		}
		b, _ := json.Marshal(res["content"])
		if txt := string(b); !strings.Contains(txt, "bad_request: "+c.arg+": ") || !strings.Contains(txt, c.problem) {
			t.Errorf("%s: %s, want bad_request naming %s", c.name, txt, c.arg)
		}
	}
	// Not a tool call: the protocol's invalid params.
	code, m := rpc(`{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"cursor":"` + nul + `"}}`)
	if e, _ := m["error"].(map[string]any); code != http.StatusOK || e == nil || e["code"] != float64(-32602) ||
		!strings.Contains(e["message"].(string), "params.cursor") {
		t.Errorf("tools/list with a NUL: %d %v, want -32602 naming params.cursor", code, m)
	}
	// The official Go SDK's client (it sends a NUL as \u0000).
	cs := s.client(t, op, nil)
	failed(t, call(t, cs, "start_task", map[string]any{"workflow": "feature", "title": "a\x00b",
		"input": map[string]any{"description": "x"}}), "bad_request: title: ", "NUL")
	if after := counts(); after != before {
		t.Errorf("refused calls changed the database: %s → %s", before, after)
	}
	// The same call with clean text starts the task.
	var task map[string]any
	ok(t, call(t, cs, "start_task", map[string]any{"workflow": "feature", "title": "ab",
		"input": map[string]any{"description": "x"}}), &task)
	if task["title"] != "ab" {
		t.Errorf("clean call: %v", task)
	}
}
