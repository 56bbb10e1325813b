package main

// The first hour of a new user, as issue 14 walked it: the real binary
// with the offline demo model, signed in with the password its log
// prints, every finding clicked through in headless Chromium with
// screenshots (GATEHOUSE_SCREENSHOTS=dir keeps them).

import (
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	bt "github.com/gatehousehq/gatehouse/internal/browsertest"
)

var (
	passwordRe  = regexp.MustCompile(`msg="created the admin user[^"]*" username=admin password=(\S+)`)
	passwdCmdRe = regexp.MustCompile(`or run: (.+? users passwd admin); or set GATEHOUSE_ADMIN_PASSWORD`)
)

// adminPassword is the generated password and the password command the
// log of a first start shows.
func adminPassword(t *testing.T, logs string) (password, command string) {
	t.Helper()
	m := passwordRe.FindStringSubmatch(logs)
	c := passwdCmdRe.FindStringSubmatch(logs)
	if m == nil || c == nil {
		t.Fatalf("the log does not give the admin's password and how to change it:\n%s", logs)
	}
	return m[1], c[1]
}

// signIn signs in on the login page.
func signIn(b *bt.Tab, base, user, password string) {
	b.T.Helper()
	b.Navigate(base + "/login")
	b.SetValue(`input[name=username]`, user)
	b.SetValue(`input[name=password]`, password)
	b.Click(`form[action="/login"] button[type=submit]`)
	b.WaitJS(`location.pathname === "/" && document.querySelector(".whoami-name")`, 15*time.Second)
}

// startTask fills the start form of workflow with fields (CSS selector →
// value) and checks (CSS selectors of checkboxes to set), submits it and
// waits for the task page.
func startTask(b *bt.Tab, base, workflow string, fields map[string]string, checks ...string) string {
	b.T.Helper()
	b.Navigate(base + "/tasks/new?workflow=" + workflow)
	b.WaitJS(`document.querySelector("form#new-task input[name=workflow][value=`+workflow+`]")`, 10*time.Second)
	for css, v := range fields {
		b.SetValue(css, v)
	}
	for _, css := range checks {
		bt.Eval[bool](b, `(document.querySelector(`+bt.Q(css)+`).checked = true)`)
	}
	b.Click(`#new-task button[type=submit]`)
	b.WaitJS(`location.pathname.startsWith("/tasks/") && location.pathname !== "/tasks/new" && document.querySelector("main[data-task]")`, 15*time.Second)
	return bt.Eval[string](b, `document.querySelector("main[data-task]").dataset.task`)
}

func pending(kind string) string { return `#interrupt article.pending[data-kind=` + kind + `]` }

