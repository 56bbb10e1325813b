// Package browsertest drives headless Chromium from Go tests with chromedp:
// one browser per test binary, a fresh browser context (cookies, storage)
// per tab, and the helpers a test of a page needs — wait for a condition
// across page loads, click as a person would, read text, collect console
// errors, and save screenshots to look at.
//
// Screenshots go to $GATEHOUSE_SCREENSHOTS when set (kept), else to the
// test's artifact directory (go test -artifacts keeps them).
//
// Test support: it imports nothing of the module.
package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumPath is where Debian's chromium lives.
const ChromiumPath = "/usr/bin/chromium"

var shared struct {
	once   sync.Once
	ctx    context.Context
	cancel []context.CancelFunc
	dir    string
	err    error
}

func start() {
	path := ChromiumPath
	if _, err := os.Stat(path); err != nil {
		p, lerr := exec.LookPath("chromium")
		if lerr != nil {
			shared.err = fmt.Errorf("chromium not found at %s (apt-get install -y chromium)", ChromiumPath)
			return
		}
		path = p
	}
	dir, err := os.MkdirTemp("", "gatehouse-chromium-")
	if err != nil {
		shared.err = err
		return
	}
	shared.dir = dir
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(dir), chromedp.WindowSize(1360, 1000))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	shared.cancel = []context.CancelFunc{cancelBrowser, cancelAlloc}
	if err := chromedp.Do(bctx); err != nil {
		shared.err = fmt.Errorf("start chromium: %w", err)
		return
	}
	shared.ctx = bctx
}

// Close stops the browser; call it from TestMain after m.Run.
func Close() {
	for _, c := range shared.cancel {
		c()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
}

// Tab is a browser tab in its own browser context.
type Tab struct {
	T    *testing.T
	Ctx  context.Context
	Name string
	// Diagnose, when set, is a JavaScript expression (a string) that a
	// failed WaitJS reports instead of the page's address and text.
	Diagnose string
	shot     int
}

// Open opens a tab (skipped under -short).
func Open(t *testing.T, name string) *Tab {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test (-short)")
	}
	shared.once.Do(start)
	if shared.err != nil {
		t.Fatalf("browser: %v", shared.err)
	}
	ctx, cancel := chromedp.NewContext(shared.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open tab: %v", err)
	}
	return &Tab{T: t, Ctx: ctx, Name: name}
}

// Do runs steps, failing the test on error.
func (b *Tab) Do(steps ...chromedp.Action[chromedp.Void]) {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.T.Fatalf("%s: %v", b.Name, err)
	}
}

// Eval evaluates a JavaScript expression.
func Eval[T any](b *Tab, expr string) T {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.T.Fatalf("%s: eval %s: %v", b.Name, expr, err)
	}
	return v
}

// WaitJS waits until a JavaScript expression is truthy, across page loads.
func (b *Tab) WaitJS(expr string, timeout time.Duration) {
	b.T.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		ctx, cancel := context.WithTimeout(b.Ctx, left+2*time.Second)
		_, err = chromedp.Run(ctx, chromedp.Poll[bool]("!!("+expr+")", chromedp.WithPollingTimeout(left),
			chromedp.WithPollingInterval(25*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond) // a navigation ended the poll
	}
	diagnose := b.Diagnose
	if diagnose == "" {
		diagnose = `location.href + "\n" + (document.querySelector("main")||document.body).innerText.slice(0, 1500)`
	}
	page, _ := chromedp.Run(b.Ctx, chromedp.Evaluate[string](diagnose))
	b.T.Fatalf("%s: waiting for %s: %v\npage: %s", b.Name, expr, err, page)
}

// Text is the text of the first element matching css, "" if none.
func (b *Tab) Text(css string) string {
	b.T.Helper()
	return Eval[string](b, `(function(){var e=document.querySelector(`+Q(css)+`);return e?e.innerText:""})()`)
}

// Exists reports whether an element matches css.
func (b *Tab) Exists(css string) bool {
	b.T.Helper()
	return Eval[bool](b, `!!document.querySelector(`+Q(css)+`)`)
}

// Count is the number of elements matching css.
func (b *Tab) Count(css string) int {
	b.T.Helper()
	return Eval[int](b, `document.querySelectorAll(`+Q(css)+`).length`)
}

// Navigate loads url and waits for its document.
func (b *Tab) Navigate(url string) {
	b.T.Helper()
	b.Do(chromedp.Navigate(url))
	b.WaitJS(`document.readyState === "complete"`, 15*time.Second)
}

// SetValue sets a form field's value (as typing would, with an input event).
func (b *Tab) SetValue(css, value string) {
	b.T.Helper()
	ok := Eval[bool](b, `(function(){var e=document.querySelector(`+Q(css)+`);if(!e)return false;e.value=`+Q(value)+
		`;e.dispatchEvent(new Event("input",{bubbles:true}));return true})()`)
	if !ok {
		b.T.Fatalf("%s: no field %s", b.Name, css)
	}
}

// Click clicks the element as a person would (its own click, so a sticky
// header never takes it), once htmx has wired it up.
func (b *Tab) Click(css string) {
	b.T.Helper()
	js := `(function(){var e=document.querySelector(` + Q(css) + `);if(!e)return "none";` +
		`var h=e.closest("[hx-get],[hx-post]")||(e.form&&e.form.closest("[hx-post]"));` +
		`if(h&&!(h["htmx-internal-data"]&&h["htmx-internal-data"].initHash))return "wait";` +
		`e.scrollIntoView({block:"center"});e.click();return "ok"})()`
	deadline := time.Now().Add(10 * time.Second)
	for {
		switch got := Eval[string](b, js); {
		case got == "ok":
			return
		case time.Now().After(deadline):
			b.T.Fatalf("%s: cannot click %s: %s", b.Name, css, got)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Console collects the tab's console errors and exceptions from now on;
// the returned func lists them.
func (b *Tab) Console() func() []string {
	ctx, cancel := context.WithCancel(b.Ctx)
	b.T.Cleanup(cancel)
	var mu sync.Mutex
	var msgs []string
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				mu.Lock()
				msgs = append(msgs, string(m.Type)+": "+m.Text)
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(msgs)
	}
}

// Screenshot saves the whole page as a PNG and returns its path.
func (b *Tab) Screenshot(stage string) string {
	b.T.Helper()
	Eval[bool](b, `(window.scrollTo(0, 0), true)`)
	return b.shoot(stage, chromedp.FullScreenshot(100))
}

// ScreenshotViewport saves what is in view now (the screen as a person
// sees it, scrolled where it is) as a PNG and returns its path.
func (b *Tab) ScreenshotViewport(stage string) string {
	b.T.Helper()
	return b.shoot(stage, chromedp.CaptureScreenshot())
}

func (b *Tab) shoot(stage string, shot chromedp.Action[[]byte]) string {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		b.T.Fatalf("screenshot %s: %v", stage, err)
	}
	dir := os.Getenv("GATEHOUSE_SCREENSHOTS")
	if dir == "" {
		dir = b.T.ArtifactDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		b.T.Fatal(err)
	}
	b.shot++
	name := filepath.Join(dir, fmt.Sprintf("%s-%02d-%s-%s.png", strings.ReplaceAll(b.T.Name(), "/", "_"), b.shot, b.Name, stage))
	if err := os.WriteFile(name, png, 0o644); err != nil {
		b.T.Fatalf("write screenshot: %v", err)
	}
	b.T.Logf("screenshot %s", name)
	return name
}

// Q quotes a string for JavaScript.
func Q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
