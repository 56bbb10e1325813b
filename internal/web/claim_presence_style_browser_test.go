package web

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/notify"
)

// styledPolicy is a policy whose page shows every column: deciders,
// groups, a deadline with reminders and an escalation, rules.
const styledPolicy = `groups:
  leads: [ada, grace]
kinds:
  prd:
    deciders: [role:approver, group:leads]
    deadline: 8h
    on_timeout: none
    reminders: [2h, 6h]
    escalate:
      - {after: 4h, to: [group:leads]}
  refund:
    approvals: 2
    deciders: [role:approver]
    deadline: 48h
    on_timeout: fail
    rules:
      - {name: small, when: "payload.amount <= 100", action: approve}
      - {name: blocked, when: "payload.country in ['XX']", action: reject, feedback: "blocked country"}
`

// styleOf is the computed style properties of the first element matching
// css, joined as "prop=value;…" in the order given ("" when none).
func styleOf(b *tab, css string, props ...string) string {
	b.T.Helper()
	list := `["` + strings.Join(props, `","`) + `"]`
	return eval[string](b, `(function(){var e=document.querySelector(`+jsq(css)+`);if(!e)return "";var s=getComputedStyle(e);`+
		`return `+list+`.map(function(p){return p+"="+s.getPropertyValue(p)}).join(";")})()`)
}

// buttonLook is what makes a desk button look like one; smallButton adds
// the size of the desk's small buttons (Sign out).
var (
	buttonLook  = []string{"font-weight", "border-radius", "border-top-style", "border-top-color", "cursor", "font-family", "background-color"}
	smallButton = append(buttonLook[:len(buttonLook):len(buttonLook)], "padding-left", "padding-top", "font-size")
)

// overflowX is how far the page scrolls sideways (0: it fits).
func overflowX(b *tab) int {
	return eval[int](b, `document.documentElement.scrollWidth - window.innerWidth`)
}

