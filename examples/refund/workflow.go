package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
)

// Refund is the state of one refund task: what graph.Init makes of the
// input, and what every node reads and returns. It is stored as JSON in
// each checkpoint, so its fields are exported and tagged.
type Refund struct {
	OrderID     string `json:"order_id"`
	AmountCents int    `json:"amount_cents"`
	Reason      string `json:"reason"`
	// Risk is assess's verdict: "low" pays at once, "high" asks a person.
	Risk string `json:"risk"`
	// Notes are the reviewers' rejections, oldest first; propose reads
	// them on its next iteration.
	Notes []string `json:"notes,omitempty"`
	// RefundID is set by pay.
	RefundID string `json:"refund_id,omitempty"`
	// ApprovedAt is set when the refund gate is approved.
	ApprovedAt *time.Time `json:"approved_at,omitempty"`
}

// RefundKind is the interrupt kind of the refund gate: an ordinary kind
// that the inbox lists, the policy file governs (policy.yaml), the
// analytics count and the notifications announce.
const RefundKind = "refund"

// highRisk is the amount from which a person decides.
const highRisk = 100_00

// refundWorkflow builds the refund workflow:
//
//	assess ─┬─ low ──────────────────────┐
//	        └─ high ─→ propose [refund] ─→ pay ─→ END
//
// propose is gated: its proposal waits for a person with the refund kind;
// a rejection runs propose again with the feedback in Notes.
func refundWorkflow() *graph.Builder[Refund] {
	return graph.New[Refund]("refund").
		Describe("Refund", "Refunds an order; refunds of 100.00 or more wait for a person's approval.").
		StateVersion(1).
		InputSchema(json.RawMessage(`{"type": "object", "required": ["order_id", "amount_cents"],
			"properties": {"order_id": {"type": "string"}, "amount_cents": {"type": "integer", "minimum": 1},
			"reason": {"type": "string"}}}`)).
		Init(func(input json.RawMessage, _ graph.Options) (Refund, error) {
			var r Refund
			if err := json.Unmarshal(input, &r); err != nil {
				return r, &graph.ValidationError{Field: "input", Message: err.Error()}
			}
			switch {
			case strings.TrimSpace(r.OrderID) == "":
				return r, &graph.ValidationError{Field: "input.order_id", Message: "is required"}
			case r.AmountCents <= 0:
				return r, &graph.ValidationError{Field: "input.amount_cents", Message: "must be a positive number of cents"}
			}
			return r, nil
		}).
		Node("assess", assess, graph.WithDescription("classifies the refund by amount")).
		Node("propose", propose, graph.WithDescription("writes the proposal a person approves")).
		Node("pay", pay, graph.WithDescription("pays the refund back"),
			graph.WithRetry(graph.RetryPolicy{Attempts: 3, Backoff: 100 * time.Millisecond}),
			graph.WithTimeout(10*time.Second)).
		Route("assess", func(r Refund) string {
			if r.Risk == "high" {
				return "propose"
			}
			return "pay"
		}, "propose", "pay").
		Gate("propose", graph.Gate[Refund]{
			Kind:       RefundKind,
			Option:     "allowRefund",
			AlwaysAsks: true,
			Title:      "Approve the refund",
			Artifact:   "proposal.md",
			OnApprove: func(r Refund) (Refund, error) {
				now := time.Now().UTC()
				r.ApprovedAt = &now
				return r, nil
			},
			OnReject: func(r Refund, feedback string, _ int) (Refund, error) {
				r.Notes = append(r.Notes, feedback)
				return r, nil
			},
		}).
		Edge("propose", "pay").
		Edge("pay", graph.END).
		Result(func(r Refund) any {
			return map[string]any{"refund_id": r.RefundID, "amount_cents": r.AmountCents, "risk": r.Risk,
				"notes": len(r.Notes)}
		})
}

func assess(_ context.Context, run *graph.NodeRun, r Refund) (Refund, error) {
	r.Risk = "low"
	if r.AmountCents >= highRisk {
		r.Risk = "high"
	}
	run.Event("refund.assessed", map[string]any{"risk": r.Risk})
	return r, nil
}

func propose(_ context.Context, run *graph.NodeRun, r Refund) (Refund, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "# Refund of order %s\n\nAmount: %d.%02d\n\nReason: %s\n", r.OrderID,
		r.AmountCents/100, r.AmountCents%100, r.Reason)
	for i, n := range r.Notes {
		fmt.Fprintf(&b, "\nReviewer note %d: %s\n", i+1, n)
	}
	run.Artifact("proposal.md", "text/markdown", b.String())
	return r, nil
}

func pay(_ context.Context, run *graph.NodeRun, r Refund) (Refund, error) {
	// A real program calls its payment service here (an error is retried
	// by the node's retry policy; a graph.Permanent one fails the task at
	// once), with an idempotency key of the task and the node: a node run
	// that runs again after a crash must not pay twice.
	r.RefundID = fmt.Sprintf("rf_%s_%s", r.OrderID, run.TaskID[:8])
	return r, nil
}
