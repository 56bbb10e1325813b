package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehousehq/gatehouse/internal/auth"
)

// reqJSON is the part of §16's Request the tests read.
type reqJSON struct {
	ID          string          `json:"id"`
	Kind        string          `json:"kind"`
	Title       string          `json:"title"`
	Status      string          `json:"status"`
	Actions     []string        `json:"actions"`
	CreatedBy   string          `json:"created_by"`
	URL         string          `json:"url"`
	TaskID      string          `json:"task_id"`
	InterruptID string          `json:"interrupt_id"`
	Payload     json.RawMessage `json:"payload"`
	Decision    *struct {
		Action   string          `json:"action"`
		By       string          `json:"by"`
		Feedback string          `json:"feedback"`
		Value    json.RawMessage `json:"value"`
	} `json:"decision"`
}

// decide decides a request through the API as the bootstrap admin.
func (s *stack) decide(t *testing.T, r reqJSON, body map[string]any) {
	t.Helper()
	body["interrupt_id"] = r.InterruptID
	b, _ := json.Marshal(body)
	s.api(t, testToken, "POST", "/api/v1/tasks/"+r.TaskID+"/decisions", string(b))
}

func (s *stack) requestCount(t *testing.T) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM requests`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRequestTools(t *testing.T) {
	t.Parallel()
	s := setup(t)
	cs := s.client(t, s.token(t, "agent", auth.RoleOperator), nil)
	ctx := context.Background()

	t.Run("RequestDecideGet", func(t *testing.T) {
		var r reqJSON
		ok(t, call(t, cs, "request_approval", map[string]any{"title": "Deploy v2 to production",
			"payload": map[string]any{"tool": "deploy", "args": map[string]any{"env": "prod"}}}), &r)
		if r.Status != "pending" || r.Kind != "approval" || r.CreatedBy != "token:agent" || r.URL == "" ||
			!slices.Equal(r.Actions, []string{"approve", "reject"}) {
			t.Fatalf("request %+v", r)
		}
		// The events it caused say it came over MCP, beside the actor.
		var via, actor string
		if err := s.pool.QueryRow(ctx, `SELECT data->>'via', data->>'actor' FROM task_events
			WHERE task_id = $1 AND type = 'task.created'`, r.TaskID).Scan(&via, &actor); err != nil {
			t.Fatal(err)
		}
		if via != "mcp" || actor != "token:agent" {
			t.Fatalf("task.created via %q actor %q", via, actor)
		}
		// get_request is the API's Request.
		res := call(t, cs, "get_request", map[string]any{"id": r.ID})
		if api := s.api(t, testToken, "GET", "/api/v1/requests/"+r.ID, ""); !sameJSON(t, api, text(res)) {
			t.Fatalf("get_request %s\ndiffers from the API's %s", text(res), api)
		}
		s.decide(t, r, map[string]any{"action": "approve"})
		var got reqJSON
		ok(t, call(t, cs, "get_request", map[string]any{"id": r.ID}), &got)
		if got.Status != "approved" || got.Decision == nil || got.Decision.By != "bootstrap" {
			t.Fatalf("after the decision: %+v", got)
		}
	})

	t.Run("WaitReturnsOnTheDecision", func(t *testing.T) {
		var r reqJSON
		ok(t, call(t, cs, "request_approval", map[string]any{"title": "Wait for me", "kind": "deploy"}), &r)
		go func() {
			time.Sleep(500 * time.Millisecond)
			s.decide(t, r, map[string]any{"action": "reject", "feedback": "not on a Friday"})
		}()
		start := time.Now()
		var got reqJSON
		ok(t, call(t, cs, "get_request", map[string]any{"id": r.ID, "wait_seconds": 30}), &got)
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("the wait took %s after a decision at 0.5 s", took)
		}
		if got.Status != "rejected" || got.Decision.Feedback != "not on a Friday" {
			t.Fatalf("got %+v", got)
		}
	})

	t.Run("RequestApprovalWaits", func(t *testing.T) {
		done := make(chan reqJSON, 1)
		go func() {
			var r reqJSON
			ok(t, call(t, cs, "request_approval", map[string]any{"title": "Asked and waited", "wait_seconds": 30,
				"idempotency_key": "wait-1"}), &r)
			done <- r
		}()
		// Find it in the inbox and decide it while the call waits (once
		// its task and interrupt exist: the request's row is written
		// first).
		var pending reqJSON
		deadline := time.Now().Add(10 * time.Second)
		for pending.InterruptID == "" && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			var id string
			_ = s.pool.QueryRow(ctx, `SELECT id FROM requests WHERE idempotency_key = 'wait-1'`).Scan(&id)
			if id != "" {
				ok(t, call(t, cs, "get_request", map[string]any{"id": id}), &pending)
			}
		}
		s.decide(t, pending, map[string]any{"action": "approve"})
		select {
		case r := <-done:
			if r.Status != "approved" || r.ID != pending.ID {
				t.Fatalf("request_approval returned %+v", r)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("request_approval did not return after the decision")
		}
	})

	t.Run("Progress", func(t *testing.T) {
		var mu sync.Mutex
		var got []*sdk.ProgressNotificationParams
		pc := s.client(t, s.token(t, "progress", auth.RoleOperator), &sdk.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, req.Params)
			}})
		var r reqJSON
		ok(t, call(t, pc, "request_approval", map[string]any{"title": "Slow one"}), &r)
		params := &sdk.CallToolParams{Name: "get_request", Arguments: map[string]any{"id": r.ID, "wait_seconds": 6}}
		params.SetProgressToken("tok-1")
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		start := time.Now()
		res, err := pc.CallTool(cctx, params)
		if err != nil {
			t.Fatal(err)
		}
		var still reqJSON
		ok(t, res, &still)
		if still.Status != "pending" || time.Since(start) < 6*time.Second {
			t.Fatalf("after %s: %+v", time.Since(start), still)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) < 2 {
			t.Fatalf("%d progress notifications in 6 s, want one at the start and one after 5 s", len(got))
		}
		for i, p := range got {
			if p.ProgressToken != "tok-1" || p.Total != 6 || (i > 0 && p.Progress <= got[i-1].Progress) {
				t.Fatalf("progress %d: %+v", i, p)
			}
		}
	})

	t.Run("AskHuman", func(t *testing.T) {
		var r reqJSON
		ok(t, call(t, cs, "ask_human", map[string]any{"question": "Which region?",
			"response_schema": map[string]any{"type": "object", "required": []string{"region"},
				"properties": map[string]any{"region": map[string]any{"type": "string", "enum": []string{"eu-west-1", "us-east-1"}}}}}), &r)
		if r.Kind != "question" || r.Title != "Which region?" || !slices.Equal(r.Actions, []string{"respond"}) {
			t.Fatalf("asked %+v", r)
		}
		s.decide(t, r, map[string]any{"action": "respond", "value": map[string]any{"region": "eu-west-1"}})
		var got reqJSON
		ok(t, call(t, cs, "get_request", map[string]any{"id": r.ID, "wait_seconds": 5}), &got)
		if got.Status != "responded" || !sameJSON(t, string(got.Decision.Value), `{"region":"eu-west-1"}`) {
			t.Fatalf("answered %+v", got)
		}
	})

	t.Run("BadArgumentsCreateNothing", func(t *testing.T) {
		before := s.requestCount(t)
		for _, c := range []struct {
			tool  string
			args  map[string]any
			field string
		}{
			{"request_approval", map[string]any{}, "title"},
			{"request_approval", map[string]any{"title": ""}, "title"},
			{"request_approval", map[string]any{"title": "x", "kind": "Bad Kind"}, "kind"},
			{"request_approval", map[string]any{"title": "x", "wait_seconds": 51}, "wait_seconds"},
			{"request_approval", map[string]any{"title": "x", "payload": "text"}, "payload"},
			{"request_approval", map[string]any{"title": "x", "actions": []string{"launch"}}, "actions"},
			{"request_approval", map[string]any{"title": "x", "deadline": "soon"}, "deadline"},
			{"request_approval", map[string]any{"title": "x", "response_schema": map[string]any{"type": "object",
				"properties": map[string]any{"env": map[string]any{"type": "object"}}}}, "response_schema.properties.env"},
			{"ask_human", map[string]any{}, "question"},
			{"ask_human", map[string]any{"question": "   "}, "question"},
			{"get_request", map[string]any{"id": "nope"}, "id"},
			{"get_request", map[string]any{"id": "00000000-0000-4000-8000-000000000000"}, "not found"},
			{"cancel_request", map[string]any{}, "id"},
		} {
			t.Run(fmt.Sprintf("%s/%s", c.tool, c.field), func(t *testing.T) {
				failed(t, call(t, cs, c.tool, c.args), c.field)
			})
		}
		if after := s.requestCount(t); after != before {
			t.Fatalf("%d requests made by bad arguments", after-before)
		}
	})

	t.Run("Roles", func(t *testing.T) {
		viewer := s.client(t, s.token(t, "reader", auth.RoleViewer), nil)
		failed(t, call(t, viewer, "request_approval", map[string]any{"title": "May I?"}), "operator")
		failed(t, call(t, viewer, "ask_human", map[string]any{"question": "May I?"}), "operator")
		var r reqJSON
		ok(t, call(t, cs, "request_approval", map[string]any{"title": "Read by a viewer"}), &r)
		ok(t, call(t, viewer, "get_request", map[string]any{"id": r.ID}), &r)
		failed(t, call(t, viewer, "cancel_request", map[string]any{"id": r.ID}), "operator")
		// Another operator may not cancel the agent's request.
		other := s.client(t, s.token(t, "other", auth.RoleOperator), nil)
		failed(t, call(t, other, "cancel_request", map[string]any{"id": r.ID}))
	})

	t.Run("Cancel", func(t *testing.T) {
		var r reqJSON
		ok(t, call(t, cs, "request_approval", map[string]any{"title": "Never mind"}), &r)
		var got reqJSON
		ok(t, call(t, cs, "cancel_request", map[string]any{"id": r.ID}), &got)
		if got.Status != "cancelled" {
			t.Fatalf("cancelled: %+v", got)
		}
		var via string
		if err := s.pool.QueryRow(ctx, `SELECT data->>'via' FROM task_events WHERE task_id = $1 AND type = 'task.cancelled'`,
			r.TaskID).Scan(&via); err != nil {
			t.Fatal(err)
		}
		if via != "mcp" {
			t.Fatalf("task.cancelled via %q", via)
		}
		failed(t, call(t, cs, "cancel_request", map[string]any{"id": r.ID}), "conflict")
	})

	t.Run("Idempotent", func(t *testing.T) {
		var a, b reqJSON
		args := map[string]any{"title": "Once", "idempotency_key": "toolu_1"}
		ok(t, call(t, cs, "request_approval", args), &a)
		ok(t, call(t, cs, "request_approval", args), &b)
		if a.ID != b.ID {
			t.Fatalf("two requests for one key: %s, %s", a.ID, b.ID)
		}
		failed(t, call(t, cs, "request_approval", map[string]any{"title": "Other", "idempotency_key": "toolu_1"}), "idempotency_key")
	})

	t.Run("CallbackSecret", func(t *testing.T) {
		// SPEC §16: the secret that signs the callback is returned to the
		// principal who made the request (also on a repeat of its key),
		// never by get_request.
		type withSecret struct {
			reqJSON
			CallbackSecret string `json:"callback_secret"`
		}
		args := map[string]any{"title": "Call me back", "idempotency_key": "toolu_cb",
			"callback_url": "https://93.184.216.34/hook"}
		var a, b withSecret
		ok(t, call(t, cs, "request_approval", args), &a)
		if !strings.HasPrefix(a.CallbackSecret, "whsec_") {
			t.Fatalf("no callback secret: %+v", a)
		}
		ok(t, call(t, cs, "request_approval", args), &b)
		if b.ID != a.ID || b.CallbackSecret != a.CallbackSecret {
			t.Fatalf("the repeat: %+v, first %+v", b, a)
		}
		var stored string
		if err := s.pool.QueryRow(ctx, `SELECT callback_secret FROM requests WHERE id = $1`, a.ID).Scan(&stored); err != nil ||
			stored != a.CallbackSecret {
			t.Fatalf("stored secret %q, %v", stored, err)
		}
		if res := call(t, cs, "get_request", map[string]any{"id": a.ID}); strings.Contains(text(res), "whsec_") ||
			strings.Contains(text(res), "callback_secret") {
			t.Fatalf("get_request shows the secret: %s", text(res))
		}
		var plain withSecret
		ok(t, call(t, cs, "request_approval", map[string]any{"title": "No callback"}), &plain)
		if plain.CallbackSecret != "" {
			t.Fatalf("a secret without a callback_url: %+v", plain)
		}
	})
}

// TestRestartDuringWait: a server that stops while a call waits ends the
// call with the request as it stands; the request is not lost, and
// get_request on the next server answers it.
func TestRestartDuringWait(t *testing.T) {
	t.Parallel()
	s := setup(t)
	agent := s.token(t, "agent", auth.RoleOperator)
	cs := s.client(t, agent, nil)
	var r reqJSON
	ok(t, call(t, cs, "request_approval", map[string]any{"title": "Survives a restart"}), &r)
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "get_request",
			Arguments: map[string]any{"id": r.ID, "wait_seconds": 50}})
		if err != nil {
			t.Errorf("the waiting call: %v", err)
		}
		done <- res
	}()
	time.Sleep(time.Second)
	start := time.Now()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("shutdown waited %s for the waiting call", took)
	}
	if res := <-done; res != nil {
		var got reqJSON
		ok(t, res, &got)
		if got.Status != "pending" || got.ID != r.ID {
			t.Fatalf("the waiting call ended with %+v", got)
		}
	}
	s.restart(t)
	next := s.client(t, agent, nil)
	var again reqJSON
	ok(t, call(t, next, "get_request", map[string]any{"id": r.ID}), &again)
	if again.Status != "pending" || again.Title != "Survives a restart" {
		t.Fatalf("after the restart: %+v", again)
	}
	s.decide(t, again, map[string]any{"action": "approve"})
	ok(t, call(t, next, "get_request", map[string]any{"id": r.ID, "wait_seconds": 5}), &again)
	if again.Status != "approved" {
		t.Fatalf("decided after the restart: %+v", again)
	}
}

// TestDeskShowsMCPRequests: a request made over MCP is in the desk's inbox
// and on its task page like any other, naming the token that asked.
func TestDeskShowsMCPRequests(t *testing.T) {
	t.Parallel()
	s := setup(t)
	cs := s.client(t, s.token(t, "claude-code", auth.RoleOperator), nil)
	var r reqJSON
	ok(t, call(t, cs, "request_approval", map[string]any{"kind": "db_change", "title": "Drop table <sessions_2024>",
		"payload": map[string]any{"sql": "DROP TABLE sessions_2024;"}}), &r)
	ctx := context.Background()
	if _, err := s.auth.AddUser(ctx, "test", "dana", "dana-password-1234", auth.RoleAdmin, nil); err != nil {
		t.Fatal(err)
	}
	l, err := s.auth.Login(ctx, "dana", "dana-password-1234", "127.0.0.1", "go test")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/inbox", "/tasks/" + r.ID} {
		page := s.page(t, path, l.Secret)
		for _, want := range []string{"Drop table &lt;sessions_2024&gt;", "token:claude-code"} {
			if !strings.Contains(page, want) {
				t.Errorf("%s does not show %q", path, want)
			}
		}
		if strings.Contains(page, "<sessions_2024>") {
			t.Errorf("%s shows the title unescaped", path)
		}
	}
}
