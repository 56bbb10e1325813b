package main

import (
	"net/http"
	"testing"
	"time"
)

// requestJSON is a Request as the API shows it.
type requestJSON struct {
	ID             string `json:"id"`
	Status         string `json:"status"`
	InterruptID    string `json:"interrupt_id"`
	TaskID         string `json:"task_id"`
	CallbackSecret string `json:"callback_secret"`
	Decision       *struct {
		Action string `json:"action"`
		By     string `json:"by"`
	} `json:"decision"`
}

// TestE2ERequestRestartAndCallback: a request survives a kill -9 while
// pending; a long poll answers its decision; the callback, refused while
// the receiver is down, arrives once it is up, signed with the request's
// own secret (verified by the reference library); the task ends.
func TestE2ERequestRestartAndCallback(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	r, up := newDownReceiver(t)
	p := serve(t, d.url, webhookEnv...)
	var req requestJSON
	if code := p.do("POST", "/api/v1/requests", map[string]any{"kind": "tool_call", "title": "Run the migration?",
		"payload": map[string]any{"tool": "psql"}, "idempotency_key": "step-1", "callback_url": r.srv.URL + "/cb"}, &req); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	r.setSecret(req.CallbackSecret)
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.Exited
	p = serve(t, d.url, webhookEnv...)
	var again requestJSON
	if code := p.do("POST", "/api/v1/requests", map[string]any{"kind": "tool_call", "title": "Run the migration?",
		"payload": map[string]any{"tool": "psql"}, "idempotency_key": "step-1", "callback_url": r.srv.URL + "/cb"}, &again); code != http.StatusOK ||
		again.ID != req.ID || again.Status != "pending" || again.CallbackSecret != req.CallbackSecret {
		t.Fatalf("after the restart: %d %+v", code, again)
	}
	polled := make(chan requestJSON, 1)
	go func() {
		var got requestJSON
		p.do("GET", "/api/v1/requests/"+req.ID+"?wait=30s", nil, &got)
		polled <- got
	}()
	time.Sleep(300 * time.Millisecond)
	if code := p.do("POST", "/api/v1/tasks/"+req.TaskID+"/decisions", map[string]any{"interrupt_id": req.InterruptID,
		"action": "approve"}, nil); code != http.StatusAccepted {
		t.Fatalf("approve: %d", code)
	}
	select {
	case got := <-polled:
		if got.Status != "approved" || got.Decision == nil || got.Decision.By != "bootstrap" {
			t.Errorf("polled: %+v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll did not answer the decision")
	}
	first := r.waitHooks(1, 30*time.Second)[0]
	up()
	waitFor(t, func() bool {
		return d.int("SELECT count(*) FROM outbox WHERE channel = 'callback' AND state = 'delivered'") == 1
	})
	hooks := r.hooks()
	last := hooks[len(hooks)-1]
	if last.ID != first.ID || last.Type != "request.decided" {
		t.Errorf("callback %+v (first %s)", last, first.ID)
	}
	if got := last.Body["data"].(map[string]any)["request"].(map[string]any); got["status"] != "approved" || got["id"] != req.ID {
		t.Errorf("callback body %v", last.Body)
	}
	r.assertVerified()
	var tk taskJSON
	waitFor(t, func() bool { p.do("GET", "/api/v1/tasks/"+req.TaskID, nil, &tk); return tk.Status == "succeeded" })
}

// TestE2ERequestTimeoutsAndRules: a request's own deadline expires it
// with each on_timeout of its kind's policy; a rule approves one at once
// and its task runs to the end.
func TestE2ERequestTimeoutsAndRules(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	policy := writePolicyFile(t, "kinds:\n"+
		"  exp_fail: {on_timeout: fail}\n  exp_approve: {on_timeout: approve}\n  exp_cancel: {on_timeout: cancel}\n"+
		"  exp_none: {on_timeout: none}\n"+
		"  refund:\n    rules:\n      - {name: small, when: \"payload.amount <= 100\", action: approve}\n")
	p := serve(t, d.url, append(webhookEnv, "GATEHOUSE_POLICY_FILE="+policy)...)
	want := map[string]string{"exp_fail": "expired", "exp_approve": "expired", "exp_cancel": "expired", "exp_none": "pending"}
	ids := map[string]string{}
	for kind := range want {
		var req requestJSON
		if code := p.do("POST", "/api/v1/requests", map[string]any{"kind": kind, "title": kind, "deadline": "1s"}, &req); code != http.StatusCreated {
			t.Fatalf("create %s: %d", kind, code)
		}
		ids[kind] = req.ID
	}
	for kind, status := range want {
		var got requestJSON
		waitFor(t, func() bool {
			p.do("GET", "/api/v1/requests/"+ids[kind]+"?wait=5s", nil, &got)
			return got.Status == status && (kind != "exp_none" || d.int("SELECT count(*) FROM task_events WHERE type = 'interrupt.overdue' AND task_id = '"+ids[kind]+"'") == 1)
		})
		if kind == "exp_approve" && (got.Decision == nil || got.Decision.By != "system" || got.Decision.Action != "approve") {
			t.Errorf("approved on timeout: %+v", got)
		}
	}
	var req requestJSON
	if code := p.do("POST", "/api/v1/requests", map[string]any{"kind": "refund", "title": "Refund 30",
		"payload": map[string]any{"amount": 30}}, &req); code != http.StatusCreated || req.Status != "approved" {
		t.Fatalf("ruled: %d %+v", code, req)
	}
	var tk taskJSON
	waitFor(t, func() bool { p.do("GET", "/api/v1/tasks/"+req.TaskID, nil, &tk); return tk.Status == "succeeded" })
}
