package langgraph_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

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
