// Package apitest is a small client of the /api/v1 JSON API for tests that
// drive a running server from outside, as a program would: the example
// programs' tests and the root package's.
//
// Test support: it speaks HTTP only and imports nothing of the module.
package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// Client calls one server with one bearer token.
type Client struct {
	// Base is the server's root, e.g. http://127.0.0.1:8080.
	Base string
	// Token is the bearer token sent with each request.
	Token string
}

// Do sends body (nil: none) as JSON to the path (below Base) and decodes
// the answer into out (nil: discarded); it returns the status and the raw
// answer.
func (c Client) Do(tb testing.TB, method, path string, body, out any) (int, []byte) {
	tb.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			tb.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.Base+path, rd)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			tb.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, raw
}

// Task is the part of the API's task JSON these tests read.
type Task struct {
	ID       string          `json:"id"`       // a uuid
	Workflow string          `json:"workflow"` // the workflow's name
	Status   string          `json:"status"`   // queued, running, waiting, …
	Result   json.RawMessage `json:"result"`   // a succeeded task's result
	Error    *string         `json:"error"`    // a failed task's error
	// PendingInterrupt is what a waiting task waits on.
	PendingInterrupt *struct {
		ID        string  `json:"id"`
		Kind      string  `json:"kind"`
		Node      string  `json:"node"`
		Iteration int     `json:"iteration"`
		Deadline  *string `json:"deadline"`
		Payload   struct {
			Artifact *struct {
				Name    string `json:"name"`
				Content string `json:"content"`
			} `json:"artifact"`
		} `json:"payload"`
	} `json:"pending_interrupt"`
}

// Create starts a task of workflow with input and options; it fails the
// test unless the API answers 201.
func (c Client) Create(tb testing.TB, workflow string, input, options any) Task {
	tb.Helper()
	var t Task
	body := map[string]any{"workflow": workflow, "input": input}
	if options != nil {
		body["options"] = options
	}
	if code, raw := c.Do(tb, http.MethodPost, "/api/v1/tasks", body, &t); code != http.StatusCreated {
		tb.Fatalf("create a %s task: %d %s", workflow, code, raw)
	}
	return t
}

// Await polls the task until it has status (waiting on a new interrupt
// when not is that interrupt's id), for at most 30 seconds.
func (c Client) Await(tb testing.TB, id, status, not string) Task {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var t Task
		code, raw := c.Do(tb, http.MethodGet, "/api/v1/tasks/"+id, nil, &t)
		if code != http.StatusOK {
			tb.Fatalf("task %s: %d %s", id, code, raw)
		}
		if t.Status == status && (status != "waiting" || (t.PendingInterrupt != nil && t.PendingInterrupt.ID != not)) {
			return t
		}
		if t.Status == "failed" || time.Now().After(deadline) {
			tb.Fatalf("task %s is %s, want %s: %s", id, t.Status, status, raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Decide records a decision on the task's pending interrupt; it fails the
// test unless the API accepts it (200, 201 or 202).
func (c Client) Decide(tb testing.TB, t Task, action, feedback string) {
	tb.Helper()
	if t.PendingInterrupt == nil {
		tb.Fatalf("task %s has no pending interrupt", t.ID)
	}
	body := map[string]any{"interrupt_id": t.PendingInterrupt.ID, "action": action}
	if feedback != "" {
		body["feedback"] = feedback
	}
	code, raw := c.Do(tb, http.MethodPost, "/api/v1/tasks/"+t.ID+"/decisions", body, nil)
	if code != http.StatusOK && code != http.StatusCreated && code != http.StatusAccepted {
		tb.Fatalf("%s task %s: %d %s", action, t.ID, code, raw)
	}
}

// Decode decodes the task's result into out.
func (t Task) Decode(tb testing.TB, out any) {
	tb.Helper()
	if err := json.Unmarshal(t.Result, out); err != nil {
		tb.Fatalf("task %s: result %s: %v", t.ID, t.Result, err)
	}
}

// String is the task in one line, for failure messages.
func (t Task) String() string {
	return fmt.Sprintf("%s %s %s result=%s", t.ID, t.Workflow, t.Status, t.Result)
}
