package langgraph_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestCORSPrivateNetwork(t *testing.T) {
	t.Parallel()
	s := setup(t)
	pre := func(origin string) response {
		return s.do(t, http.MethodOptions, "/threads/search", nil, "x-api-key", "", "Origin", origin,
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type,x-api-key",
			"Access-Control-Request-Private-Network", "true")
	}
	r := pre(allowOrigin)
	if r.status != http.StatusNoContent {
		t.Fatalf("preflight: %d %s", r.status, r.body)
	}
	for k, want := range map[string]string{
		"Access-Control-Allow-Origin":          allowOrigin,
		"Access-Control-Allow-Private-Network": "true",
		"Access-Control-Allow-Headers":         "content-type, x-api-key, authorization, last-event-id",
	} {
		if got := r.header.Get(k); got != want {
			t.Errorf("preflight %s = %q, want %q", k, got, want)
		}
	}
	if !strings.Contains(r.header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight allows methods %q", r.header.Get("Access-Control-Allow-Methods"))
	}
	foreign := pre("https://evil.example")
	for k := range foreign.header {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("a foreign origin got %s: %q", k, foreign.header.Get(k))
		}
	}
	// The call itself: allowed origin sees the headers the SDK reads.
	r = s.do(t, http.MethodPost, "/threads/search", map[string]any{}, "Origin", allowOrigin)
	if r.status != http.StatusOK || r.header.Get("Access-Control-Allow-Origin") != allowOrigin {
		t.Fatalf("search from the inbox: %d, ACAO %q", r.status, r.header.Get("Access-Control-Allow-Origin"))
	}
	for _, h := range []string{"Content-Location", "Location", "X-Pagination-Next", "X-Pagination-Total"} {
		if !strings.Contains(r.header.Get("Access-Control-Expose-Headers"), h) {
			t.Errorf("%s is not exposed: %q", h, r.header.Get("Access-Control-Expose-Headers"))
		}
	}
	r = s.do(t, http.MethodPost, "/threads/search", map[string]any{}, "Origin", "https://evil.example")
	if r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a foreign origin's call got ACAO %q", r.header.Get("Access-Control-Allow-Origin"))
	}
}

func TestAuthAndErrorsAreDetail(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for _, path := range []string{"/ok", "/info"} {
		if r := s.do(t, http.MethodGet, path, nil, "x-api-key", ""); r.status != http.StatusOK || len(r.body) == 0 {
			t.Errorf("GET %s without a key: %d %q", path, r.status, r.body)
		}
	}
	r := s.do(t, http.MethodPost, "/threads/search", map[string]any{}, "x-api-key", "")
	if r.status != http.StatusUnauthorized {
		t.Fatalf("no key: %d", r.status)
	}
	r.detail(t)
	if r = s.do(t, http.MethodPost, "/threads/search", map[string]any{}, "x-api-key", "wrong-key-000000000"); r.status != http.StatusUnauthorized {
		t.Fatalf("wrong key: %d", r.status)
	}
	r.detail(t)
	if r = s.do(t, http.MethodPost, "/threads/search", map[string]any{}, "x-api-key", "", "Authorization", "Bearer "+testToken); r.status != http.StatusOK {
		t.Fatalf("bearer: %d %s", r.status, r.body)
	}
	// A viewer reads but may not start anything: 403 with the reason.
	viewer, _, err := s.auth.CreateToken(t.Context(), "test", "lg-viewer", "viewer")
	if err != nil {
		t.Fatal(err)
	}
	r = s.do(t, http.MethodPost, "/threads", map[string]any{}, "x-api-key", viewer)
	if r.status != http.StatusForbidden || !strings.Contains(r.detail(t), "operator") {
		t.Fatalf("viewer creates a thread: %d %s", r.status, r.body)
	}
	if r = s.do(t, http.MethodGet, "/no/such/route", nil); r.status != http.StatusNotFound {
		t.Fatalf("unknown route: %d", r.status)
	}
	r.detail(t)
	if r = s.do(t, http.MethodPost, "/threads", "{not json"); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("malformed body: %d %s", r.status, r.body)
	}
	r.detail(t)
}

