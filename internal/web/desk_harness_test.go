package web

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/browsertest"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
)

// TestMain closes the browser the desk tests share.
func TestMain(m *testing.M) {
	if os.Getenv(fanoutEnvURL) != "" {
		os.Exit(fanoutClientMain())
	}
	code := m.Run()
	browsertest.Close()
	os.Exit(code)
}

// holdExec is the stub executor with a brake: a held (role, iteration)
// waits until released, so a test can see a node running.
type holdExec struct {
	stub *featuretest.StubExecutor

	mu    sync.Mutex
	holds map[string]chan struct{}
}

func newHoldExec() *holdExec {
	return &holdExec{stub: featuretest.NewStub(""), holds: map[string]chan struct{}{}}
}

func holdKey(role string, iteration int) string { return fmt.Sprintf("%s#%d", role, iteration) }

// hold makes the next call of role at iteration wait; release lets it go.
func (h *holdExec) hold(role string, iteration int) (release func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	h.holds[holdKey(role, iteration)] = ch
	h.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (h *holdExec) Execute(ctx context.Context, req feature.Request) (feature.Reply, error) {
	h.mu.Lock()
	ch := h.holds[holdKey(req.Role, req.Iteration)]
	h.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return feature.Reply{}, ctx.Err()
		}
	}
	return h.stub.Execute(ctx, req)
}

// --- the browser ---

// tab is a browser tab of internal/browsertest (one browser for the whole
// test binary, a browser context per tab) with the desk tests' helpers.
type tab struct{ *browsertest.Tab }

// deskDiagnosis is what a failed waitJS reports of a desk page: its main
// and live data, the live state, the interrupt and the timeline's tail.
const deskDiagnosis = `(function(){var m=document.querySelector("main"),l=document.getElementById("live"),i=document.getElementById("interrupt"),t=document.querySelectorAll("#timeline li");` +
	`return JSON.stringify({main: m&&Object.assign({},m.dataset), live: l&&Object.assign({},l.dataset), state: (document.getElementById("live-state")||{}).textContent,` +
	`interrupt: i&&i.textContent.replace(/\\s+/g," ").slice(0,600), timeline: [].slice.call(t,-6).map(function(x){return x.dataset.seq+" "+x.textContent.replace(/\\s+/g," ").slice(0,80)})})})()`

func openTab(t *testing.T, name string) *tab {
	b := browsertest.Open(t, name)
	b.Diagnose = deskDiagnosis
	return &tab{b}
}

func (b *tab) do(steps ...chromedp.Action[chromedp.Void]) { b.T.Helper(); b.Do(steps...) }

func eval[T any](b *tab, expr string) T { b.T.Helper(); return browsertest.Eval[T](b.Tab, expr) }

// waitJS waits until a JavaScript expression is truthy, across page loads.
func (b *tab) waitJS(expr string, timeout time.Duration) { b.T.Helper(); b.WaitJS(expr, timeout) }

// text is the textContent of the first element matching a CSS selector,
// "" if none (browsertest's Text is the rendered innerText).
func (b *tab) text(css string) string {
	b.T.Helper()
	return eval[string](b, `(function(){var e=document.querySelector(`+jsq(css)+`);return e?e.textContent:""})()`)
}

// watchConsole collects the tab's console errors and exceptions (CSP
// refusals among them) from now on; the returned func lists them.
func (b *tab) watchConsole() func() []string { return b.Console() }

// texts is the text of every element matching a CSS selector.
func (b *tab) texts(css string) string {
	b.T.Helper()
	return eval[string](b, `[].map.call(document.querySelectorAll(`+jsq(css)+`),function(e){return e.textContent}).join("\n")`)
}

func (b *tab) screenshot(stage string) { b.T.Helper(); b.Screenshot(stage) }

// screenshotViewport saves what is in view now.
func (b *tab) screenshotViewport(stage string) { b.T.Helper(); b.ScreenshotViewport(stage) }

// liveOpen waits until the page's websocket is open.
func (b *tab) liveOpen() {
	b.T.Helper()
	b.waitJS(`document.getElementById("live-state") && document.getElementById("live-state").dataset.state === "open"`, 10*time.Second)
}

// click clicks the element as a person would, once htmx has wired it up.
func (b *tab) click(css string) { b.T.Helper(); b.Click(css) }

// jsq quotes a string for JavaScript.
func jsq(s string) string { return browsertest.Q(s) }

func decisionInput(interruptID, action, by string) graph.DecisionInput {
	return graph.DecisionInput{InterruptID: interruptID, Action: action, DecidedBy: by}
}
