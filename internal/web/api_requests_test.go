package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/web/api"
)

// apiRequest is a Request as the API shows it, with the 201's secret.
type apiRequest = api.CreateRequestResponse

func (b *bundle) makeRequest(t *testing.T, body any) apiRequest {
	t.Helper()
	r := b.do(t, http.MethodPost, "/api/v1/requests", body)
	if r.status != http.StatusCreated {
		t.Fatalf("create request: %d %s", r.status, r.body)
	}
	var out apiRequest
	r.json(t, &out)
	return out
}

// TestRequestCreate: a request is a waiting task of the request workflow
// with one interrupt of its kind, in the inbox at once.
func TestRequestCreate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	got := b.makeRequest(t, map[string]any{"kind": "tool_call", "title": "Run rm -rf /tmp/x?",
		"description": "**why**: cleanup", "payload": map[string]any{"tool": "shell", "args": map[string]any{"cmd": "rm -rf /tmp/x"}},
		"metadata": map[string]any{"agent": "a1"}, "deadline": "1h"})
	if got.Status != "pending" || got.Kind != "tool_call" || got.TaskID != got.ID || got.InterruptID == "" ||
		len(got.PayloadSHA256) != 64 || got.CreatedBy != "bootstrap" || got.Deadline == nil ||
		strings.Join(got.Actions, ",") != "approve,reject" || got.URL != "/tasks/"+got.ID || got.CallbackSecret != "" ||
		string(got.Metadata) != `{"agent":"a1"}` || got.IdempotencyKey != nil || string(got.ResponseSchema) != "null" {
		t.Fatalf("request: %+v", got)
	}
	if d := time.Until(*got.Deadline); d < 59*time.Minute || d > time.Hour {
		t.Errorf("deadline in %s", d)
	}
	r := b.do(t, http.MethodGet, "/api/v1/interrupts?status=pending&kind=tool_call", nil)
	if !strings.Contains(string(r.body), got.InterruptID) {
		t.Fatalf("not in the inbox: %s", r.body)
	}
	var task api.Task
	b.do(t, http.MethodGet, "/api/v1/tasks/"+got.ID, nil).json(t, &task)
	if task.Workflow != "request" || task.Status != "waiting" || task.PendingInterrupt == nil ||
		task.PendingInterrupt.Payload.Artifact == nil || !strings.Contains(task.PendingInterrupt.Payload.Artifact.Content, "\"cmd\": \"rm -rf /tmp/x\"") {
		t.Fatalf("task: %+v", task)
	}
	var via string
	if err := b.pool.QueryRow(context.Background(),
		"SELECT data->>'via' FROM task_events WHERE task_id = $1 AND type = 'task.created'", got.ID).Scan(&via); err != nil || via != "api" {
		t.Errorf("task.created via %q, %v", via, err)
	}
	// Get and list. The 201 is the request as stored (read back in its
	// transaction): a GET shows the very same.
	var one apiRequest
	b.do(t, http.MethodGet, "/api/v1/requests/"+got.ID, nil).json(t, &one)
	if a, b := mustJSON(t, one), mustJSON(t, got); a != b {
		t.Errorf("get:\n%s\nthe 201:\n%s", a, b)
	}
	var page struct {
		Requests   []apiRequest `json:"requests"`
		NextCursor *string      `json:"next_cursor"`
	}
	b.do(t, http.MethodGet, "/api/v1/requests?status=pending&kind=tool_call", nil).json(t, &page)
	if len(page.Requests) != 1 || page.Requests[0].ID != got.ID || page.NextCursor != nil {
		t.Errorf("list: %+v", page)
	}
	b.do(t, http.MethodGet, "/api/v1/requests?status=approved", nil).json(t, &page)
	if len(page.Requests) != 0 {
		t.Errorf("approved list: %+v", page)
	}
	if r := b.do(t, http.MethodGet, "/api/v1/requests/"+"00000000-0000-0000-0000-000000000000", nil); r.status != http.StatusNotFound {
		t.Errorf("unknown: %d", r.status)
	}
}

