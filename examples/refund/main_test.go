package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/apitest"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
	"github.com/gatehousehq/gatehouse/internal/servetest"
)

const token = "refund-example-token-0123456789"

// TestRefundExample builds the example, runs it from the repository's
// root on a fresh database with its policy file, and drives it over HTTP
// as a person at the desk would: a small refund is paid at once; a large
// one waits at the refund gate with the policy's deadline, is rejected
// with a note, proposed again with it, approved and paid. SIGTERM then
// stops the program cleanly (exit 0).
func TestRefundExample(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := servetest.Build(t, ".")
	p := servetest.Start(t, bin, root, nil, "DATABASE_URL="+pgtest.NewDB(t), "GATEHOUSE_ADDR=127.0.0.1:0",
		"GATEHOUSE_BOOTSTRAP_TOKEN="+token, "GATEHOUSE_ADMIN_PASSWORD=refund-example-pw", "GATEHOUSE_POLICY_FILE=")
	c := apitest.Client{Base: p.URL(), Token: token}

	// The workflow is listed beside the built-in ones, with its gate kind.
	var list struct {
		Workflows []struct {
			Name  string `json:"name"`
			Gates []struct {
				Kind string `json:"kind"`
			} `json:"gates"`
		} `json:"workflows"`
	}
	if code, raw := c.Do(t, http.MethodGet, "/api/v1/workflows", nil, &list); code != http.StatusOK {
		t.Fatalf("workflows: %d %s", code, raw)
	}
	var names []string
	for _, w := range list.Workflows {
		names = append(names, w.Name)
		if w.Name == "refund" && (len(w.Gates) != 1 || w.Gates[0].Kind != RefundKind) {
			t.Errorf("refund's gates: %+v", w.Gates)
		}
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "refund") || !strings.Contains(got, "feature") {
		t.Errorf("workflows %s: want refund beside the built-in ones", got)
	}

	// A bad input is refused naming the field.
	if code, raw := c.Do(t, http.MethodPost, "/api/v1/tasks", map[string]any{"workflow": "refund",
		"input": map[string]any{"order_id": "A-1"}}, nil); code != http.StatusUnprocessableEntity ||
		!strings.Contains(string(raw), "amount_cents") {
		t.Errorf("refund without an amount: %d %s", code, raw)
	}

	small := c.Create(t, "refund", map[string]any{"order_id": "A-1000", "amount_cents": 1999}, nil)
	small = c.Await(t, small.ID, "succeeded", "")
	var res struct {
		RefundID string `json:"refund_id"`
		Risk     string `json:"risk"`
		Notes    int    `json:"notes"`
	}
	if small.Decode(t, &res); res.Risk != "low" || !strings.HasPrefix(res.RefundID, "rf_A-1000_") {
		t.Errorf("small refund: %s", small)
	}

	big := c.Create(t, "refund", map[string]any{"order_id": "B-2000", "amount_cents": 25000, "reason": "arrived broken"}, nil)
	w := c.Await(t, big.ID, "waiting", "")
	itr := w.PendingInterrupt
	if itr.Kind != RefundKind || itr.Node != "propose" || itr.Iteration != 1 || itr.Payload.Artifact == nil ||
		!strings.Contains(itr.Payload.Artifact.Content, "Amount: 250.00") {
		t.Fatalf("the refund gate: %+v", itr)
	}
	// The policy file governs the custom kind: its 48h deadline is set.
	if itr.Deadline == nil {
		t.Errorf("the refund interrupt has no deadline: policy.yaml did not apply")
	} else if d, err := time.Parse(time.RFC3339, *itr.Deadline); err != nil || time.Until(d) < 47*time.Hour || time.Until(d) > 49*time.Hour {
		t.Errorf("deadline %s: want 48h from now", *itr.Deadline)
	}
	c.Decide(t, w, "reject", "Refund the shipping too.")
	w2 := c.Await(t, big.ID, "waiting", itr.ID)
	if w2.PendingInterrupt.Iteration != 2 || !strings.Contains(w2.PendingInterrupt.Payload.Artifact.Content, "Reviewer note 1: Refund the shipping too.") {
		t.Fatalf("after the rejection: %+v", w2.PendingInterrupt)
	}
	c.Decide(t, w2, "approve", "")
	done := c.Await(t, big.ID, "succeeded", "")
	if done.Decode(t, &res); res.Risk != "high" || res.Notes != 1 || !strings.HasPrefix(res.RefundID, "rf_B-2000_") {
		t.Errorf("big refund: %s", done)
	}

	if err := p.Stop(30 * time.Second); err != nil {
		t.Errorf("after SIGTERM: %v, want exit 0", err)
	}
	if !strings.Contains(p.Logs(), `msg=stopped`) {
		t.Errorf("no graceful stop in the logs")
	}
}
