package langgraph_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/langgraph"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
)

// A stream lasts as long as its run, with a heartbeat comment at least
// every 6.5 s while nothing happens, and ends when the run is cancelled.
func TestStreamHeartbeatsUntilCancelled(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.stub.Block(feature.RoleResearch)
	thread := s.newThread(t)
	body, _ := json.Marshal(map[string]any{"assistant_id": "feature", "input": map[string]any{"description": "Slow research"},
		"stream_mode": "updates"})
	req, _ := http.NewRequest(http.MethodPost, s.base+"/threads/"+thread+"/runs/stream", strings.NewReader(string(body)))
	req.Header.Set("x-api-key", testToken)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	type line struct {
		at   time.Time
		text string
	}
	lines := make(chan line, 256)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			lines <- line{time.Now(), sc.Text()}
		}
	}()
	var (
		last      = time.Now()
		beats     int
		cancelled bool
		ended     bool
		run       string
	)
	for l := range lines {
		if gap := l.at.Sub(last); gap > 6500*time.Millisecond {
			t.Fatalf("the stream was silent for %s", gap)
		}
		last = l.at
		switch {
		case strings.HasPrefix(l.text, "data: ") && run == "":
			var m map[string]any
			_ = json.Unmarshal([]byte(strings.TrimPrefix(l.text, "data: ")), &m)
			run, _ = m["run_id"].(string)
		case l.text == ": heartbeat":
			beats++
		case l.text == "event: end":
			ended = true
		}
		if beats >= 2 && !cancelled {
			// Two heartbeats (over 5 s) while research hangs: cancel it.
			r := s.do(t, http.MethodPost, "/threads/"+thread+"/runs/"+run+"/cancel", nil)
			if r.status != http.StatusAccepted {
				t.Fatalf("cancel: %d %s", r.status, r.body)
			}
			cancelled = true
		}
	}
	if !ended || !cancelled {
		t.Fatalf("stream closed: ended %v, cancelled %v, heartbeats %d", ended, cancelled, beats)
	}
	var th, rn map[string]any
	s.do(t, http.MethodGet, "/threads/"+thread, nil).decode(t, &th)
	s.do(t, http.MethodGet, "/threads/"+thread+"/runs/"+run, nil).decode(t, &rn)
	if th["status"] != "idle" || rn["status"] != "interrupted" {
		t.Fatalf("after cancel: thread %v, run %v", th["status"], rn["status"])
	}
}