// TestRequestBadInput: every §16 rule is a 400 naming the field, and
// nothing is created.
func TestRequestBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ok := func() map[string]any { return map[string]any{"kind": "deploy", "title": "Deploy?"} }
	with := func(k string, v any) map[string]any {
		m := ok()
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name  string
		body  any
		field string
	}{
		{"NoKind", with("kind", nil), "kind"},
		{"BadKind", with("kind", "Deploy-Prod"), "kind"},
		{"LongKind", with("kind", "k"+strings.Repeat("x", 40)), "kind"},
		{"NoTitle", with("title", nil), "title"},
		{"BlankTitle", with("title", "   "), "title"},
		{"LongTitle", with("title", strings.Repeat("é", 201)), "title"},
		{"NulTitle", with("title", "a\x00b"), "title"},
		{"LongDescription", with("description", strings.Repeat("x", 64<<10+1)), "description"},
		{"PayloadNotObject", with("payload", []int{1}), "payload"},
		{"PayloadTooBig", with("payload", map[string]string{"x": strings.Repeat("x", 256<<10)}), "payload"},
		{"PayloadNul", `{"kind":"deploy","title":"t","payload":{"a":"\u0000"}}`, "payload.a"},
		{"EmptyActions", with("actions", []string{}), "actions"},
		{"UnknownAction", with("actions", []string{"approve", "maybe"}), "actions[1]"},
		{"TwiceAction", with("actions", []string{"approve", "approve"}), "actions[1]"},
		{"SchemaWithoutRespond", func() map[string]any {
			m := with("actions", []string{"approve"})
			m["response_schema"] = map[string]any{"type": "string"}
			return m
		}(), "actions"},
		{"LongKey", with("idempotency_key", strings.Repeat("k", 201)), "idempotency_key"},
		{"BadDeadline", with("deadline", "soon"), "deadline"},
		{"ShortDeadline", with("deadline", "10ms"), "deadline"},
		{"PastDeadline", with("deadline", time.Now().Add(-time.Hour).Format(time.RFC3339)), "deadline"},
		{"BadCallback", with("callback_url", "ftp://example.com/x"), "callback_url"},
		{"PrivateCallback", with("callback_url", "http://127.0.0.1:9/hook"), "callback_url"},
		{"MetadataNotObject", with("metadata", "x"), "metadata"},
		{"MetadataTooBig", with("metadata", map[string]string{"x": strings.Repeat("x", 16<<10)}), "metadata"},
		{"SchemaNested", with("response_schema", map[string]any{"type": "object", "properties": map[string]any{
			"env": map[string]any{"type": "object"}}}), "response_schema.properties.env.type"},
		{"SchemaRef", with("response_schema", map[string]any{"type": "object", "properties": map[string]any{
			"env": map[string]any{"$ref": "#/x"}}}), "response_schema.properties.env.type"},
		{"SchemaOneOf", with("response_schema", map[string]any{"type": "object", "oneOf": []any{}, "properties": map[string]any{
			"env": map[string]any{"type": "string"}}}), "response_schema.oneOf"},
		{"SchemaUnknownFormat", with("response_schema", map[string]any{"type": "object", "properties": map[string]any{
			"when": map[string]any{"type": "string", "format": "date-time"}}}), "response_schema.properties.when.format"},
		{"SchemaTooManyProperties", with("response_schema", func() map[string]any {
			props := map[string]any{}
			for i := range 51 {
				props[fmt.Sprintf("p%d", i)] = map[string]any{"type": "string"}
			}
			return map[string]any{"type": "object", "properties": props}
		}()), "response_schema.properties"},
		{"SchemaTooBig", with("response_schema", map[string]any{"type": "string", "description": strings.Repeat("x", 64<<10)}), "response_schema"},
		{"SchemaArrayOfNumbers", with("response_schema", map[string]any{"type": "array", "items": map[string]any{"type": "number"}}),
			"response_schema.items.type"},
		{"SchemaBadRequired", with("response_schema", map[string]any{"type": "object", "required": []string{"nope"},
			"properties": map[string]any{"a": map[string]any{"type": "string"}}}), "response_schema.required"},
		{"WrongType", with("title", 5), "title"},
		{"UnknownField", with("color", "red"), ""},
	}
	for _, c := range cases {
		r := b.do(t, http.MethodPost, "/api/v1/requests", c.body)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
			continue
		}
		if e := r.apiErr(t); c.field != "" && e.Field != c.field {
			t.Errorf("%s: field %q (%s), want %q", c.name, e.Field, e.Message, c.field)
		}
	}
	if n := b.count(t, "requests") + b.count(t, "tasks"); n != 0 {
		t.Errorf("%d rows written by bad requests", n)
	}
}