func TestFirstHourInTheBrowser(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	p := serve(t, d.url) // no GATEHOUSE_ADMIN_PASSWORD: a generated one, printed once
	base := "http://" + p.Addr
	password, passwdCmd := adminPassword(t, p.Logs())

	b := bt.Open(t, "admin")
	console := b.Console()
	signIn(b, base, "admin", password)
	if got := b.Text(".whoami"); strings.Count(got, "admin") != 1 {
		t.Errorf("top bar says %q, want the name once", got)
	}

	t.Run("RejectionChangesTheDocument", func(t *testing.T) {
		b.T = t
		id := startTask(b, base, "feature", map[string]string{
			`textarea[name="input.description"]`: "Let users export their monthly reports as CSV files.",
			`input[name=title]`:                  "Export reports as CSV"})
		b.WaitJS(`document.querySelector(`+bt.Q(pending("prd"))+`)`, 30*time.Second)
		if got := b.Text(".demo-banner"); !strings.Contains(got, "offline demo model (LLM_PROVIDER=scripted)") {
			t.Errorf("no demo-model banner on the task page: %q", got)
		}
		const feedback = "Add a requirement for exports of more than 10,000 rows."
		b.SetValue(pending("prd")+` textarea[name=feedback]`, feedback)
		b.Click(pending("prd") + ` button[name=action][value=reject]`)
		b.WaitJS(`document.querySelector(`+bt.Q(pending("prd")+` .changes .diff-table tr.add`)+`)`, 30*time.Second)
		if got := b.Text(pending("prd") + " .changes"); !strings.Contains(got, feedback) || strings.Contains(got, "No change") {
			t.Fatalf("the rejection's diff does not show the feedback: %q", got)
		}
		b.Screenshot("rejection-diff")
		// Open a diff in the artifact viewer, then let the task move on
		// under it (the htmx:oobErrorNoTarget of the issue).
		b.Click(`#artifacts-index li[data-artifact="spec.yaml"] [data-version]`)
		b.WaitJS(`document.querySelector("#artifact-view:not(.follows-latest)")`, 10*time.Second)
		if b.Exists(`#artifact-view a[href*='from=']`) {
			b.Click(`#artifact-view a[href*='from=']`)
			b.WaitJS(`document.querySelector("#artifact-view .diff-table")`, 10*time.Second)
		}
		b.Click(pending("prd") + ` button[name=action][value=approve]`)
		b.WaitJS(`document.querySelector(`+bt.Q(pending("plan"))+`)`, 30*time.Second)
		b.Click(pending("plan") + ` button[name=action][value=approve]`)
		b.WaitJS(`document.querySelector(`+bt.Q(pending("merge"))+`)`, 30*time.Second)

		// The creator at the merge: who may approve, and where to add one.
		if b.Exists(pending("merge") + ` button[name=action][value=approve]`) {
			t.Fatal("the creator is offered Approve at a merge separation of duties reserves for another")
		}
		notice := b.Text(pending("merge") + " .notice")
		for _, want := range []string{"You started this task", "Nobody else may approve it yet", "GATEHOUSE_SOD_KINDS=none make run"} {
			if !strings.Contains(notice, want) {
				t.Errorf("merge notice lacks %q: %q", want, notice)
			}
		}
		if !b.Exists(pending("merge") + ` .notice a[href="/admin/users"]`) {
			t.Error("no link to Users for the admin")
		}
		b.Screenshot("merge-who-may-approve")

		b.Navigate(base + "/inbox")
		if got := b.Text(`.inbox-item[data-kind=merge]`); !strings.Contains(got, "needs another approver than admin") {
			t.Errorf("inbox item lacks 'needs another approver': %q", got)
		}
		b.Screenshot("inbox-needs-another-approver")

		// Add bob from the Users page; bob approves; the task ends with
		// its deliverable first.
		b.Navigate(base + "/admin/users")
		b.SetValue(`#new-name`, "bob")
		bt.Eval[bool](b, `(document.querySelector("#new-role").value = "approver", true)`)
		b.SetValue(`#new-password`, "bob-password-1")
		b.Click(`form[action="/admin/users"] button[type=submit]`)
		b.WaitJS(`document.querySelector("#admin-message") && location.search === ""`, 10*time.Second)
		if got := b.Text("#admin-message"); got != "User bob added." {
			t.Errorf("message %q", got)
		}
		bob := bt.Open(t, "bob")
		signIn(bob, base, "bob", "bob-password-1")
		bob.Navigate(base + "/tasks/" + id)
		bob.WaitJS(`document.querySelector(`+bt.Q(pending("merge")+` button[name=action][value=approve]`)+`)`, 10*time.Second)
		bob.Click(pending("merge") + ` button[name=action][value=approve]`)
		b.Navigate(base + "/tasks/" + id)
		b.WaitJS(`document.querySelector("main").dataset.taskStatus === "succeeded"`, 30*time.Second)
		b.Navigate(base + "/tasks/" + id)
		if !b.Exists(`.deliverable[data-deliverable="merge.md"] .doc h1`) {
			t.Fatal("a finished feature does not show merge.md rendered first")
		}
		if b.Exists(`details.result[open]`) {
			t.Error("the result JSON is open; it should be collapsed below")
		}
		b.Screenshot("feature-deliverable")
	})

	t.Run("StartFormShowsOptions", func(t *testing.T) {
		b.T = t
		for wf, fields := range map[string][]string{
			"slogan": {"option.max_turns", "option.human_reviewer"},
			"sdd":    {"option.max_revisions"},
			"pm":     {"input.preferences.language", "input.preferences.summary_style", "input.preferences.require_evidence"},
		} {
			b.Navigate(base + "/tasks/new?workflow=" + wf)
			for _, f := range fields {
				if !b.Exists(`#new-task [name="` + f + `"]`) {
					t.Errorf("%s start form lacks %s", wf, f)
				}
			}
			if wf == "pm" && b.Exists(`#new-task [name="input.preferences"]`) {
				t.Error("pm preferences are still raw JSON")
			}
			b.Screenshot(wf + "-start-form")
		}
		// A schema pattern is enforced with a message; nothing starts.
		b.Navigate(base + "/tasks/new?workflow=feature")
		b.SetValue(`textarea[name="input.description"]`, "Dark mode.")
		b.SetValue(`input[name="input.name"]`, "Dark Mode")
		if msg := bt.Eval[string](b, `document.querySelector('input[name="input.name"]').validationMessage`); !strings.Contains(msg, "kebab-case") {
			t.Errorf("the name field's message: %q", msg)
		}
		// Over a limit: said, not cut.
		long := strings.Repeat("x", 101)
		b.SetValue(`input[name="input.name"]`, long)
		if got := bt.Eval[string](b, `document.querySelector('input[name="input.name"]').value`); got != long {
			t.Errorf("the browser cut the input to %d characters", len(got))
		}
		if got := b.Text(`[data-count-for="f-in-name"]`); !strings.Contains(got, "This is 1 character over the limit of 100") {
			t.Errorf("over-limit message: %q", got)
		}
		b.Screenshot("over-limit")
	})

	t.Run("SloganWithAHumanReviewer", func(t *testing.T) {
		b.T = t
		id := startTask(b, base, "slogan", map[string]string{`textarea[name="input.user_input"], input[name="input.user_input"]`: "Organic tea for night owls"},
			`input[name="option.human_reviewer"]`)
		b.WaitJS(`document.querySelector(`+bt.Q(pending("review"))+`)`, 30*time.Second)
		first := b.Text(pending("review") + " .doc")
		b.SetValue(pending("review")+` textarea[name=feedback]`, "Make it about calm evenings")
		b.Click(pending("review") + ` button[name=action][value=reject]`)
		b.WaitJS(`document.querySelector(`+bt.Q(pending("review"))+`) && document.querySelector(`+bt.Q(pending("review"))+`).querySelector(".changes")`, 30*time.Second)
		second := b.Text(pending("review") + " .changes")
		if !strings.Contains(second, "Evenings") || strings.Contains(second, "No change") {
			t.Errorf("the second slogan does not answer the feedback: first %q, changes %q", first, second)
		}
		b.Click(pending("review") + ` button[name=action][value=approve]`)
		b.WaitJS(`document.querySelector("main").dataset.taskStatus === "succeeded"`, 30*time.Second)
		b.Navigate(base + "/tasks/" + id)
		if !b.Exists(`.deliverable[data-deliverable="slogan.txt"]`) || !b.Exists(`#artifact-view[data-artifact="slogan.txt"]`) {
			t.Error("the slogan page does not open on the slogan")
		}
		b.Screenshot("slogan-finished")
	})

	t.Run("QuestionHasOneForm", func(t *testing.T) {
		b.T = t
		startTask(b, base, "analyze", map[string]string{`textarea[name="input.query"]`: "Why do checkout requests time out on Mondays?"})
		sel := pending("question")
		b.WaitJS(`document.querySelector(`+bt.Q(sel)+`)`, 30*time.Second)
		if n := b.Count(sel + " form"); n != 1 {
			t.Errorf("a question shows %d forms, want 1", n)
		}
		if b.Exists(sel+` textarea[name=feedback]`) || b.Exists(sel+` button[value=approve]`) {
			t.Error("a question without a proposal offers feedback or approve")
		}
		b.Screenshot("question-one-form")
		for i, answer := range []string{"Every Monday at 09:00, all shops.", "Keep the API unchanged."} {
			b.SetValue(sel+` textarea[name=value]`, answer)
			b.Click(sel + ` button[name=action][value=respond]`)
			b.WaitJS(`document.querySelector("#pending-title") && document.querySelector("#pending-title").textContent.indexOf("turn `+strconv.Itoa(i+2)+`") >= 0`, 30*time.Second)
		}
		// Waited for, not checked once: a whole-suite run at load 10-13
		// found the proposal's turn in the title before its button (not
		// reproduced since); a button that never comes still fails here.
		b.WaitJS(`document.querySelector(`+bt.Q(sel+` button[name=action][value=approve]`)+`)`, 30*time.Second)
		if got := b.Text(sel + ` button[name=action][value=approve]`); got != "Accept the proposal" {
			t.Errorf("accept button says %q", got)
		}
		b.Screenshot("question-with-proposal")
		b.Click(sel + ` button[name=action][value=approve]`)
		b.WaitJS(`document.querySelector("main").dataset.taskStatus === "succeeded"`, 30*time.Second)
	})

	t.Run("WideGraphIsReadable", func(t *testing.T) {
		b.T = t
		startTask(b, base, "pm", map[string]string{
			`textarea[name="input.description"]`:         "Add a CSV export of monthly reports.",
			`textarea[name="input.acceptance_criteria"]`: "A user downloads a CSV.\nThe API returns 400 naming a bad field."})
		b.WaitJS(`document.querySelector("#graph svg")`, 10*time.Second)
		// Drawn at its own size (the column scrolls), not shrunk to fit.
		scale := bt.Eval[float64](b, `(function(){var s=document.querySelector("#graph svg");return s.getBoundingClientRect().width/s.width.baseVal.value})()`)
		if scale < 0.99 {
			t.Errorf("the pm graph is drawn at %.0f%% of its size", scale*100)
		}
		b.Screenshot("pm-graph")
	})

	t.Run("TokenReloadCreatesNothing", func(t *testing.T) {
		b.T = t
		b.Navigate(base + "/admin/tokens")
		b.SetValue(`#token-name`, "ci-bot")
		b.Click(`form[action="/admin/tokens"] button[type=submit]`)
		b.WaitJS(`document.querySelector("#token-secret")`, 10*time.Second)
		if !b.Exists(`#token-curl`) || !b.Exists(`[data-copy="token-secret"]`) {
			t.Error("no example curl or copy button")
		}
		b.Screenshot("token-created")
		b.Do(chromedp.Reload())
		b.WaitJS(`document.readyState === "complete" && document.querySelector("table.tokens")`, 10*time.Second)
		if b.Exists("#token-secret") {
			t.Error("a reload shows the secret again")
		}
		if n := b.Count(`tr[data-name="ci-bot"]`); n != 1 {
			t.Errorf("%d tokens named ci-bot after a reload, want 1", n)
		}
	})

	// A request's task runs no model: its page has no demo-model banner.
	t.Run("RequestPageHasNoDemoBanner", func(t *testing.T) {
		b.T = t
		var req requestJSON
		if code := p.do("POST", "/api/v1/requests", map[string]any{"kind": "tool_call", "title": "Run the migration?",
			"payload": map[string]any{"tool": "psql"}}, &req); code != http.StatusCreated {
			t.Fatalf("create: %d", code)
		}
		b.Navigate(base + "/tasks/" + req.TaskID)
		b.WaitJS(`document.querySelector(`+bt.Q(pending("tool_call"))+`)`, 15*time.Second)
		if b.Exists(".demo-banner") {
			t.Errorf("a request's page shows the demo-model banner: %q", b.Text(".demo-banner"))
		}
	})

	t.Run("PhoneWidthReachesStartATask", func(t *testing.T) {
		b.T = t
		b.Do(chromedp.EmulateViewport(390, 844))
		b.Navigate(base + "/")
		inView := bt.Eval[bool](b, `(function(){var a=document.querySelector('.topbar nav a[href="/tasks/new"]');if(!a)return false;`+
			`var r=a.getBoundingClientRect();return r.width>0&&r.left>=0&&r.right<=window.innerWidth+1&&getComputedStyle(a).display!=="none"})()`)
		b.Screenshot("phone-390")
		if !inView {
			t.Fatal(`"Start a task" is not visible at 390 px`)
		}
		b.Click(`.topbar nav a[href="/tasks/new"]`)
		b.WaitJS(`location.pathname === "/tasks/new"`, 10*time.Second)
		b.Do(chromedp.EmulateViewport(1360, 1000))
	})

	if msgs := console(); len(msgs) > 0 {
		for _, m := range msgs {
			if strings.Contains(m, "oobErrorNoTarget") || strings.Contains(m, "Content Security Policy") {
				t.Errorf("console: %s", m)
			}
		}
	}

	// The log's advice works: the command it names changes the password.
	cmd := exec.Command("bash", "-c", passwdCmd)
	cmd.Stdin = strings.NewReader("a-new-admin-password\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the log's command %q: %v\n%s", passwdCmd, err, out)
	}
	c := bt.Open(t, "again")
	signIn(c, base, "admin", "a-new-admin-password")
}
