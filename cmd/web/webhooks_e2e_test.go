package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// receiver is a webhook endpoint on loopback that verifies every request
// with the reference library of Standard Webhooks and answers as told.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	secret string
	wh     *standardwebhooks.Webhook
	// answer returns the status for the nth request (from 1).
	answer func(n int) int
	// hold, when set, blocks requests until it is closed.
	hold chan struct{}
	got  []hook
	bad  []string
}

type hook struct {
	ID   string
	Type string
	Body map[string]any
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	r := &receiver{t: t, answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		r.mu.Lock()
		if r.hold != nil {
			select {
			case <-r.hold:
			default:
				close(r.hold)
			}
		}
		r.mu.Unlock()
		r.srv.CloseClientConnections()
		r.srv.Close()
	})
	return r
}

// newDownReceiver is a receiver that is down (503) until up is called,
// then answers 200.
func newDownReceiver(t *testing.T) (r *receiver, up func()) {
	var isUp atomic.Bool
	r = newReceiver(t, func(int) int {
		if isUp.Load() {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	return r, func() { isUp.Store(true) }
}

func (r *receiver) setSecret(secret string) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		r.t.Fatalf("reference library refuses the secret %q: %v", secret, err)
	}
	r.mu.Lock()
	r.secret, r.wh = secret, wh
	r.mu.Unlock()
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	wh, hold := r.wh, r.hold
	r.mu.Unlock()
	if hold != nil {
		<-hold
	}
	var b map[string]any
	_ = json.Unmarshal(body, &b)
	r.mu.Lock()
	defer r.mu.Unlock()
	if wh == nil {
		r.bad = append(r.bad, "no secret yet")
	} else if err := wh.Verify(body, req.Header); err != nil {
		r.bad = append(r.bad, err.Error())
	}
	typ, _ := b["type"].(string)
	r.got = append(r.got, hook{ID: req.Header.Get("webhook-id"), Type: typ, Body: b})
	code := http.StatusOK
	if r.answer != nil {
		code = r.answer(len(r.got))
	}
	if code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(code)
}

func (r *receiver) hooks() []hook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hook(nil), r.got...)
}

// waitHooks waits until at least n requests arrived.
func (r *receiver) waitHooks(n int, within time.Duration) []hook {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if h := r.hooks(); len(h) >= n {
			return h
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.t.Fatalf("%d webhook requests after %s, want %d: %+v", len(r.hooks()), within, n, r.hooks())
	return nil
}

func (r *receiver) assertVerified() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		r.t.Errorf("signatures the reference library refused: %v", r.bad)
	}
}