// TestRequestIdempotency: 20 concurrent repeats of one key make one
// request, one task, one inbox item; the same key with another body is
// 409; another principal's key is its own.
func TestRequestIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := map[string]any{"kind": "refund", "title": "Refund #42", "payload": map[string]any{"amount": 30},
		"idempotency_key": "refund-42", "callback_url": "https://93.184.216.34/hook"}
	type result struct {
		status int
		req    apiRequest
	}
	results := make([]result, 20)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			r := b.do(t, http.MethodPost, "/api/v1/requests", body)
			results[i].status = r.status
			_ = json.Unmarshal(r.body, &results[i].req)
		})
	}
	wg.Wait()
	created := 0
	for _, r := range results {
		switch r.status {
		case http.StatusCreated:
			created++
		case http.StatusOK:
		default:
			t.Fatalf("repeat: %d %+v", r.status, r.req)
		}
		if r.req.ID != results[0].req.ID || r.req.InterruptID != results[0].req.InterruptID || r.req.InterruptID == "" {
			t.Fatalf("repeats differ: %+v vs %+v", r.req, results[0].req)
		}
		if !strings.HasPrefix(r.req.CallbackSecret, "whsec_") || r.req.CallbackSecret != results[0].req.CallbackSecret {
			t.Fatalf("secret %q vs %q", r.req.CallbackSecret, results[0].req.CallbackSecret)
		}
	}
	if created != 1 {
		t.Errorf("%d of 20 repeats answered 201", created)
	}
	for _, q := range []string{"requests", "tasks", "interrupts"} {
		if n := b.count(t, q); n != 1 {
			t.Errorf("%s = %d", q, n)
		}
	}
	// Another body under the key.
	other := map[string]any{"kind": "refund", "title": "Refund #43", "idempotency_key": "refund-42"}
	if r := b.do(t, http.MethodPost, "/api/v1/requests", other); r.status != http.StatusConflict {
		t.Errorf("reused key: %d %s", r.status, r.body)
	}
	// The secret is in the 201 and repeats only.
	var got map[string]any
	b.do(t, http.MethodGet, "/api/v1/requests/"+results[0].req.ID, nil).json(t, &got)
	if _, ok := got["callback_secret"]; ok {
		t.Errorf("GET shows the secret: %v", got)
	}
	for _, q := range []string{"requests", "tasks", "interrupts"} {
		if n := b.count(t, q); n != 1 {
			t.Errorf("%d %s after the conflict", n, q)
		}
	}
	var started int
	if err := b.pool.QueryRow(context.Background(),
		"SELECT count(*) FROM task_events WHERE type = 'task.created'").Scan(&started); err != nil || started != 1 {
		t.Errorf("%d task.created events after the repeats and the conflict, %v", started, err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRequestWaitAndDecide: a long poll returns within 100 ms of the
// decision; a poll of a decided request returns at once; one of a
// pending request returns at wait.
func TestRequestWaitAndDecide(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := b.makeRequest(t, map[string]any{"kind": "deploy", "title": "Deploy v2?"})
	start := time.Now()
	r := b.do(t, http.MethodGet, "/api/v1/requests/"+req.ID+"?wait=300ms", nil)
	if el := time.Since(start); r.status != http.StatusOK || el < 300*time.Millisecond || el > 2*time.Second {
		t.Fatalf("pending poll: %d after %s", r.status, el)
	}
	done := make(chan apiRequest, 1)
	go func() {
		var got apiRequest
		b.do(t, http.MethodGet, "/api/v1/requests/"+req.ID+"?wait=20s", nil).json(t, &got)
		done <- got
	}()
	time.Sleep(200 * time.Millisecond)
	decided := time.Now()
	d := b.do(t, http.MethodPost, "/api/v1/tasks/"+req.ID+"/decisions", map[string]any{
		"interrupt_id": req.InterruptID, "action": "reject", "feedback": "not today", "payload_sha256": req.PayloadSHA256})
	if d.status != http.StatusAccepted {
		t.Fatalf("decide: %d %s", d.status, d.body)
	}
	select {
	case got := <-done:
		if el := time.Since(decided); el > time.Second {
			t.Errorf("the poll answered %s after the decision", el)
		}
		if got.Status != "rejected" || got.Decision == nil || got.Decision.Action != "reject" || got.Decision.By != "bootstrap" ||
			got.Decision.Feedback != "not today" {
			t.Errorf("after the decision: %+v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll did not return")
	}
	start = time.Now()
	if r := b.do(t, http.MethodGet, "/api/v1/requests/"+req.ID+"?wait=30s", nil); r.status != http.StatusOK || time.Since(start) > time.Second {
		t.Errorf("decided poll: %d after %s", r.status, time.Since(start))
	}
	if r := b.do(t, http.MethodGet, "/api/v1/requests/"+req.ID+"?wait=61s", nil); r.status != http.StatusBadRequest {
		t.Errorf("wait 61s: %d", r.status)
	}
}

// TestRequestTypedAnswer: an answer that fails the response_schema is 422
// naming the field and records nothing; a valid one is stored typed.
func TestRequestTypedAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	schema := map[string]any{"type": "object", "required": []string{"env", "replicas"}, "properties": map[string]any{
		"env":      map[string]any{"type": "string", "enum": []string{"staging", "prod"}, "title": "Environment"},
		"replicas": map[string]any{"type": "integer", "minimum": 1, "maximum": 10},
		"notes":    map[string]any{"type": "string", "format": "textarea", "maxLength": 20},
		"checks":   map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": []string{"lint", "tests"}}, "minItems": 1},
		"urgent":   map[string]any{"type": "boolean"},
	}}
	req := b.makeRequest(t, map[string]any{"kind": "question", "title": "Where to deploy?", "response_schema": schema})
	if strings.Join(req.Actions, ",") != "respond" {
		t.Fatalf("actions %v", req.Actions)
	}
	bad := []struct {
		value any
		field string
	}{
		{map[string]any{"env": "dev", "replicas": 2}, "value.env"},
		{map[string]any{"env": "prod", "replicas": 11}, "value.replicas"},
		{map[string]any{"env": "prod"}, "value.replicas"},
		{map[string]any{"env": "prod", "replicas": 2, "notes": strings.Repeat("n", 21)}, "value.notes"},
		{map[string]any{"env": "prod", "replicas": 2, "checks": []string{}}, "value.checks"},
		{"just text", "value"},
	}
	for _, c := range bad {
		r := b.do(t, http.MethodPost, "/api/v1/tasks/"+req.ID+"/decisions", map[string]any{
			"interrupt_id": req.InterruptID, "action": "respond", "value": c.value})
		if r.status != http.StatusUnprocessableEntity {
			t.Errorf("%v: %d %s", c.value, r.status, r.body)
			continue
		}
		if e := r.apiErr(t); e.Field != c.field {
			t.Errorf("%v: field %q (%s), want %q", c.value, e.Field, e.Message, c.field)
		}
	}
	if n := b.count(t, "decisions"); n != 0 {
		t.Fatalf("%d decisions recorded by wrong answers", n)
	}
	r := b.do(t, http.MethodPost, "/api/v1/tasks/"+req.ID+"/decisions", map[string]any{
		"interrupt_id": req.InterruptID, "action": "respond", "value": map[string]any{"env": "prod", "replicas": 3, "checks": []string{"tests"}, "urgent": true}})
	if r.status != http.StatusAccepted {
		t.Fatalf("answer: %d %s", r.status, r.body)
	}
	var got apiRequest
	b.do(t, http.MethodGet, "/api/v1/requests/"+req.ID, nil).json(t, &got)
	var v map[string]any
	if err := json.Unmarshal(got.Decision.Value, &v); err != nil || got.Status != "responded" || v["env"] != "prod" ||
		v["replicas"] != float64(3) || v["urgent"] != true {
		t.Fatalf("answered: %+v %s", got, got.Decision.Value)
	}
}

// TestRequestEditAndText: edit carries the edited payload as an object;
// a request without a schema takes text answers only.
func TestRequestEditAndText(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := b.makeRequest(t, map[string]any{"kind": "tool_call", "title": "Send mail?", "payload": map[string]any{"to": "a@x"},
		"actions": []string{"approve", "reject", "edit", "respond"}})
	dec := func(body map[string]any) reply {
		body["interrupt_id"] = req.InterruptID
		return b.do(t, http.MethodPost, "/api/v1/tasks/"+req.ID+"/decisions", body)
	}
	if r := dec(map[string]any{"action": "edit", "value": "not json"}); r.status != http.StatusBadRequest || r.apiErr(t).Field != "value" {
		t.Errorf("edit with text: %d %s", r.status, r.body)
	}
	if r := dec(map[string]any{"action": "respond", "value": map[string]any{"a": 1}}); r.status != http.StatusBadRequest {
		t.Errorf("object answer without a schema: %d %s", r.status, r.body)
	}
	if r := dec(map[string]any{"action": "edit", "value": `{"to": "b@x"}`}); r.status != http.StatusAccepted {
		t.Fatalf("edit: %d %s", r.status, r.body)
	}
	var got apiRequest
	b.do(t, http.MethodGet, "/api/v1/requests/"+req.ID, nil).json(t, &got)
	if got.Status != "edited" || string(got.Decision.Value) != `{"to":"b@x"}` {
		t.Errorf("edited: %+v %s", got, got.Decision.Value)
	}
}

// TestRequestCancel: the creator cancels a pending request (200); a
// second cancel is 409; the task is cancelled with the channel named.
func TestRequestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := b.makeRequest(t, map[string]any{"kind": "deploy", "title": "Deploy?"})
	r := b.do(t, http.MethodPost, "/api/v1/requests/"+req.ID+"/cancel", nil)
	var got apiRequest
	r.json(t, &got)
	if r.status != http.StatusOK || got.Status != "cancelled" {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	if r := b.do(t, http.MethodPost, "/api/v1/requests/"+req.ID+"/cancel", nil); r.status != http.StatusConflict {
		t.Errorf("second cancel: %d %s", r.status, r.body)
	}
	var via string
	if err := b.pool.QueryRow(context.Background(),
		"SELECT data->>'via' FROM task_events WHERE task_id = $1 AND type = 'task.cancelled'", req.ID).Scan(&via); err != nil || via != "api" {
		t.Errorf("task.cancelled via %q, %v", via, err)
	}
}

// TestRequestRules: a rule that approves or rejects decides as
// policy:<name> with no inbox item; approvals: 2 needs two approvers; a
// rule that fails to evaluate writes interrupt.rule_error and counts as
// not holding.
func TestRequestRules(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/policy.yaml"
	text := "kinds:\n  refund:\n    rules:\n" +
		"      - {name: small, when: \"payload.amount <= 100\", action: approve}\n" +
		"      - {name: large, when: \"payload.amount > 5000\", approvals: 2}\n" +
		"      - {name: blocked, when: \"payload.country in ['XX']\", action: reject, feedback: \"blocked country\"}\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := auth.LoadPolicy(auth.PolicySources{File: path})
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, setupOpts{token: testToken, policy: &p})
	mk := func(title string, payload map[string]any) apiRequest {
		return b.makeRequest(t, map[string]any{"kind": "refund", "title": title, "payload": payload})
	}
	small := mk("Small", map[string]any{"amount": 30, "country": "FR"})
	if small.Status != "approved" || small.Decision == nil || small.Decision.By != "policy:small" {
		t.Fatalf("small: %+v", small)
	}
	blocked := mk("Blocked", map[string]any{"amount": 300, "country": "XX"})
	if blocked.Status != "rejected" || blocked.Decision.By != "policy:blocked" || blocked.Decision.Feedback != "blocked country" {
		t.Fatalf("blocked: %+v", blocked)
	}
	var rule string
	if err := b.pool.QueryRow(context.Background(), "SELECT data->>'rule' FROM task_events WHERE task_id = $1 AND type = 'decision.recorded'",
		small.ID).Scan(&rule); err != nil || rule != "small" {
		t.Errorf("decision.recorded rule %q, %v", rule, err)
	}
	r := b.do(t, http.MethodGet, "/api/v1/interrupts?status=pending&kind=refund", nil)
	if strings.Contains(string(r.body), small.InterruptID) || strings.Contains(string(r.body), blocked.InterruptID) {
		t.Errorf("ruled interrupts in the inbox: %s", r.body)
	}
	var report struct {
		Kinds []struct {
			Kind         string `json:"kind"`
			AutoApproved int    `json:"auto_approved"`
			AutoRejected int    `json:"auto_rejected"`
		} `json:"kinds"`
	}
	b.do(t, http.MethodGet, "/api/v1/analytics?kind=refund", nil).json(t, &report)
	if len(report.Kinds) != 1 || report.Kinds[0].AutoApproved != 1 || report.Kinds[0].AutoRejected != 1 {
		t.Errorf("analytics: %+v", report)
	}
	// A missing key: small and large fail, blocked does not hold.
	odd := mk("No amount", map[string]any{"country": "FR"})
	if odd.Status != "pending" {
		t.Fatalf("odd: %+v", odd)
	}
	if n := b.count(t, "task_events WHERE type = 'interrupt.rule_error' AND task_id = '"+odd.ID+"'"); n != 2 {
		t.Errorf("%d rule errors", n)
	}
	// Two approvers for a large one: the bootstrap token's approval is one.
	large := mk("Large", map[string]any{"amount": 9000, "country": "FR"})
	d := b.do(t, http.MethodPost, "/api/v1/tasks/"+large.ID+"/decisions", map[string]any{"interrupt_id": large.InterruptID, "action": "approve"})
	if d.status != http.StatusAccepted {
		t.Fatalf("approve: %d %s", d.status, d.body)
	}
	var got apiRequest
	b.do(t, http.MethodGet, "/api/v1/requests/"+large.ID, nil).json(t, &got)
	if got.Status != "pending" {
		t.Errorf("one approval of two decided it: %+v", got)
	}
	// The progress is the rule's N (the kind itself needs one approval)
	// wherever the API shows the interrupt.
	wantProgress := func(where string, a *api.Approvals) {
		t.Helper()
		if a == nil || a.Required != 2 || len(a.Approvers) != 1 || a.Progress != "1 of 2 approvals" {
			t.Errorf("%s: approvals %+v", where, a)
		}
	}
	var list struct {
		Interrupts []api.Interrupt `json:"interrupts"`
	}
	b.do(t, http.MethodGet, "/api/v1/interrupts?status=pending&kind=refund", nil).json(t, &list)
	found := false
	for _, itr := range list.Interrupts {
		switch itr.ID {
		case large.InterruptID:
			found = true
			wantProgress("list", itr.Approvals)
		case odd.InterruptID:
			if itr.Approvals != nil {
				t.Errorf("no rule holds for %s, yet approvals %+v", odd.ID, itr.Approvals)
			}
		}
	}
	if !found {
		t.Errorf("the large request is not in the list: %+v", list)
	}
	var one api.Interrupt
	b.do(t, http.MethodGet, "/api/v1/interrupts/"+large.InterruptID, nil).json(t, &one)
	wantProgress("get", one.Approvals)
	task := b.getTask(t, large.ID)
	if task.PendingInterrupt == nil {
		t.Fatalf("task %+v", task)
	}
	wantProgress("task", task.PendingInterrupt.Approvals)
	// The same token again is refused; a second approver decides it.
	if again := b.do(t, http.MethodPost, "/api/v1/tasks/"+large.ID+"/decisions",
		map[string]any{"interrupt_id": large.InterruptID, "action": "approve"}); again.status != http.StatusForbidden {
		t.Errorf("a second approval by the same token: %d %s", again.status, again.body)
	}
	second := b.tokens(t, auth.RoleApprover, "second")["second"]
	if d := b.doAuth(t, http.MethodPost, "/api/v1/tasks/"+large.ID+"/decisions",
		map[string]any{"interrupt_id": large.InterruptID, "action": "approve"}, second); d.status != http.StatusAccepted {
		t.Fatalf("second approval: %d %s", d.status, d.body)
	}
	b.do(t, http.MethodGet, "/api/v1/requests/"+large.ID, nil).json(t, &got)
	if got.Status != "approved" || got.Decision == nil || got.Decision.By != "token:second" {
		t.Errorf("after two approvals: %+v", got)
	}
}

// TestRequestSeparationOfDuties: on a kind with separation_of_duties, the
// token that made a request may not approve it (403 naming it, nothing
// recorded); it may still reject, and another approver approves.
func TestRequestSeparationOfDuties(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/policy.yaml"
	if err := os.WriteFile(path, []byte("kinds:\n  deploy:\n    separation_of_duties: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := auth.LoadPolicy(auth.PolicySources{File: path})
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, setupOpts{token: testToken, policy: &p})
	tok := b.tokens(t, auth.RoleApprover, "agent", "reviewer")
	mk := func(title string) apiRequest {
		t.Helper()
		r := b.doAuth(t, http.MethodPost, "/api/v1/requests", map[string]any{"kind": "deploy", "title": title,
			"payload": map[string]any{"service": "api"}}, tok["agent"])
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		var out apiRequest
		r.json(t, &out)
		if out.CreatedBy != "token:agent" {
			t.Fatalf("created_by %q", out.CreatedBy)
		}
		return out
	}
	decide := func(req apiRequest, action, who string) reply {
		return b.doAuth(t, http.MethodPost, "/api/v1/tasks/"+req.ID+"/decisions",
			map[string]any{"interrupt_id": req.InterruptID, "action": action, "feedback": "no"}, tok[who])
	}
	req := mk("Deploy api")
	r := decide(req, "approve", "agent")
	if r.status != http.StatusForbidden || !strings.Contains(r.apiErr(t).Message,
		"Separation of duties: token:agent made this request and may not approve its own deploy") {
		t.Fatalf("self-approval: %d %s", r.status, r.body)
	}
	if n := b.count(t, "decisions WHERE task_id = '"+req.ID+"'"); n != 0 {
		t.Errorf("%d decisions recorded by a refused approval", n)
	}
	if r := decide(req, "approve", "reviewer"); r.status != http.StatusAccepted {
		t.Fatalf("another approver: %d %s", r.status, r.body)
	}
	var got apiRequest
	b.do(t, http.MethodGet, "/api/v1/requests/"+req.ID, nil).json(t, &got)
	if got.Status != "approved" || got.Decision.By != "token:reviewer" {
		t.Errorf("approved by %+v", got)
	}
	// Rejecting its own request stays open (SPEC §11: only approval is
	// separated).
	own := mk("Deploy api again")
	if r := decide(own, "reject", "agent"); r.status != http.StatusAccepted {
		t.Fatalf("own rejection: %d %s", r.status, r.body)
	}
}

// TestRequestWorkflowUnlisted: the request workflow is served but
// unlisted (graph.Description.Unlisted): /api/v1/workflows leaves it out,
// and a task of it is not started through /api/v1/tasks (400 naming
// workflow, nothing created); requests are made with /api/v1/requests.
func TestRequestWorkflowUnlisted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, http.MethodGet, "/api/v1/workflows", nil)
	if r.status != http.StatusOK || strings.Contains(string(r.body), `"name":"request"`) {
		t.Fatalf("workflows: %d %s", r.status, r.body)
	}
	before := b.count(t, "tasks")
	r = b.do(t, http.MethodPost, "/api/v1/tasks", map[string]any{"workflow": "request",
		"input": map[string]any{"kind": "approval", "title": "sneaked in"}})
	if e := r.apiErr(t); r.status != http.StatusBadRequest || e.Field != "workflow" ||
		!strings.Contains(e.Message, "POST /api/v1/requests") {
		t.Fatalf("a task of request: %d %s", r.status, r.body)
	}
	if n := b.count(t, "tasks"); n != before {
		t.Fatalf("%d tasks, was %d", n, before)
	}
}

// TestRequestWaitFallback: a request settled with no event to wake its
// long polls (here its interrupt is cancelled by hand, in SQL) is answered
// by the polls' one shared fallback read, within its period (10 s).
func TestRequestWaitFallback(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.makeRequest(t, map[string]any{"kind": "deploy", "title": "Settled behind the hub's back"})
	type answer struct {
		req  apiRequest
		took time.Duration
	}
	done := make(chan answer, 3)
	start := time.Now()
	for range 3 {
		go func() {
			var got apiRequest
			b.do(t, http.MethodGet, "/api/v1/requests/"+r.ID+"?wait=30s", nil).json(t, &got)
			done <- answer{got, time.Since(start)}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := b.pool.Exec(context.Background(), `UPDATE interrupts SET status = 'cancelled', resolved_at = now()
		WHERE id = $1`, r.InterruptID); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		a := <-done
		if a.req.Status != "cancelled" || a.took > 15*time.Second {
			t.Fatalf("a long poll answered %+v after %s", a.req, a.took)
		}
	}
}
