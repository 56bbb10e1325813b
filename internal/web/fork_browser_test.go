package web

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
)

// TestDeskRerunFromHere: on the timeline of a task waiting at its PRD, an
// operator follows "Re-run from here" at the checkpoint before the PRD,
// sees the state of that step in the form, is refused an empty request
// (the error at its field, the rest kept), changes the request, and lands
// on the new task, which waits at the PRD written from the changed
// request and links back; the source links to it.
func TestDeskRerunFromHere(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner())
	ctx := context.Background()
	src := env.createFeature("Export reports as CSV")
	env.waitPending(src, "prd")
	hist, err := env.store.History(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	step := -1
	for _, h := range hist {
		if h.Reason == "node" && h.NextNode == "requirements" && h.LastNode != "requirements" {
			step = h.Step
		}
	}
	if step < 0 {
		t.Fatalf("no checkpoint before the PRD: %+v", hist)
	}
	b := env.openTab(t, "ada")
	b.do(chromedp.Navigate(env.base + "/tasks/" + src))
	link := `#timeline a.ev-fork[data-fork-step="` + strconv.Itoa(step) + `"]`
	b.waitJS(`document.querySelector(`+jsq(link)+`)`, 10*time.Second)
	if n := eval[int](b, `document.querySelectorAll("#timeline a.ev-fork").length`); n < len(hist) {
		t.Errorf("%d Re-run links for %d checkpoints", n, len(hist))
	}
	b.click(link)

	field := `#fork-form textarea[name="state.description"]`
	b.waitJS(`location.pathname === "/tasks/`+src+`/fork" && document.querySelector(`+jsq(field)+`)`, 10*time.Second)
	if got := eval[string](b, `document.querySelector(`+jsq(field)+`).value`); got != featuretest.DefaultDescription {
		t.Fatalf("the form shows description %q, want the state's %q", got, featuretest.DefaultDescription)
	}
	if got := eval[string](b, `document.querySelector("#fork-step option:checked").value`); got != strconv.Itoa(step) {
		t.Errorf("step picker on %s, want %d", got, step)
	}
	b.screenshot("fork-form")

	// An empty request breaks the state's schema: refused at its field,
	// with the title typed kept.
	eval[bool](b, `(document.querySelector(`+jsq(field)+`).value = "", true)`)
	b.do(chromedp.SetValue(chromedp.CSS(`#fork-title`), "Parquet instead"))
	b.click(`#fork-form button[type=submit]`)
	invalid := `.field.invalid[data-field="state.description"] .field-error`
	b.waitJS(`document.querySelector(`+jsq(invalid)+`)`, 10*time.Second)
	if got := b.text(invalid); !strings.Contains(got, "required") {
		t.Errorf("error at the description: %q", got)
	}
	if got := eval[string](b, `document.querySelector("#fork-title").value`); got != "Parquet instead" {
		t.Errorf("the title typed was lost: %q", got)
	}
	b.screenshot("fork-form-refused")

	const patched = "Let users export their reports as Parquet files <b>now</b>"
	b.do(chromedp.SetValue(chromedp.CSS(field), patched))
	b.screenshot("fork-form-patched")
	b.click(`#fork-form button[type=submit]`)
	b.waitJS(`/^\/tasks\/[0-9a-f-]{36}$/.test(location.pathname) && location.pathname !== "/tasks/`+src+`" && document.querySelector("[data-fork-source]")`, 10*time.Second)
	fork := strings.TrimPrefix(eval[string](b, `location.pathname`), "/tasks/")
	b.waitJS(`document.querySelector("main").dataset.taskStatus === "waiting" && document.querySelector(`+jsq(pendingSel("prd"))+`)`, 30*time.Second)
	if got := eval[string](b, `document.querySelector("[data-fork-source]").dataset.forkSource`); got != src {
		t.Errorf("the fork links to %q, want %s", got, src)
	}
	// The runs before the fork point are the source's: drawn as done.
	for _, n := range []string{"analyze", "validate_spec_analyze"} {
		if got := eval[string](b, `document.querySelector('#graph [data-node="`+n+`"]').dataset.status`); got != "done" {
			t.Errorf("the fork's graph draws %s as %s, want done", n, got)
		}
	}
	if got := b.text("#task-head h1"); got != "Parquet instead" {
		t.Errorf("fork title %q", got)
	}
	b.screenshot("fork-waits-at-prd")

	evs, err := env.store.Events(ctx, fork, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	prompted := false
	for _, e := range evs {
		var d struct{ Role, Prompt string }
		_ = json.Unmarshal(e.Data, &d)
		if e.Type == graph.EventLLMCall && d.Role == "feature.requirements" && strings.Contains(d.Prompt, patched) {
			prompted = true
		}
	}
	if evs[0].Type != graph.EventTaskForked || !prompted {
		t.Errorf("fork events: first %s, requirements prompted with the change: %v", evs[0].Type, prompted)
	}

	b.do(chromedp.Navigate(env.base + "/tasks/" + src))
	b.waitJS(`document.querySelector(`+jsq(`[data-fork="`+fork+`"]`)+`)`, 10*time.Second)
	if got := b.text(`[data-fork="` + fork + `"]`); got != "Parquet instead" {
		t.Errorf("the source's link to its fork reads %q", got)
	}
	b.screenshot("source-links-fork")
}

// TestDeskDefinitionBanner: a task waiting at a node that this build's
// definition of its workflow dropped shows a banner with both versions
// and says it cannot resume; its step before the node can be re-run.
func TestDeskDefinitionBanner(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner(graphtest.Review(2)))
	ctx := context.Background()
	// The replica's runner would run the task under definition 2: the old
	// build runs it to its gate alone.
	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	env.runner.Stop(stop)
	v1, err := graph.NewEngine(env.store, []graph.Workflow{graphtest.Review(1)})
	if err != nil {
		t.Fatal(err)
	}
	task, err := v1.Create(ctx, graph.NewTask{Workflow: graphtest.ReviewName, Title: "Reviewed under the old build",
		Options: json.RawMessage(`{"gates":{}}`), CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := v1.Run(ctx, task.ID, 0); err != nil || out.Status != graph.StatusWaiting {
		t.Fatalf("run under the old build: %+v %v", out, err)
	}
	b := env.openTab(t, "ada")
	b.do(chromedp.Navigate(env.base + "/tasks/" + task.ID))
	b.waitJS(`document.querySelector("#definition-banner")`, 10*time.Second)
	got := b.text("#definition-banner")
	for _, want := range []string{graphtest.Review(1).Version(), graphtest.Review(2).Version(), `Its node "review" no longer exists`} {
		if !strings.Contains(got, want) {
			t.Errorf("banner lacks %q: %q", want, got)
		}
	}
	b.screenshot("definition-banner")
}