// A task started on the native API is a thread too: Agent Inbox finds it
// by graph_id and resumes it through the same Decider.
func TestNativeTaskIsAThread(t *testing.T) {
	t.Parallel()
	s := setup(t)
	native := strings.TrimSuffix(s.base, "/langgraph") + "/api/v1/tasks"
	body := `{"workflow": "feature", "input": {"description": "Started on the desk"}, "options": {"gates": {}}}`
	req, _ := http.NewRequest(http.MethodPost, native, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var task struct {
		ID string `json:"id"`
	}
	_ = json.NewDecoder(res.Body).Decode(&task)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated || task.ID == "" {
		t.Fatalf("native create: %d", res.StatusCode)
	}
	th := s.waitStatus(t, task.ID, "interrupted")
	md, _ := th["metadata"].(map[string]any)
	if md["graph_id"] != "feature" || md["assistant_id"] != langgraph.AssistantID("feature") {
		t.Fatalf("metadata of a native task's thread: %v", md)
	}
	var found []map[string]any
	s.do(t, http.MethodPost, "/threads/search", map[string]any{"status": "interrupted",
		"metadata": map[string]any{"graph_id": "feature"}}).decode(t, &found)
	if len(found) != 1 || found[0]["thread_id"] != task.ID {
		t.Fatalf("search found %v", found)
	}
	r := s.do(t, http.MethodPost, "/threads/"+task.ID+"/runs/wait", map[string]any{"assistant_id": langgraph.AssistantID("feature"),
		"command": map[string]any{"resume": []any{map[string]any{"type": "accept", "args": nil}}}})
	var vals map[string]json.RawMessage
	r.decode(t, &vals)
	if r.status != http.StatusOK || vals["__interrupt__"] == nil {
		t.Fatalf("resume a native task: %d %s", r.status, r.body)
	}
	th = s.waitStatus(t, task.ID, "interrupted")
	if itrs, _ := th["interrupts"].(map[string]any); itrs["plan"] == nil {
		t.Fatalf("after accept the task waits at %v, want plan", itrs)
	}
}

// A resume is decided by the one Decider under the one policy: separation
// of duties refuses the creator's approval through /langgraph as on the
// desk, and changes nothing; a rejection with feedback stays open to them.
func TestResumeGoesThroughTheDecider(t *testing.T) {
	t.Parallel()
	s := setup(t, auth.NewPolicy(nil, []string{"prd"}))
	thread := s.interruptedThread(t, "Separation of duties")
	before := s.counts(t)
	r := s.do(t, http.MethodPost, "/threads/"+thread+"/runs", map[string]any{"assistant_id": "feature",
		"command": map[string]any{"resume": []any{map[string]any{"type": "accept"}}}})
	if r.status != http.StatusForbidden || !strings.Contains(strings.ToLower(r.detail(t)), "separation of duties") {
		t.Fatalf("the creator's accept: %d %s", r.status, r.body)
	}
	if after := s.counts(t); !maps.Equal(after, before) {
		t.Fatalf("a refused resume changed rows: %v → %v", before, after)
	}
	r = s.do(t, http.MethodPost, "/threads/"+thread+"/runs/wait", map[string]any{"assistant_id": "feature",
		"command": map[string]any{"resume": map[string]any{"type": "response", "args": "Say who may export"}}})
	if r.status != http.StatusOK {
		t.Fatalf("the creator's rejection: %d %s", r.status, r.body)
	}
	var th map[string]any
	s.do(t, http.MethodGet, "/threads/"+thread, nil).decode(t, &th)
	itrs, _ := th["interrupts"].(map[string]any)
	list, _ := itrs["requirements"].([]any)
	if len(list) != 1 || !strings.Contains(fmt.Sprint(list[0]), "Say who may export") {
		t.Fatalf("after the rejection: %v", th["interrupts"])
	}

	// Mark as resolved: the task is cancelled and its timeline says by whom.
	r = s.do(t, http.MethodPost, "/threads/"+thread+"/state", map[string]any{"values": nil, "as_node": "__end__"})
	if r.status != http.StatusOK || len(r.body) == 0 {
		t.Fatalf("resolve: %d %s", r.status, r.body)
	}
	s.waitStatus(t, thread, "idle")
	var reason string
	if err := s.pool.QueryRow(t.Context(), `SELECT data->>'reason' FROM task_events WHERE task_id = $1 AND type = 'task.cancelled'`,
		thread).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if reason != "resolved by bootstrap" {
		t.Fatalf("task.cancelled reason %q", reason)
	}
}

// On a kind that needs two approvers, the first accept is one approval:
// its run ends where it began and the thread still waits; the second
// approver's accept moves the task on.
func TestTwoApprovers(t *testing.T) {
	t.Parallel()
	s := setup(t, auth.NewPolicy(map[string]int{"prd": 2}, nil))
	second, _, err := s.auth.CreateToken(t.Context(), "test", "lg-second", auth.RoleApprover)
	if err != nil {
		t.Fatal(err)
	}
	thread := s.interruptedThread(t, "Two approvers")
	accept := map[string]any{"assistant_id": "feature", "command": map[string]any{"resume": []any{map[string]any{"type": "accept"}}}}
	r := s.do(t, http.MethodPost, "/threads/"+thread+"/runs/stream", accept)
	evs, _ := parseSSE(t, r.body)
	if len(evs) != 3 || evs[0].event != "metadata" || evs[1].event != "values" || !strings.Contains(evs[1].data[0], "__interrupt__") ||
		evs[2].event != "end" {
		t.Fatalf("one approval of two streamed %+v", evs)
	}
	var th map[string]any
	s.do(t, http.MethodGet, "/threads/"+thread, nil).decode(t, &th)
	if itrs, _ := th["interrupts"].(map[string]any); th["status"] != "interrupted" || itrs["requirements"] == nil {
		t.Fatalf("after one approval: %v %v", th["status"], th["interrupts"])
	}
	r = s.do(t, http.MethodPost, "/threads/"+thread+"/runs/wait", accept, "x-api-key", second)
	if r.status != http.StatusOK {
		t.Fatalf("second approval: %d %s", r.status, r.body)
	}
	th = s.waitStatus(t, thread, "interrupted")
	if itrs, _ := th["interrupts"].(map[string]any); itrs["plan"] == nil {
		t.Fatalf("after two approvals the task waits at %v, want plan", th["interrupts"])
	}
	var runs []map[string]any
	s.do(t, http.MethodGet, "/threads/"+thread+"/runs", nil).decode(t, &runs)
	if len(runs) != 3 {
		t.Fatalf("runs: %v", runs)
	}
	for _, run := range runs {
		if run["status"] != "success" {
			t.Fatalf("run %v is %v", run["run_id"], run["status"])
		}
	}
}

// A resume's run is written with the read of its task (one round trip);
// a resume refused after that (an answer the interrupt cannot take, a
// decider the policy refuses) leaves no run behind, and the next resume
// of the thread is not refused as busy.
func TestRefusedResumeLeavesNoRun(t *testing.T) {
	t.Parallel()
	s := setup(t, auth.NewPolicy(nil, []string{"prd"}))
	thread := s.interruptedThread(t, "Refused resumes")
	before := s.counts(t)
	for _, resume := range []any{
		[]any{map[string]any{"type": "bogus"}},
		// the task's creator, under separation of duties
		[]any{map[string]any{"type": "accept"}},
	} {
		r := s.do(t, http.MethodPost, "/threads/"+thread+"/runs/stream", map[string]any{"assistant_id": "feature",
			"command": map[string]any{"resume": resume}})
		if r.status < 400 || r.status >= 500 {
			t.Fatalf("resume %v: %d %s, want a refusal", resume, r.status, r.body)
		}
		if after := s.counts(t); !maps.Equal(after, before) {
			t.Fatalf("resume %v refused but changed rows: %v → %v", resume, before, after)
		}
	}
	r := s.do(t, http.MethodPost, "/threads/"+thread+"/runs/wait", map[string]any{"assistant_id": "feature",
		"command": map[string]any{"resume": map[string]any{"type": "response", "args": "Say who may export"}}})
	if r.status != http.StatusOK {
		t.Fatalf("a resume after refused ones: %d %s", r.status, r.body)
	}
}
