package main

// End-to-end tests of SPEC §11's deadlines: real `gatehouse serve`
// processes with a policy file, deadlines of a second or two.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writePolicyFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

type itrJSON struct {
	ID              string  `json:"id"`
	TaskID          string  `json:"task_id"`
	Kind            string  `json:"kind"`
	Status          string  `json:"status"`
	Deadline        *string `json:"deadline"`
	Overdue         bool    `json:"overdue"`
	EscalationLevel int     `json:"escalation_level"`
	PayloadSHA256   string  `json:"payload_sha256"`
}

// waitingAt creates a feature task that stops at its prd gate (the later
// gates pass) and returns the interrupt once the task waits on it.
func (p *proc) waitingAt(t *testing.T) itrJSON {
	t.Helper()
	id := p.createFeature(map[string]any{"gates": map[string]bool{"allowPlan": true, "allowMerge": true}}, "A deadline feature")
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var task taskJSON
		p.do("GET", "/api/v1/tasks/"+id, nil, &task)
		if task.Status == "waiting" && task.PendingInterrupt != nil {
			var itr itrJSON
			if code := p.do("GET", "/api/v1/interrupts/"+task.PendingInterrupt.ID, nil, &itr); code != http.StatusOK {
				t.Fatalf("GET interrupt: %d", code)
			}
			return itr
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the task never waited at its prd gate")
	return itrJSON{}
}

func (d *db) waitFor(within time.Duration, what, query string, want int, args ...any) {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for d.int(query, args...) != want {
		if time.Now().After(deadline) {
			d.t.Fatalf("%s: %d after %s, want %d", what, d.int(query, args...), within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestE2EDeadlineOnTimeout: a prd deadline of 2s with each on_timeout,
// through gatehouse serve: the task's outcome, the interrupt's status, the
// events by system, the audit, and a decision after expiry (409, nothing
// changes).
func TestE2EDeadlineOnTimeout(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"fail", "approve", "cancel", "none"} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			policy := writePolicyFile(t, fmt.Sprintf("kinds:\n  prd:\n    deadline: 2s\n    on_timeout: %s\n", action))
			p := serve(t, d.url, "GATEHOUSE_POLICY_FILE="+policy)
			itr := p.waitingAt(t)
			if itr.Deadline == nil || itr.Overdue || len(itr.PayloadSHA256) != 64 {
				t.Fatalf("interrupt as raised: %+v", itr)
			}
			raised, _ := time.Parse(time.RFC3339Nano, *itr.Deadline)
			if action == "none" {
				d.waitFor(10*time.Second, "overdue events", "SELECT count(*) FROM task_events WHERE type = 'interrupt.overdue' AND data->>'actor' = 'system'", 1)
				var got itrJSON
				p.do("GET", "/api/v1/interrupts/"+itr.ID, nil, &got)
				if got.Status != "pending" || !got.Overdue {
					t.Fatalf("none: %+v", got)
				}
				if code := p.do("POST", "/api/v1/tasks/"+itr.TaskID+"/decisions",
					map[string]any{"interrupt_id": itr.ID, "action": "approve"}, nil); code != http.StatusAccepted {
					t.Fatalf("an overdue interrupt stays decidable: %d", code)
				}
				d.waitAll(20 * time.Second)
				if n := d.int("SELECT count(*) FROM task_events WHERE type = 'interrupt.overdue'"); n != 1 {
					t.Errorf("%d overdue events", n)
				}
				return
			}
			d.waitFor(10*time.Second, "expiries", "SELECT count(*) FROM task_events WHERE type = 'interrupt.expired' AND data->>'actor' = 'system'", 1)
			var at time.Time
			if err := d.pool.QueryRow(t.Context(), "SELECT created_at FROM task_events WHERE type = 'interrupt.expired'").Scan(&at); err != nil {
				t.Fatal(err)
			}
			if late := at.Sub(raised); late > 2*time.Second || late < 0 {
				t.Errorf("expired %s after the deadline", late)
			}
			want := map[string]string{"fail": "failed", "approve": "succeeded", "cancel": "cancelled"}[action]
			d.waitAll(20 * time.Second)
			var task taskJSON
			p.do("GET", "/api/v1/tasks/"+itr.TaskID, nil, &task)
			if task.Status != want {
				t.Fatalf("task %s, want %s (error %q)", task.Status, want, task.Error)
			}
			if action == "fail" && !regexp.MustCompile(`^deadline passed: prd at requirements waited 2s$`).MatchString(task.Error) {
				t.Errorf("error %q", task.Error)
			}
			var got itrJSON
			p.do("GET", "/api/v1/interrupts/"+itr.ID, nil, &got)
			if got.Status != "expired" {
				t.Errorf("interrupt %s, want expired", got.Status)
			}
			var list struct {
				Interrupts []itrJSON `json:"interrupts"`
			}
			p.do("GET", "/api/v1/interrupts?status=expired", nil, &list)
			if len(list.Interrupts) != 1 || list.Interrupts[0].ID != itr.ID {
				t.Errorf("?status=expired: %+v", list.Interrupts)
			}
			if action == "approve" {
				if n := d.int("SELECT count(*) FROM decisions WHERE decided_by = 'system' AND action = 'approve'"); n != 1 {
					t.Errorf("%d decisions by system", n)
				}
				if n := d.int("SELECT count(*) FROM task_events WHERE type = 'decision.recorded' AND data->>'actor' = 'system'"); n != 1 {
					t.Errorf("%d decision.recorded by system", n)
				}
			}
			// The audit shows the expiry by system.
			var audit struct {
				Events []struct {
					Actor string `json:"actor"`
					Kind  string `json:"kind"`
				} `json:"events"`
			}
			p.do("GET", "/api/v1/audit?kind=interrupt.expired", nil, &audit)
			if len(audit.Events) != 1 || audit.Events[0].Actor != "system" {
				t.Errorf("audit: %+v", audit.Events)
			}
			// A decision after the expiry: 409 saying so, nothing changes.
			events := d.int("SELECT count(*) FROM task_events")
			var e struct {
				Error struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			code := p.do("POST", "/api/v1/tasks/"+itr.TaskID+"/decisions", map[string]any{"interrupt_id": itr.ID, "action": "approve"}, &e)
			if code != http.StatusConflict || !strings.Contains(e.Error.Message, "expired") {
				t.Errorf("decision after expiry: %d %+v", code, e)
			}
			if n := d.int("SELECT count(*) FROM task_events"); n != events {
				t.Errorf("a refused decision wrote %d events", n-events)
			}
		})
	}
}

// TestE2EFiftyDeadlinesTwoReplicas: 50 interrupts with the same deadline
// on two replicas: each expires exactly once.
func TestE2EFiftyDeadlinesTwoReplicas(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	policy := writePolicyFile(t, "kinds:\n  prd:\n    deadline: 4s\n    on_timeout: fail\n")
	env := []string{"GATEHOUSE_POLICY_FILE=" + policy}
	a := serve(t, d.url, env...)
	b := serve(t, d.url, env...)
	for i := range 50 {
		p := a
		if i%2 == 1 {
			p = b
		}
		p.createFeature(map[string]any{"gates": map[string]bool{}}, fmt.Sprintf("Deadline feature %d", i))
	}
	d.waitFor(30*time.Second, "failed tasks", "SELECT count(*) FROM tasks WHERE status = 'failed'", 50)
	if n := d.int("SELECT count(*) FROM task_events WHERE type = 'interrupt.expired'"); n != 50 {
		t.Errorf("%d expiries, want 50", n)
	}
	if n := d.int("SELECT count(*) FROM task_events WHERE type = 'task.failed'"); n != 50 {
		t.Errorf("%d task.failed, want 50", n)
	}
	if n := d.int("SELECT count(*) FROM (SELECT data->>'interrupt_id' FROM task_events WHERE type = 'interrupt.expired' GROUP BY 1 HAVING count(*) > 1) x"); n != 0 {
		t.Errorf("%d interrupts expired twice", n)
	}
}

// TestE2EKillNineBeforeDeadline: the only replica dies (SIGKILL) before a
// reminder and a deadline; restarted after both were due, it fires each
// once.
func TestE2EKillNineBeforeDeadline(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	policy := writePolicyFile(t, "kinds:\n  prd:\n    deadline: 3s\n    on_timeout: fail\n    reminders: [2s]\n")
	env := []string{"GATEHOUSE_POLICY_FILE=" + policy}
	p := serve(t, d.url, env...)
	itr := p.waitingAt(t)
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.Exited
	dl, _ := time.Parse(time.RFC3339Nano, *itr.Deadline)
	if n := d.int("SELECT count(*) FROM task_events WHERE type IN ('interrupt.reminder', 'interrupt.expired')"); n != 0 {
		t.Fatalf("fired before the kill: %d (the machine is too slow for this test's timing)", n)
	}
	time.Sleep(time.Until(dl.Add(500 * time.Millisecond)))
	serve(t, d.url, env...)
	d.waitFor(10*time.Second, "failed tasks", "SELECT count(*) FROM tasks WHERE status = 'failed'", 1)
	time.Sleep(500 * time.Millisecond)
	if n := d.int("SELECT count(*) FROM task_events WHERE type = 'interrupt.reminder'"); n != 1 {
		t.Errorf("%d reminders, want 1", n)
	}
	if n := d.int("SELECT count(*) FROM task_events WHERE type = 'interrupt.expired'"); n != 1 {
		t.Errorf("%d expiries, want 1", n)
	}
	var data json.RawMessage
	if err := d.pool.QueryRow(t.Context(), "SELECT data FROM task_events WHERE type = 'interrupt.reminder'").Scan(&data); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"offset": "2s"`) {
		t.Errorf("reminder data %s", data)
	}
}

// TestE2EPolicyFileErrorsExitTwo: a bad policy file stops serve with exit
// 2 and the line and key.
func TestE2EPolicyFileErrorsExitTwo(t *testing.T) {
	t.Parallel()
	cases := []struct{ text, want string }{
		{"kinds:\n  Deploy: {deadline: 1h}\n", ":2: kinds.Deploy: a kind is a lower-case letter"},
		{"kinds:\n  prd:\n    deciders: [group:ops]\n", ":3: kinds.prd.deciders: group:ops is not defined under groups"},
		{"kinds:\n  prd:\n    deadline: -1h\n", ":3: kinds.prd.deadline: -1h is shorter than the minimum of 1s"},
		{"kinds:\n  prd:\n    deadline: 1h\n    on_timeout: fial\n", ":4: kinds.prd.on_timeout: want fail, approve, cancel or none"},
		{"kinds:\n  prd:\n    deadline: 1h\n    reminders: [2h]\n", ":4: kinds.prd.reminders:"},
		{"kinds:\n  refund:\n    rules:\n      - {name: a, when: \"amount > 3\", action: approve}\n",
			":4: kinds.refund.rules[0].when: column 1: undeclared reference to 'amount'"},
		{"kinds:\n  question:\n    deadline: 1h\n    on_timeout: approve\n", ":4: kinds.question.on_timeout: approve cannot answer a question"},
	}
	for _, c := range cases {
		path := writePolicyFile(t, c.text)
		var stdout, stderr strings.Builder
		code := run(t.Context(), []string{"serve"}, func(k string) string {
			switch k {
			case "GATEHOUSE_POLICY_FILE":
				return path
			case "DATABASE_URL":
				return "postgres://127.0.0.1:1/none"
			}
			return ""
		}, strings.NewReader(""), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), path+c.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.text, code, stderr.String(), c.want)
		}
	}
	// Set both ways: an error naming both.
	path := writePolicyFile(t, "kinds:\n  merge:\n    approvals: 2\n")
	var stdout, stderr strings.Builder
	code := run(t.Context(), []string{"policy", "show"}, func(k string) string {
		return map[string]string{"GATEHOUSE_POLICY_FILE": path, "GATEHOUSE_APPROVALS": "merge=3"}[k]
	}, strings.NewReader(""), &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "kinds.merge.approvals: merge is also set by GATEHOUSE_APPROVALS") {
		t.Errorf("conflict: exit %d, %q", code, stderr.String())
	}
	code = run(t.Context(), []string{"policy", "show"}, func(k string) string {
		return map[string]string{"GATEHOUSE_POLICY_FILE": path}[k]
	}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "approvals: 2") {
		t.Errorf("policy show: exit %d, %q", code, stdout.String())
	}
	// The rules, listed in the file's shape.
	rules := writePolicyFile(t, "kinds:\n  refund:\n    rules:\n      - {name: small, when: \"payload.amount <= 100\", action: approve}\n")
	stdout.Reset()
	code = run(t.Context(), []string{"policy", "show"}, func(k string) string {
		return map[string]string{"GATEHOUSE_POLICY_FILE": rules}[k]
	}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), `- {name: small, when: "payload.amount <= 100", action: approve}`) {
		t.Errorf("policy show with rules: exit %d, %q", code, stdout.String())
	}
}
