package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/web/api"
)

// tokens makes an API token per name with role, returning "Bearer …".
func (b *bundle) tokens(t *testing.T, role auth.Role, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range names {
		secret, _, err := b.srv.auth.CreateToken(context.Background(), "test", n, role)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = "Bearer " + secret
	}
	return out
}

// TestClaims: SPEC §11's claims over the API.
func TestClaims(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.waitingTask(t)
	itr := task.PendingInterrupt
	names := make([]string, 20)
	for i := range names {
		names[i] = fmt.Sprintf("rev%02d", i)
	}
	approvers := b.tokens(t, auth.RoleApprover, names...)
	viewer := b.tokens(t, auth.RoleViewer, "watcher")["watcher"]
	claimPath := "/api/v1/interrupts/" + itr.ID + "/claim"

	t.Run("ViewerMayNotClaim", func(t *testing.T) {
		if r := b.doAuth(t, http.MethodPost, claimPath, nil, viewer); r.status != http.StatusForbidden {
			t.Errorf("viewer claim: %d %s", r.status, r.body)
		}
	})

	// 20 concurrent claims: exactly one 200, the others 409 naming it.
	var mu sync.Mutex
	codes := map[int]int{}
	var holder string
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Go(func() {
			r := b.doAuth(t, http.MethodPost, claimPath, "{}", approvers[n])
			mu.Lock()
			defer mu.Unlock()
			codes[r.status]++
			if r.status == http.StatusOK {
				holder = n
			}
		})
	}
	wg.Wait()
	if codes[http.StatusOK] != 1 || codes[http.StatusConflict] != 19 {
		t.Fatalf("20 concurrent claims: %v", codes)
	}
	holderName := auth.TokenPrincipalName(holder)
	var got api.Interrupt
	b.do(t, http.MethodGet, "/api/v1/interrupts/"+itr.ID, nil).json(t, &got)
	if got.ClaimedBy == nil || *got.ClaimedBy != holderName || got.ClaimExpiresAt == nil {
		t.Fatalf("GET interrupt: %+v", got)
	}
	other := names[0]
	if other == holder {
		other = names[1]
	}
	r := b.doAuth(t, http.MethodPost, claimPath, nil, approvers[other])
	if r.status != http.StatusConflict || !strings.Contains(r.apiErr(t).Message, holderName) {
		t.Errorf("claim of a held interrupt: %d %s", r.status, r.body)
	}

	// A decision by anyone but the holder: 409 naming the holder, nothing
	// changes.
	before := b.fingerprint(t)
	r = b.doAuth(t, http.MethodPost, "/api/v1/tasks/"+task.ID+"/decisions",
		map[string]any{"interrupt_id": itr.ID, "action": "approve"}, approvers[other])
	if r.status != http.StatusConflict || !strings.Contains(r.apiErr(t).Message, "claimed by "+holderName) {
		t.Errorf("decision by a non-holder: %d %s", r.status, r.body)
	}
	if after := b.fingerprint(t); after != before {
		t.Error("a refused decision changed something")
	}
	// Release by someone else: 403; by the holder: 200, and the other may
	// claim.
	if r := b.doAuth(t, http.MethodDelete, claimPath, nil, approvers[other]); r.status != http.StatusForbidden {
		t.Errorf("release by a non-holder: %d %s", r.status, r.body)
	}
	if r := b.doAuth(t, http.MethodDelete, claimPath, nil, approvers[holder]); r.status != http.StatusOK {
		t.Fatalf("release by the holder: %d %s", r.status, r.body)
	}
	if r := b.doAuth(t, http.MethodPost, claimPath, nil, approvers[other]); r.status != http.StatusOK {
		t.Fatalf("claim after release: %d %s", r.status, r.body)
	}
	// An admin takes it over with a reason (audited); without one: 400.
	if r := b.do(t, http.MethodPost, claimPath, map[string]any{"take_over": true}); r.status != http.StatusBadRequest {
		t.Errorf("take-over without reason: %d %s", r.status, r.body)
	}
	if r := b.doAuth(t, http.MethodPost, claimPath, map[string]any{"take_over": true, "reason": "x"}, approvers[holder]); r.status != http.StatusForbidden {
		t.Errorf("take-over by an approver: %d %s", r.status, r.body)
	}
	if r := b.do(t, http.MethodPost, claimPath, map[string]any{"take_over": true, "reason": "on leave"}); r.status != http.StatusOK {
		t.Fatalf("take-over: %d %s", r.status, r.body)
	}
	var audit struct {
		Events []struct {
			Actor string         `json:"actor"`
			Kind  string         `json:"kind"`
			Data  map[string]any `json:"data"`
		} `json:"events"`
	}
	b.do(t, http.MethodGet, "/api/v1/audit?kind=interrupt.taken_over", nil).json(t, &audit)
	if len(audit.Events) != 1 || audit.Events[0].Actor != auth.BootstrapName || audit.Events[0].Data["reason"] != "on leave" ||
		audit.Events[0].Data["previous"] != auth.TokenPrincipalName(other) {
		t.Errorf("audit of the take-over: %+v", audit.Events)
	}
	var evs struct {
		Events []api.Event `json:"events"`
	}
	b.do(t, http.MethodGet, "/api/v1/tasks/"+task.ID+"/events", nil).json(t, &evs)
	var types []string
	for _, e := range evs.Events {
		if strings.HasPrefix(e.Type, "interrupt.") && e.Type != "interrupt.raised" {
			types = append(types, e.Type)
		}
	}
	if got := strings.Join(types, " "); got != "interrupt.claimed interrupt.released interrupt.claimed interrupt.taken_over" {
		t.Errorf("claim events: %s", got)
	}

	// The claim ends after its TTL: then anyone may claim.
	if _, err := b.pool.Exec(context.Background(), "UPDATE interrupts SET claim_expires_at = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	b.do(t, http.MethodGet, "/api/v1/interrupts/"+itr.ID, nil).json(t, &got)
	if got.ClaimedBy != nil {
		t.Errorf("an expired claim is shown: %+v", got)
	}
	if r := b.doAuth(t, http.MethodPost, claimPath, nil, approvers[holder]); r.status != http.StatusOK {
		t.Fatalf("claim after the TTL: %d %s", r.status, r.body)
	}
	// The holder decides; a claim on the decided interrupt is 409.
	if r := b.doAuth(t, http.MethodPost, "/api/v1/tasks/"+task.ID+"/decisions",
		map[string]any{"interrupt_id": itr.ID, "action": "approve"}, approvers[holder]); r.status != http.StatusAccepted {
		t.Fatalf("decision by the holder: %d %s", r.status, r.body)
	}
	if r := b.doAuth(t, http.MethodPost, claimPath, nil, approvers[other]); r.status != http.StatusConflict {
		t.Errorf("claim on a decided interrupt: %d %s", r.status, r.body)
	}
}