// waitStatus polls the thread until it has status (runs settle from the
// task's events, so this is the client's view).
func (s *stack) waitStatus(t *testing.T, thread, status string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var th map[string]any
		r := s.do(t, http.MethodGet, "/threads/"+thread, nil)
		r.decode(t, &th)
		if th["status"] == status {
			return th
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %s stays %v, want %s", thread, th["status"], status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStreamFramingAndReplay(t *testing.T) {
	t.Parallel()
	s := setup(t)
	thread := s.newThread(t)
	r := s.do(t, http.MethodPost, "/threads/"+thread+"/runs/stream", gated("Stream <script>alert(1)</script> please"))
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %q %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	loc := r.header.Get("Location")
	if !strings.HasPrefix(loc, "/threads/"+thread+"/runs/") || !strings.HasSuffix(loc, "/stream") {
		t.Fatalf("Location %q is not the run's stream relative to the API root", loc)
	}
	if cl := r.header.Get("Content-Location"); cl != strings.TrimSuffix(loc, "/stream") {
		t.Fatalf("Content-Location %q, Location %q", cl, loc)
	}
	evs, _ := parseSSE(t, r.body)
	if len(evs) < 4 || evs[0].event != "metadata" || evs[len(evs)-1].event != "end" {
		t.Fatalf("stream is not metadata … end: %+v", evs)
	}
	seen := map[string]bool{}
	for _, ev := range evs {
		if ev.id == "" || seen[ev.id] {
			t.Fatalf("event without an id or with a repeated one: %q", ev.raw)
		}
		seen[ev.id] = true
		if len(ev.data) != 1 || ev.data[0] == "" || !json.Valid([]byte(ev.data[0])) {
			t.Fatalf("event data is not one JSON value on one line: %q", ev.raw)
		}
	}
	if evs[len(evs)-1].data[0] != "null" {
		t.Fatalf("end carries %q, want null", evs[len(evs)-1].data[0])
	}
	var meta map[string]any
	_ = json.Unmarshal([]byte(evs[0].data[0]), &meta)
	if meta["thread_id"] != thread || meta["run_id"] == "" {
		t.Fatalf("metadata %v", meta)
	}
	// The last values carry the interrupt; the updates name every node.
	var lastValues map[string]json.RawMessage
	nodes := map[string]bool{}
	for _, ev := range evs {
		switch ev.event {
		case "values":
			lastValues = nil
			_ = json.Unmarshal([]byte(ev.data[0]), &lastValues)
		case "updates":
			var u map[string]json.RawMessage
			_ = json.Unmarshal([]byte(ev.data[0]), &u)
			for k := range u {
				nodes[k] = true
			}
		case "events":
			var e struct {
				Event    string         `json:"event"`
				Metadata map[string]any `json:"metadata"`
			}
			_ = json.Unmarshal([]byte(ev.data[0]), &e)
			if (e.Event != "on_chain_start" && e.Event != "on_chain_end") || e.Metadata["langgraph_node"] == nil {
				t.Fatalf("events mode sent %s", ev.data[0])
			}
		}
	}
	if lastValues["__interrupt__"] == nil || !nodes["analyze"] || !nodes["requirements"] || !nodes["__interrupt__"] {
		t.Fatalf("last values %v, updates of %v", lastValues, nodes)
	}
	var itrs []struct {
		Value struct {
			Description string `json:"description"`
		} `json:"value"`
		ID string `json:"id"`
	}
	_ = json.Unmarshal(lastValues["__interrupt__"], &itrs)
	if len(itrs) != 1 || itrs[0].ID == "" || strings.Contains(itrs[0].Value.Description, "<script>") ||
		!strings.Contains(itrs[0].Value.Description, "&lt;script&gt;") {
		t.Fatalf("interrupt %+v: the description must escape the input", itrs)
	}
	// The thread is interrupted the moment the stream closed; the run succeeded.
	var th map[string]any
	s.do(t, http.MethodGet, "/threads/"+thread, nil).decode(t, &th)
	if th["status"] != "interrupted" {
		t.Fatalf("thread after the stream: %v", th["status"])
	}
	var run map[string]any
	s.do(t, http.MethodGet, strings.TrimSuffix(loc, "/stream"), nil).decode(t, &run)
	if run["status"] != "success" {
		t.Fatalf("run after the stream: %v", run["status"])
	}

	// Replay after an event in the middle: exactly the rest, nothing twice.
	mid := len(evs) / 2
	rr := s.do(t, http.MethodGet, loc, nil, "Last-Event-ID", evs[mid].id)
	if rr.status != http.StatusOK {
		t.Fatalf("replay: %d %s", rr.status, rr.body)
	}
	replay, _ := parseSSE(t, rr.body)
	want := evs[mid+1:]
	if len(replay) != len(want) {
		t.Fatalf("replay after %s sent %d events, want %d", evs[mid].id, len(replay), len(want))
	}
	for i := range want {
		if replay[i].id != want[i].id || replay[i].event != want[i].event || replay[i].data[0] != want[i].data[0] {
			t.Fatalf("replay event %d: %s %s, want %s %s", i, replay[i].id, replay[i].event, want[i].id, want[i].event)
		}
	}
	// From the start (no Last-Event-ID): the same stream again.
	again, _ := parseSSE(t, s.do(t, http.MethodGet, loc, nil).body)
	if len(again) != len(evs) {
		t.Fatalf("join stream sent %d events, the run's stream %d", len(again), len(evs))
	}
}

func TestNonEmptyBodies(t *testing.T) {
	t.Parallel()
	s := setup(t)
	thread := s.newThread(t)
	r := s.do(t, http.MethodPost, "/threads/"+thread+"/runs", gated("Bodies"))
	if r.status != http.StatusOK {
		t.Fatalf("create run: %d %s", r.status, r.body)
	}
	var run map[string]any
	r.decode(t, &run)
	s.waitStatus(t, thread, "interrupted")
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/info"}, {http.MethodGet, "/ok"},
		{http.MethodPost, "/assistants/search"}, {http.MethodGet, "/assistants/feature"},
		{http.MethodPost, "/threads/search"}, {http.MethodGet, "/threads/" + thread},
		{http.MethodGet, "/threads/" + thread + "/state"}, {http.MethodPost, "/threads/" + thread + "/history"},
		{http.MethodGet, "/threads/" + thread + "/runs"}, {http.MethodGet, "/threads/" + thread + "/runs/" + run["run_id"].(string)},
		{http.MethodGet, "/threads/" + thread + "/runs/" + run["run_id"].(string) + "/join"},
	} {
		var body any
		if c.method == http.MethodPost {
			body = map[string]any{}
		}
		r := s.do(t, c.method, c.path, body)
		if r.status != http.StatusOK || len(r.body) == 0 || !json.Valid(r.body) {
			t.Errorf("%s %s: %d %q", c.method, c.path, r.status, r.body)
		}
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	s := setup(t)
	sc := s.scene(t, "Bad input")
	idle, waiting := sc.idle, sc.waiting
	resume := func(hr any) map[string]any {
		return map[string]any{"assistant_id": "feature", "command": map[string]any{"resume": hr}}
	}
	for _, c := range []struct {
		name, method, path string
		body               any
		status             int
		want               string // in the detail
	}{
		{"UnknownAssistant", http.MethodPost, "/threads/" + idle + "/runs", map[string]any{"assistant_id": "nope", "input": map[string]any{}}, 404, "assistant"},
		{"UnknownAssistantID", http.MethodGet, "/assistants/6ba7b821-9dad-11d1-80b4-00c04fd430c8", nil, 404, "assistant"},
		{"UnknownThread", http.MethodGet, "/threads/6ba7b821-9dad-11d1-80b4-00c04fd430c8", nil, 404, "thread"},
		{"UnknownThreadRun", http.MethodPost, "/threads/6ba7b821-9dad-11d1-80b4-00c04fd430c8/runs", gated("x"), 404, "thread"},
		{"NonUUIDThread", http.MethodGet, "/threads/not-a-uuid/state", nil, 422, "UUID"},
		{"UnknownRun", http.MethodGet, "/threads/" + waiting + "/runs/6ba7b821-9dad-11d1-80b4-00c04fd430c8", nil, 404, "run"},
		{"NonUUIDRun", http.MethodGet, "/threads/" + waiting + "/runs/nope", nil, 422, "run_id"},
		{"ResumeIdle", http.MethodPost, "/threads/" + idle + "/runs", resume([]any{map[string]any{"type": "accept"}}), 409, "not interrupted"},
		{"UnknownType", http.MethodPost, "/threads/" + waiting + "/runs", resume([]any{map[string]any{"type": "approve"}}), 422, "type"},
		{"ResponseNotText", http.MethodPost, "/threads/" + waiting + "/runs", resume([]any{map[string]any{"type": "response", "args": map[string]any{"x": 1}}}), 422, "args"},
		{"ResponseEmpty", http.MethodPost, "/threads/" + waiting + "/runs", resume([]any{map[string]any{"type": "response", "args": "  "}}), 422, "args"},
		{"EditNoArgs", http.MethodPost, "/threads/" + waiting + "/runs", resume([]any{map[string]any{"type": "edit", "args": "text"}}), 422, "args"},
		{"TwoResponses", http.MethodPost, "/threads/" + waiting + "/runs", resume([]any{map[string]any{"type": "accept"}, map[string]any{"type": "accept"}}), 422, "exactly one"},
		{"Ignore", http.MethodPost, "/threads/" + waiting + "/runs", resume([]any{map[string]any{"type": "ignore", "args": nil}}), 409, "ignore"},
		{"SecondInput", http.MethodPost, "/threads/" + waiting + "/runs", gated("again"), 409, "holds a task"},
		{"BadStreamMode", http.MethodPost, "/threads/" + idle + "/runs", map[string]any{"assistant_id": "feature", "input": map[string]any{}, "stream_mode": "nope"}, 422, "stream_mode"},
		{"InputNotObject", http.MethodPost, "/threads/" + idle + "/runs", map[string]any{"assistant_id": "feature", "input": "text"}, 422, "input"},
		{"BadGatesOption", http.MethodPost, "/threads/" + idle + "/runs", map[string]any{"assistant_id": "feature", "input": map[string]any{"description": "x"}, "config": map[string]any{"configurable": map[string]any{"gates": "all"}}}, 422, "gates"},
		{"RollbackCancel", http.MethodPost, "/threads/" + waiting + "/runs/" + sc.run + "/cancel?action=rollback", nil, 422, "rollback"},
		{"CancelEndedRun", http.MethodPost, "/threads/" + waiting + "/runs/" + sc.run + "/cancel", nil, 409, "ended"},
		{"StateUpdate", http.MethodPost, "/threads/" + waiting + "/state", map[string]any{"values": map[string]any{"name": "x"}, "as_node": "requirements"}, 422, "as_node"},
		{"ResolveIdle", http.MethodPost, "/threads/" + idle + "/state", map[string]any{"values": nil, "as_node": "__end__"}, 409, "not interrupted"},
		{"SearchBadStatus", http.MethodPost, "/threads/search", map[string]any{"status": "sleeping"}, 422, "status"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.refused(t, sc, s.do(t, c.method, c.path, c.body), c.status, c.want)
		})
	}
}
