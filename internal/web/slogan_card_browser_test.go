package web

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm/scripted"
	"github.com/gatehousehq/gatehouse/internal/workflows/slogan"
)

// TestSloganReviewCardOneForm (issue 27, item 8): the slogan's human
// review is one form with one text box — the review, required to reject —
// and its buttons; a rejection asking for "under 6 words" brings a slogan
// that keeps to it (item 9, through the desk), and approving it ends the
// task on the slogan.
func TestSloganReviewCardOneForm(t *testing.T) {
	t.Parallel()
	sw, err := slogan.New(scripted.New(slogan.Builtin, nil), slogan.WithRetry(graph.RetryPolicy{Attempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	env := setup(t, withRunner(sw))
	task, err := env.engine.Create(context.Background(), graph.NewTask{Workflow: slogan.Name, Title: "Night tea",
		Input: json.RawMessage(`{"user_input": "Organic tea for night owls"}`), Options: json.RawMessage(`{"human_reviewer": true}`),
		CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	env.wake()
	env.waitPending(task.ID, slogan.InterruptReview)
	b := env.openTab(t, "ada")
	b.do(chromedp.EmulateViewport(1366, 900))
	b.do(chromedp.Navigate(env.base + "/tasks/" + task.ID))
	card := pendingSel(slogan.InterruptReview)
	b.waitJS(`document.querySelector(`+jsq(card)+`)`, 20*time.Second)
	b.screenshot("review-card")
	if n := b.Count(card + " form"); n != 1 {
		t.Errorf("the review card has %d forms, want 1", n)
	}
	if n := b.Count(card + " textarea, " + card + " input[type=text]"); n != 1 {
		t.Errorf("the review card has %d text boxes, want 1", n)
	}
	for _, action := range []string{"approve", "reject"} {
		if !b.Exists(card + ` form button[name=action][value=` + action + `]`) {
			t.Errorf("no %s button", action)
		}
	}
	b.decide(slogan.InterruptReview, "reject", "Make it under 6 words")
	b.waitJS(`document.querySelector(`+jsq(card+` .changes`)+`)`, 20*time.Second)
	itr := env.waitPending(task.ID, slogan.InterruptReview)
	b.screenshot("review-card-second")
	if itr.Payload.Artifact == nil {
		t.Fatalf("the second review shows no slogan: %+v", itr.Payload)
	}
	if s := itr.Payload.Artifact.Content; len(strings.Fields(s)) == 0 || len(strings.Fields(s)) >= 6 {
		t.Errorf("the slogan after 'under 6 words' is %q", s)
	}
	b.decide(slogan.InterruptReview, "approve", "")
	b.waitJS(`document.querySelector("main").dataset.taskStatus === "succeeded"`, 20*time.Second)
	// The page open at the end shows the deliverable first too, live
	// (issue 27, item 7).
	b.waitJS(`!!document.querySelector('.deliverable[data-deliverable="slogan.txt"]')`, 10*time.Second)
	b.screenshotViewport("finished-live")
	b.do(chromedp.Navigate(env.base + "/tasks/" + task.ID))
	b.waitJS(`document.querySelector("main[data-task]")`, 10*time.Second)
	if !b.Exists(`.deliverable[data-deliverable="slogan.txt"]`) {
		t.Error("the finished slogan task does not open on the slogan")
	}
	b.screenshot("finished")
}