// TestClaimTTL: the server's claim TTL sets claim_expires_at.
func TestClaimTTL(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: testToken, claimTTL: 90 * time.Second})
	task := b.waitingTask(t)
	var got api.Interrupt
	r := b.do(t, http.MethodPost, "/api/v1/interrupts/"+task.PendingInterrupt.ID+"/claim", nil)
	r.json(t, &got)
	if got.ClaimExpiresAt == nil {
		t.Fatalf("claim: %d %s", r.status, r.body)
	}
	exp, _ := time.Parse(time.RFC3339Nano, *got.ClaimExpiresAt)
	if d := time.Until(exp); d < 80*time.Second || d > 95*time.Second {
		t.Errorf("claim expires in %s, want about 90s", d)
	}
}

// TestPayloadSHA256: what was seen is checked and stored.
func TestPayloadSHA256(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.waitingTask(t)
	itr := task.PendingInterrupt
	if len(itr.PayloadSHA256) != 64 {
		t.Fatalf("payload_sha256 %q", itr.PayloadSHA256)
	}
	path := "/api/v1/tasks/" + task.ID + "/decisions"
	before := b.fingerprint(t)
	r := b.do(t, http.MethodPost, path, map[string]any{"interrupt_id": itr.ID, "action": "approve", "payload_sha256": "abc"})
	if r.status != http.StatusBadRequest || r.apiErr(t).Field != "payload_sha256" {
		t.Errorf("malformed: %d %s", r.status, r.body)
	}
	r = b.do(t, http.MethodPost, path, map[string]any{"interrupt_id": itr.ID, "action": "approve",
		"payload_sha256": strings.Repeat("0", 64)})
	if r.status != http.StatusConflict {
		t.Errorf("different: %d %s", r.status, r.body)
	}
	if b.fingerprint(t) != before {
		t.Error("a refused decision changed something")
	}
	r = b.do(t, http.MethodPost, path, map[string]any{"interrupt_id": itr.ID, "action": "approve", "payload_sha256": itr.PayloadSHA256})
	if r.status != http.StatusAccepted {
		t.Fatalf("same: %d %s", r.status, r.body)
	}
	var ds struct {
		Decisions []api.Decision `json:"decisions"`
	}
	b.do(t, http.MethodGet, "/api/v1/tasks/"+task.ID+"/decisions", nil).json(t, &ds)
	if len(ds.Decisions) != 1 || ds.Decisions[0].PayloadSHA256 != itr.PayloadSHA256 {
		t.Errorf("decisions: %+v", ds.Decisions)
	}
	var evs struct {
		Events []api.Event `json:"events"`
	}
	b.do(t, http.MethodGet, "/api/v1/tasks/"+task.ID+"/events", nil).json(t, &evs)
	found := false
	for _, e := range evs.Events {
		if e.Type == "decision.recorded" && strings.Contains(string(e.Data), itr.PayloadSHA256) {
			found = true
		}
	}
	if !found {
		t.Error("decision.recorded does not carry payload_sha256")
	}
}