// addWebhook runs gatehouse webhooks add and returns the secret.
func addWebhook(t *testing.T, dbURL, url string, extra ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"webhooks", "add", url}, extra...)...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "GATEHOUSE_WEBHOOK_ALLOW_PRIVATE=true")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("webhooks add: %v", err)
	}
	secret := strings.TrimSpace(string(out))
	if !regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{43}=$`).MatchString(secret) {
		t.Fatalf("secret %q", secret)
	}
	return secret
}

var webhookEnv = []string{"GATEHOUSE_WEBHOOK_ALLOW_PRIVATE=true", "GATEHOUSE_WEBHOOK_BACKOFF_SCALE=0.001",
	"GATEHOUSE_PUBLIC_URL=http://gatehouse.test"}

// TestE2EWebhookRetriesKeepTheID: a receiver that answers 500 twice and
// then 200 gets three attempts with one webhook-id, each signed afresh
// and verified by the reference library; the delivery log has them all.
func TestE2EWebhookRetriesKeepTheID(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	var mu sync.Mutex
	seen := map[string]int{}
	r := newReceiver(t, nil)
	r.answer = func(n int) int {
		h := r.got[n-1]
		mu.Lock()
		defer mu.Unlock()
		seen[h.ID]++
		if h.Type == "interrupt.raised" && seen[h.ID] <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	r.setSecret(addWebhook(t, d.url, r.srv.URL+"/hook", "--events", "interrupt.raised,interrupt.decided"))
	p := serve(t, d.url, webhookEnv...)
	id := p.createFeature(map[string]any{"gates": map[string]any{"allowPrd": false, "allowPlan": true, "allowMerge": true}}, "webhooks")
	hooks := r.waitHooks(3, 30*time.Second)
	r.assertVerified()
	if hooks[0].ID != hooks[1].ID || hooks[1].ID != hooks[2].ID || hooks[0].Type != "interrupt.raised" {
		t.Fatalf("three attempts of one delivery, want one webhook-id: %+v", hooks)
	}
	data := hooks[2].Body["data"].(map[string]any)
	itr := data["interrupt"].(map[string]any)
	task := data["task"].(map[string]any)
	if itr["kind"] != "prd" || task["id"] != id || data["links"].(map[string]any)["task"] != "http://gatehouse.test/tasks/"+id {
		t.Errorf("body: %v", hooks[2].Body)
	}
	if _, err := time.Parse(time.RFC3339, hooks[2].Body["timestamp"].(string)); err != nil {
		t.Errorf("timestamp: %v", err)
	}
	waitFor(t, func() bool {
		return d.int("SELECT count(*) FROM outbox WHERE state = 'delivered'") == 1 &&
			d.int("SELECT count(*) FROM outbox_attempts") == 3
	})
	if n := d.int("SELECT count(*) FROM outbox_attempts WHERE ok"); n != 1 {
		t.Errorf("%d successful attempts logged, want 1", n)
	}
	// Approving sends interrupt.decided with the decision.
	var tk taskJSON
	p.do("GET", "/api/v1/tasks/"+id, nil, &tk)
	if code := p.do("POST", "/api/v1/tasks/"+id+"/decisions", map[string]any{"interrupt_id": tk.PendingInterrupt.ID,
		"action": "approve"}, nil); code != http.StatusAccepted {
		t.Fatalf("approve: %d", code)
	}
	hooks = r.waitHooks(4, 30*time.Second)
	last := hooks[3]
	dec, _ := last.Body["data"].(map[string]any)["decision"].(map[string]any)
	if last.Type != "interrupt.decided" || dec["action"] != "approve" || dec["decided_by"] != "bootstrap" {
		t.Errorf("decided: %+v", last)
	}
	// task.succeeded is not among the endpoint's events.
	d.waitAll(30 * time.Second)
	time.Sleep(200 * time.Millisecond)
	if h := r.hooks(); len(h) != 4 {
		t.Errorf("%d requests, want 4 (task.succeeded was not asked for)", len(h))
	}
	r.assertVerified()
}

// TestE2EWebhookGoneDisables: 410 disables the endpoint; nothing more is
// sent to it.
func TestE2EWebhookGoneDisables(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	r := newReceiver(t, func(int) int { return http.StatusGone })
	r.setSecret(addWebhook(t, d.url, r.srv.URL))
	p := serve(t, d.url, webhookEnv...)
	p.createFeature(nil, "gone")
	r.waitHooks(1, 30*time.Second)
	waitFor(t, func() bool {
		return d.int("SELECT count(*) FROM webhook_endpoints WHERE disabled_at IS NOT NULL") == 1
	})
	d.waitAll(30 * time.Second)
	p.createFeature(nil, "gone again")
	d.waitAll(30 * time.Second)
	time.Sleep(200 * time.Millisecond)
	if h := r.hooks(); len(h) != 1 {
		t.Errorf("%d requests to a gone endpoint, want 1", len(h))
	}
	if n := d.int("SELECT count(*) FROM outbox WHERE state = 'pending'"); n != 0 {
		t.Errorf("%d deliveries still pending", n)
	}
	cmd := exec.Command(binary, "webhooks", "list")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+d.url)
	out, _ := cmd.Output()
	if !strings.Contains(string(out), "disabled since") {
		t.Errorf("list: %s", out)
	}
}

// TestE2EWebhookSurvivesKillNine: the server is killed with SIGKILL after
// the event was committed and before its delivery succeeded; the delivery
// arrives after a restart, under the same webhook-id.
func TestE2EWebhookSurvivesKillNine(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	r, up := newDownReceiver(t)
	r.setSecret(addWebhook(t, d.url, r.srv.URL, "--events", "interrupt.raised"))
	// A large scale: the first retry would wait about 5 minutes × 0.2.
	p := serve(t, d.url, "GATEHOUSE_WEBHOOK_ALLOW_PRIVATE=true", "GATEHOUSE_WEBHOOK_BACKOFF_SCALE=0.2")
	p.createFeature(map[string]any{"gates": map[string]any{"allowPrd": false}}, "kill -9")
	first := r.waitHooks(1, 30*time.Second)[0]
	// Killed once the failed attempt is on record: its retry is due in
	// about a second. (Killed before that, the row, born claimed by the
	// killed server's sender, would wait for that claim's 30 s lease.)
	waitFor(t, func() bool { return d.int("SELECT count(*) FROM outbox_attempts") == 1 })
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.Exited
	up()
	// The retry is due ~1 s (5 s × 0.2) after the failed attempt: the
	// restarted server finds it in the table and sends it.
	serve(t, d.url, "GATEHOUSE_WEBHOOK_ALLOW_PRIVATE=true", "GATEHOUSE_WEBHOOK_BACKOFF_SCALE=0.2")
	hooks := r.waitHooks(2, 30*time.Second)
	if hooks[1].ID != first.ID {
		t.Errorf("after the restart: webhook-id %s, want %s", hooks[1].ID, first.ID)
	}
	waitFor(t, func() bool { return d.int("SELECT count(*) FROM outbox WHERE state = 'delivered'") == 1 })
	r.assertVerified()
}

// TestE2EHangingReceiverSlowsNothing: while the receiver holds every
// request, tasks run and decisions are taken: the approval reaches the
// next gate while the first delivery still hangs.
func TestE2EHangingReceiverSlowsNothing(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	r := newReceiver(t, nil)
	r.hold = make(chan struct{})
	r.setSecret(addWebhook(t, d.url, r.srv.URL))
	p := serve(t, d.url, webhookEnv...)
	id := p.createFeature(map[string]any{"gates": map[string]any{"allowPrd": false, "allowPlan": false, "allowMerge": true}}, "hang")
	var tk taskJSON
	waitFor(t, func() bool { p.do("GET", "/api/v1/tasks/"+id, nil, &tk); return tk.PendingInterrupt != nil })
	if code := p.do("POST", "/api/v1/tasks/"+id+"/decisions", map[string]any{"interrupt_id": tk.PendingInterrupt.ID,
		"action": "approve"}, nil); code != http.StatusAccepted {
		t.Fatalf("approve while the receiver hangs: %d", code)
	}
	waitFor(t, func() bool {
		p.do("GET", "/api/v1/tasks/"+id, nil, &tk)
		return tk.PendingInterrupt != nil && tk.PendingInterrupt.Kind == "plan"
	})
	if n := len(r.hooks()); n != 0 {
		t.Fatalf("%d deliveries finished while the receiver holds them", n)
	}
	close(r.hold)
	r.waitHooks(3, 30*time.Second) // raised prd, decided, raised plan
	r.assertVerified()
}

// TestWebhooksCommand: add refuses bad and private URLs (exit 2, nothing
// stored), prints the secret once; list and remove.
func TestWebhooksCommand(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	run := func(env []string, args ...string) (int, string, string) {
		cmd := exec.Command(binary, append([]string{"webhooks"}, args...)...)
		cmd.Env = append(os.Environ(), append([]string{"DATABASE_URL=" + d.url}, env...)...)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return code, out.String(), errOut.String()
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "ftp://example.com/x"}, "want an http:// or https:// URL"},
		{[]string{"add", "not a url"}, "not a URL"},
		{[]string{"add", "http://127.0.0.1:9/x"}, "loopback address"},
		{[]string{"add", "http://10.1.2.3/x"}, "private address"},
		{[]string{"add", "http://169.254.169.254/latest/meta-data"}, "link-local address"},
		{[]string{"add", "http://[::1]/x"}, "loopback address"},
		{[]string{"add", "https://example.com/x", "--events", "task.exploded"}, "unknown event"},
		{[]string{"remove", "00000000-0000-0000-0000-000000000000"}, "no webhook has id"},
		{[]string{"frob"}, "want add, list or remove"},
	} {
		code, _, errOut := run(nil, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, %q; want 2 and one line with %q", c.args, code, errOut, c.want)
		}
	}
	if n := d.int("SELECT count(*) FROM webhook_endpoints"); n != 0 {
		t.Fatalf("refused adds stored %d endpoints", n)
	}
	code, out, _ := run([]string{"GATEHOUSE_WEBHOOK_ALLOW_PRIVATE=true"}, "add", "http://127.0.0.1:9/x", "--events", "task.failed")
	if code != 0 || !strings.HasPrefix(out, "whsec_") {
		t.Fatalf("add with ALLOW_PRIVATE: %d %q", code, out)
	}
	_, out, _ = run(nil, "list")
	m := regexp.MustCompile(`(?m)^([0-9a-f-]{36})\s+http://127.0.0.1:9/x\s+task.failed\s+active$`).FindStringSubmatch(out)
	if m == nil || strings.Contains(out, "whsec_") {
		t.Fatalf("list:\n%s", out)
	}
	if code, out, _ := run(nil, "remove", m[1]); code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("remove: %d %q", code, out)
	}
	if n := d.int("SELECT count(*) FROM webhook_endpoints"); n != 0 {
		t.Errorf("%d endpoints after remove", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("condition not met within 30s")
}
