package web

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

const slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"

// slackHook collects JSON posts (an incoming webhook, or response_url).
type slackHook struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []map[string]any
	seen chan struct{}
}

func newSlackHook(t *testing.T) *slackHook {
	h := &slackHook{seen: make(chan struct{}, 100)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		h.mu.Lock()
		h.got = append(h.got, m)
		h.mu.Unlock()
		h.seen <- struct{}{}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *slackHook) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case <-h.seen:
	case <-time.After(30 * time.Second):
		t.Fatal("nothing posted")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[len(h.got)-1]
}

// slackServer is a server of e's replica that verifies Slack's callbacks
// with slackSecret.
func slackServer(t *testing.T, e *bundle) *httptest.Server {
	t.Helper()
	srv := New(Deps{Engine: e.engine, Store: e.store, Hub: e.hub, Auth: e.auth, Decider: auth.NewDecider(e.engine, e.store, e.policy, e.log),
		Logger: e.log, SlackSigningSecret: slackSecret})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return ts
}

// postSlack posts a callback as Slack does; the status and the body of the
// answer.
func postSlack(t *testing.T, base, body, stamp, sig string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/integrations/slack/actions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", stamp)
	req.Header.Set("X-Slack-Signature", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func signSlack(ts, body string) string {
	m := hmac.New(sha256.New, []byte(slackSecret))
	fmt.Fprintf(m, "v0:%s:%s", ts, body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

// TestSlack: a raised interrupt reaches the incoming webhook as Block Kit
// with an Approve button naming it; callbacks with a bad signature or an
// old timestamp are 401, an unmapped user and a refused one get an
// ephemeral reason; a mapped approver's click decides and replaces the
// message; a replay decides nothing more.
func TestSlack(t *testing.T) {
	t.Parallel()
	o := withRunner()
	o.outbox = postgres.Outbox{Slack: true}
	e := setup(t, o)
	ctx := context.Background()
	e.user("alice", auth.RoleApprover)
	e.user("carol", auth.RoleApprover)
	for name, id := range map[string]string{"alice": "U0ALICE", "carol": "U0CAROL"} {
		if err := e.auth.SetSlack(ctx, "test", name, id); err != nil {
			t.Fatal(err)
		}
	}
	incoming := newSlackHook(t)
	sender := notify.NewSender(notify.Config{Store: e.store, Channels: map[string]notify.Channel{
		notify.ChannelSlack: notify.NewSlack(incoming.srv.URL, "https://gh.example.com")}, Scale: 0.001, Logger: e.log})
	e.hub.OnOutbox(sender.Wake)
	sender.Start()
	t.Cleanup(func() { sender.Stop(context.Background()) })
	ts := slackServer(t, e)

	id := e.createAs(t, "carol", "Ship <it> & more", `{"allowPrd":true,"allowPlan":true}`)
	itr := e.waitPending(id, "merge")
	msg := incoming.next(t)
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(msg["blocks"])
	blocks := buf.String()
	if !strings.Contains(blocks, `"action_id":"approve"`) || !strings.Contains(blocks, `"value":"`+itr.ID+`"`) ||
		!strings.Contains(blocks, `https://gh.example.com/tasks/`+id+`#decide`) ||
		!strings.Contains(blocks, "Reject with feedback") || !strings.Contains(blocks, "Ship &lt;it&gt; &amp; more") {
		t.Fatalf("Block Kit message: %s", blocks)
	}

	responses := newSlackHook(t)
	callback := func(user string) string {
		p, _ := json.Marshal(map[string]any{"type": "block_actions", "user": map[string]any{"id": user},
			"response_url": responses.srv.URL, "actions": []any{map[string]any{"action_id": "approve", "value": itr.ID}}})
		return url.Values{"payload": {string(p)}}.Encode()
	}
	post := func(body, stamp, sig string) int {
		code, _ := postSlack(t, ts.URL, body, stamp, sig)
		return code
	}
	now := strconv.FormatInt(time.Now().Unix(), 10)
	undecided := func(when string) {
		t.Helper()
		if cur, _ := e.store.Interrupt(ctx, itr.ID); cur.Status != graph.InterruptPending {
			t.Fatalf("%s: interrupt %s", when, cur.Status)
		}
	}
	body := callback("U0ALICE")
	if code := post(body, now, signSlack(now, body+"x")); code != http.StatusUnauthorized {
		t.Errorf("bad signature: %d", code)
	}
	old := strconv.FormatInt(time.Now().Add(-6*time.Minute).Unix(), 10)
	if code := post(body, old, signSlack(old, body)); code != http.StatusUnauthorized {
		t.Errorf("old timestamp: %d", code)
	}
	undecided("after bad callbacks")
	for user, want := range map[string]string{"U0NOBODY": "not linked to a Gatehouse user", "U0CAROL": "eparation of duties"} {
		b := callback(user)
		if code := post(b, now, signSlack(now, b)); code != http.StatusOK {
			t.Fatalf("%s: %d", user, code)
		}
		r := responses.next(t)
		if r["response_type"] != "ephemeral" || r["replace_original"] != false || !strings.Contains(r["text"].(string), want) {
			t.Errorf("%s: %v, want an ephemeral %q", user, r, want)
		}
		undecided("after " + user)
	}
	// Claimed by carol (SPEC §11): alice's button is refused with the
	// reason; once carol releases it, the same button approves.
	if _, err := e.store.ClaimInterrupt(ctx, postgres.ClaimRequest{InterruptID: itr.ID, Who: "carol", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if code := post(body, now, signSlack(now, body)); code != http.StatusOK {
		t.Fatalf("alice while claimed: %d", code)
	}
	if r := responses.next(t); r["response_type"] != "ephemeral" || !strings.Contains(r["text"].(string), "Not approved: carol has claimed this Merge") {
		t.Errorf("alice while claimed: %v", r)
	}
	undecided("after a callback refused by the claim")
	if _, err := e.store.ReleaseInterrupt(ctx, itr.ID, "carol", false); err != nil {
		t.Fatal(err)
	}
	if code := post(body, now, signSlack(now, body)); code != http.StatusOK {
		t.Fatalf("alice: %d", code)
	}
	r := responses.next(t)
	if r["replace_original"] != true || !strings.Contains(r["text"].(string), "*alice* approved Merge of Ship &lt;it&gt; &amp; more") {
		t.Errorf("alice's outcome: %v", r)
	}
	decs, _ := e.store.Decisions(ctx, id)
	if len(decs) != 1 || decs[0].DecidedBy != "alice" {
		t.Fatalf("decisions: %+v", decs)
	}
	// The same callback again (within its 5 minutes): nothing more.
	if code := post(body, now, signSlack(now, body)); code != http.StatusOK {
		t.Fatalf("replay: %d", code)
	}
	if r := responses.next(t); r["response_type"] != "ephemeral" || !strings.Contains(r["text"].(string), "Nothing more to decide: alice approved") {
		t.Errorf("replay: %v", r)
	}
	if decs, _ := e.store.Decisions(ctx, id); len(decs) != 1 {
		t.Fatalf("decisions after the replay: %+v", decs)
	}
}