// TestClaimPresencePolicyStyle (issue 27, item 12): the claim bar (the
// deadline, who holds the claim, the Claim / Release / Take over buttons),
// the presence strip (who else has the task open) and /admin/policy wear
// the desk's styling — its buttons, badges and cards — at 1366×900 and
// on a 390×844 phone, with no sideways scroll and nothing refused by the
// content security policy.
func TestClaimPresencePolicyStyle(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/policy.yaml"
	if err := os.WriteFile(path, []byte(styledPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := auth.LoadPolicy(auth.PolicySources{File: path})
	if err != nil {
		t.Fatal(err)
	}
	o := withRunner()
	o.policy = &p
	e := setup(t, o)
	e.user("bob", auth.RoleApprover)
	e.user("grace", auth.RoleApprover)
	id := e.createFeature("Export reports as CSV for the finance team")
	e.waitPending(id, "prd")

	ada := e.openTab(t, "ada") // an admin
	ada.do(chromedp.EmulateViewport(1366, 900))
	adaConsole := ada.watchConsole()
	bob := e.openTab(t, "bob")
	bob.do(chromedp.EmulateViewport(390, 844))
	bobConsole := bob.watchConsole()
	grace := e.openTab(t, "grace")
	grace.do(chromedp.Navigate(e.base + "/tasks/" + id))
	grace.liveOpen()

	ada.Navigate(e.base + "/tasks/" + id)
	ada.liveOpen()
	bob.Navigate(e.base + "/tasks/" + id)
	bob.liveOpen()
	card := pendingSel("prd")
	ada.waitJS(`document.querySelectorAll('[data-presence] [data-user]').length === 2`, 20*time.Second)
	bob.waitJS(`document.querySelectorAll('[data-presence] [data-user]').length === 2`, 20*time.Second)

	// The claim bar before anyone claims: bob's Claim button is a desk
	// button, like the card's Approve.
	claimBtn := `.pending-time button[data-claim=claim]`
	bob.waitJS(`document.querySelector(`+jsq(claimBtn)+`)`, 20*time.Second)
	if got, want := styleOf(bob, claimBtn, buttonLook...), styleOf(bob, `.whoami .button`, buttonLook...); got != want || want == "" {
		t.Errorf("the Claim button does not look like the desk's buttons:\n%s\nwant\n%s", got, want)
	}
	if got := styleOf(bob, `.pending-time`, "border-top-left-radius", "background-color"); got != styleOf(bob, card, "border-top-left-radius", "background-color") {
		t.Errorf("the claim bar is not a panel like the decision card: %s", got)
	}
	checkPresence := func(b *tab, other string) {
		t.Helper()
		user := `[data-presence] [data-user=` + other + `]`
		if !b.Exists(user + `.presence-user .avatar`) {
			t.Errorf("%s: %s in the presence strip has no avatar: %s", b.Name, other, eval[string](b, `document.querySelector('[data-presence]').outerHTML`))
		}
		if got := styleOf(b, user, "border-radius", "display"); !strings.Contains(got, "border-radius=999px") {
			t.Errorf("%s: presence item %s is not a pill: %s", b.Name, other, got)
		}
		if got := b.text(`[data-presence] .presence-label`); !strings.Contains(got, "Also here") {
			t.Errorf("%s: presence label %q", b.Name, got)
		}
	}
	checkPresence(ada, "bob")
	checkPresence(bob, "grace")
	ada.screenshotViewport("task-1366")
	bob.screenshotViewport("task-390")
	if w := overflowX(bob); w > 0 {
		t.Errorf("the task page scrolls sideways by %d px at 390 px", w)
	}

	// bob claims: his bar names him and offers Release; ada (an admin)
	// sees who holds it and Take over with its reason.
	bob.click(claimBtn)
	bob.waitJS(`document.querySelector('.pending-time button[data-claim=release]')`, 20*time.Second)
	if got := styleOf(bob, `.pending-time .holder`, "border-radius"); !strings.Contains(got, "999px") {
		t.Errorf("the claim holder is not a badge: %q", got)
	}
	if !bob.Exists(`.pending-time .holder .avatar`) {
		t.Errorf("the claim holder has no avatar: %s", bob.text(`.pending-time`))
	}
	bob.screenshotViewport("claimed-390")
	ada.waitJS(`document.querySelector('.pending-time button[data-claim=take_over]')`, 20*time.Second)
	takeOver := `.pending-time button[data-claim=take_over]`
	if got, want := styleOf(ada, takeOver, smallButton...), styleOf(ada, `.whoami .button.small`, smallButton...); got != want || want == "" {
		t.Errorf("the Take over button does not look like the desk's small buttons:\n%s\nwant\n%s", got, want)
	}
	if got := styleOf(ada, `#takeover-reason`, "border-top-left-radius", "font-family"); got != "border-top-left-radius=8px;font-family="+styleOf(ada, `body`, "font-family")[len("font-family="):] {
		t.Errorf("the take-over reason is not a desk field: %s", got)
	}
	ada.screenshotViewport("take-over-1366")
	ada.do(chromedp.EmulateViewport(390, 844))
	ada.screenshotViewport("take-over-390")
	if w := overflowX(ada); w > 0 {
		t.Errorf("the task page with Take over scrolls sideways by %d px at 390 px", w)
	}

	// The inbox names the holder in the item's corner, without the bar's pill.
	ada.Navigate(e.base + "/inbox")
	ada.waitJS(`document.querySelector('.inbox-item[data-holder=bob] .holder')`, 20*time.Second)
	if got := styleOf(ada, `.inbox-item .holder`, "background-color"); got != "background-color=rgba(0, 0, 0, 0)" {
		t.Errorf("the inbox's holder wears the claim bar's pill: %s", got)
	}
	ada.screenshotViewport("inbox-claimed-390")

	// The policy page: its table in a card, kinds as the desk's kind
	// badges, rules as code, groups as chips.
	for _, size := range [][2]int64{{1366, 900}, {390, 844}} {
		ada.do(chromedp.EmulateViewport(size[0], size[1]))
		ada.Navigate(e.base + "/admin/policy")
		ada.waitJS(`document.querySelector('.policy-table tr[data-kind=refund]')`, 20*time.Second)
		if !ada.Exists(`.card .policy-table tr[data-kind=prd] .kind`) || ada.Count(`.policy-table [data-rule] code`) != 2 {
			t.Errorf("policy page at %d: kinds or rules missing: %s", size[0], ada.text(`main`))
		}
		if got := styleOf(ada, `[data-group=leads]`, "border-radius"); !strings.Contains(got, "999px") {
			t.Errorf("policy page at %d: the group is not a chip: %s", size[0], got)
		}
		if w := overflowX(ada); w > 0 {
			t.Errorf("policy page at %d scrolls sideways by %d px", size[0], w)
		}
		ada.screenshot("policy-" + strconv.Itoa(int(size[0])))
	}

	// The page behind an email's action link (item 11): the request's
	// description rendered as Markdown, its payload as text, in the
	// desk's cards, on a phone and a laptop.
	rid := e.createRequest(t, map[string]any{"kind": "deploy_check", "title": "Roll out the CSV export", "description": markdownDoc,
		"payload": map[string]any{"service": "reports", "replicas": 3, "note": strings.Repeat("a-very-long-unbroken-value-", 6)}})
	itr := e.waitPending(rid, "deploy_check")
	token, hash := notify.ActionToken()
	if err := e.store.CreateActionLink(t.Context(), hash, notify.ActionLink{InterruptID: itr.ID, TaskID: rid, Recipient: "ada",
		ExpiresAt: time.Now().Add(time.Hour)}, ""); err != nil {
		t.Fatal(err)
	}
	link := openTab(t, "link")
	linkConsole := link.watchConsole()
	for _, size := range [][2]int64{{390, 844}, {1366, 900}} {
		link.do(chromedp.EmulateViewport(size[0], size[1]))
		link.Navigate(e.base + "/act/" + token)
		link.waitJS(`document.querySelector('#act-form button[value=approve]')`, 20*time.Second)
		desc := `.request-description`
		if link.text(desc+` h1`) != "Release notes" || link.Count(desc+` li`) != 2 || link.Count(desc+` script, `+desc+` img, `+desc+` a[href^="javascript"]`) != 0 {
			t.Errorf("action page at %d: the description is not sanitised Markdown: %s", size[0], eval[string](link, `document.querySelector(`+jsq(desc)+`).innerHTML`))
		}
		if w := overflowX(link); w > 0 {
			t.Errorf("action page at %d scrolls sideways by %d px", size[0], w)
		}
		if got, want := styleOf(link, `#act-form`, "border-top-left-radius", "background-color"), styleOf(link, `.card`, "border-top-left-radius", "background-color"); got != want {
			t.Errorf("action page at %d: the form is not a desk card: %s, want %s", size[0], got, want)
		}
		link.screenshot("act-" + strconv.Itoa(int(size[0])))
	}

	for name, c := range map[string]func() []string{"ada": adaConsole, "bob": bobConsole, "link": linkConsole} {
		if errs := c(); len(errs) > 0 {
			t.Errorf("%s's console (CSP violations included): %v", name, errs)
		}
	}
}
