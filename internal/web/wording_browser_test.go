package web

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehousehq/gatehouse/internal/auth"
)

// TestWordingAndDates (issue 27, item 11): the account page says "Signed
// in as ada with the admin role" (not "ada, admin"); an operator refused a
// decision reads "is an operator"; the error card's status code is centred
// with its heading, not floating at the side; the Users, Tokens and audit
// pages show dates (today's too), not a bare time of day.
func TestWordingAndDates(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner())
	id := env.createFeature("Wording")
	env.waitPending(id, "prd")
	b := env.openTab(t, "ada")
	b.do(chromedp.EmulateViewport(1366, 900))

	b.do(chromedp.Navigate(env.base + "/account"))
	b.waitJS(`document.querySelector("#signed-in-as")`, 10*time.Second)
	if got := strings.Join(strings.Fields(b.text("#signed-in-as")), " "); got != "Signed in as ada with the admin role." {
		t.Errorf("account page: %q", got)
	}

	b.do(chromedp.Navigate(env.base + "/tasks/00000000-0000-0000-0000-000000000000"))
	b.waitJS(`document.querySelector(".error-card")`, 10*time.Second)
	b.screenshotViewport("error-card")
	off := eval[float64](b, `(function(){var c=document.querySelector(".error-card").getBoundingClientRect(),`+
		`r=document.createRange();r.selectNodeContents(document.querySelector(".error-card .eyebrow"));var e=r.getBoundingClientRect();`+
		`return Math.abs((e.left+e.right)/2-(c.left+c.right)/2)})()`)
	if off > 4 {
		t.Errorf("the error card's status code is %.0f px off its centre", off)
	}
	if got := b.text(".error-card .eyebrow"); got != "Error 404" {
		t.Errorf("the error card's code reads %q", got)
	}

	// A token, so that the Tokens page has a row.
	b.do(chromedp.Navigate(env.base + "/admin/tokens"))
	b.waitJS(`document.querySelector("form[action='/admin/tokens'] input[name=name]")`, 10*time.Second)
	b.do(chromedp.SetValue(chromedp.CSS(`form[action='/admin/tokens'] input[name=name]`), "ci"))
	b.click(`form[action='/admin/tokens'] button[type=submit]`)
	b.waitJS(`document.querySelector("table time")`, 10*time.Second)
	month := eval[string](b, `new Intl.DateTimeFormat(undefined, {month: "short"}).format(new Date())`)
	for _, path := range []string{"/admin/users", "/admin/tokens", "/audit"} {
		b.do(chromedp.Navigate(env.base + path))
		b.waitJS(`document.querySelector("table time[data-local]")`, 10*time.Second)
		for _, got := range strings.Split(b.texts("table time"), "\n") {
			if !strings.Contains(got, month) {
				t.Errorf("%s shows a time without its date: %q", path, got)
			}
		}
		b.screenshotViewport(strings.ReplaceAll(strings.Trim(path, "/"), "/", "-"))
	}

	env.user("otto", auth.RoleOperator)
	otto := env.openTab(t, "otto")
	otto.do(chromedp.Navigate(env.base + "/tasks/" + id))
	otto.waitJS(`document.querySelector("#interrupt .notice")`, 10*time.Second)
	if got := otto.text("#interrupt .notice"); strings.Contains(got, "a operator") {
		t.Errorf("the operator's notice says %q", got)
	}
}
