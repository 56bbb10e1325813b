// Command external is a program of another module that imports Gatehouse
// as a library (its go.mod requires github.com/gatehousehq/gatehouse):
// it defines a workflow, runs it on PostgreSQL (DATABASE_URL), decides its
// gate over HTTP as a person would, checks the result, and stops the
// server. It prints "external: ok" and exits 0 when all went as it should.
// The root package's TestExternalModule builds and runs it offline.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gatehousehq/gatehouse"
	"github.com/gatehousehq/gatehouse/graph"
)

// Expense is the workflow's state.
type Expense struct {
	Item     string `json:"item"`
	Cents    int    `json:"cents"`
	Approved bool   `json:"approved"`
}

func expenseWorkflow() (graph.Workflow, error) {
	return graph.New[Expense]("expense").
		Describe("Expense", "An expense a manager approves.").
		Init(func(input json.RawMessage, _ graph.Options) (Expense, error) {
			var e Expense
			if err := json.Unmarshal(input, &e); err != nil || e.Item == "" {
				return e, &graph.ValidationError{Field: "input.item", Message: "is required"}
			}
			return e, nil
		}).
		Node("file", func(_ context.Context, run *graph.NodeRun, e Expense) (Expense, error) {
			run.Artifact("expense.txt", "text/plain", fmt.Sprintf("%s: %d cents", e.Item, e.Cents))
			return e, nil
		}).
		Gate("file", graph.Gate[Expense]{Kind: "expense", Option: "allowExpense", AlwaysAsks: true,
			Title: "Approve the expense", Artifact: "expense.txt",
			OnApprove: func(e Expense) (Expense, error) { e.Approved = true; return e, nil },
			OnReject:  func(e Expense, _ string, _ int) (Expense, error) { return e, nil }}).
		Edge("file", graph.END).
		Compile()
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "external:", err)
		os.Exit(1)
	}
	fmt.Println("external: ok")
}

const token = "external-module-token-0123456789"

func run() error {
	wf, err := expenseWorkflow()
	if err != nil {
		return err
	}
	cfg, err := gatehouse.ConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	cfg.Addr, cfg.BootstrapToken, cfg.AdminPassword = "127.0.0.1:0", token, "external-admin-password"
	srv, err := gatehouse.New(cfg, gatehouse.WithoutBuiltins(), gatehouse.WithWorkflows(wf))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-stopped:
		return fmt.Errorf("Run: %v", err)
	case <-time.After(time.Minute):
		return errors.New("not serving after a minute")
	}
	base := "http://" + srv.Addr().String() + "/api/v1"

	var task struct {
		ID               string          `json:"id"`
		Status           string          `json:"status"`
		Result           json.RawMessage `json:"result"`
		PendingInterrupt *struct {
			ID   string `json:"id"`
			Kind string `json:"kind"`
		} `json:"pending_interrupt"`
	}
	if err := call("POST", base+"/tasks", map[string]any{"workflow": "expense",
		"input": map[string]any{"item": "train ticket", "cents": 4200}}, &task); err != nil {
		return err
	}
	await := func(status string) error {
		for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(20 * time.Millisecond) {
			if err := call("GET", base+"/tasks/"+task.ID, nil, &task); err != nil {
				return err
			}
			if task.Status == status {
				return nil
			}
		}
		return fmt.Errorf("task %s is %s, want %s", task.ID, task.Status, status)
	}
	if err := await("waiting"); err != nil {
		return err
	}
	if task.PendingInterrupt == nil || task.PendingInterrupt.Kind != "expense" {
		return fmt.Errorf("waiting without an expense interrupt: %+v", task.PendingInterrupt)
	}
	if err := call("POST", base+"/tasks/"+task.ID+"/decisions",
		map[string]any{"interrupt_id": task.PendingInterrupt.ID, "action": "approve"}, nil); err != nil {
		return err
	}
	if err := await("succeeded"); err != nil {
		return err
	}
	var got Expense
	if err := json.Unmarshal(task.Result, &got); err != nil || !got.Approved || got.Item != "train ticket" {
		return fmt.Errorf("result %s (%v): want the approved train ticket", task.Result, err)
	}
	cancel()
	if err := <-stopped; err != nil {
		return fmt.Errorf("Run after cancel: %w", err)
	}
	return nil
}

// call sends body as JSON with the bootstrap token and decodes a 2xx
// answer into out.
func call(method, url string, body, out any) error {
	var buf bytes.Buffer
	if body != nil {
		if err := json.NewEncoder(&buf).Encode(body); err != nil {
			return err
		}
	}
	req, err := http.NewRequest(method, url, &buf)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var raw bytes.Buffer
	_, _ = raw.ReadFrom(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, strings.TrimPrefix(url, "http://"), resp.StatusCode, raw.String())
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw.Bytes(), out)
}
