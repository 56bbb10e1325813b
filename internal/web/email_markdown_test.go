package web

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/notify/notifytest"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
)

// markdownDoc is Markdown with a heading, a list, code, a link, and hostile
// content: raw script, an image whose error handler runs script, and a
// javascript: link.
const markdownDoc = "# Release notes\n\n" +
	"- first point\n- second point\n\n" +
	"Run `make deploy` then:\n\n```\nkubectl rollout status\n```\n\n" +
	"See [the runbook](https://example.com/runbook).\n\n" +
	"<script>alert(1)</script>\n\n" +
	`<img src=x onerror="alert(1)">` + "\n\n" +
	"[x](javascript:alert(1))\n"

// unsafeHTML matches what must never reach a page or an email's HTML part
// from user text: script elements, event handler attributes, javascript:
// addresses.
var unsafeHTML = regexp.MustCompile(`(?i)<script|\son[a-z]+\s*=|javascript:`)

// renderedMarkdown reports what of markdownDoc's rendering is missing
// from html, and the unsafe parts it has.
func renderedMarkdown(html string) (problems []string) {
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`<h1[^>]*>Release notes</h1>`),
		regexp.MustCompile(`<li>first point</li>`),
		regexp.MustCompile(`<code>make deploy</code>`),
		regexp.MustCompile(`<pre><code>kubectl rollout status`),
		regexp.MustCompile(`<a href="https://example.com/runbook"[^>]*rel="[^"]*noreferrer[^"]*"[^>]*>the runbook</a>`),
	} {
		if !want.MatchString(html) {
			problems = append(problems, "missing "+want.String())
		}
	}
	if m := unsafeHTML.FindAllString(html, -1); len(m) > 0 {
		problems = append(problems, "unsafe: "+strings.Join(m, ", "))
	}
	return problems
}

// plainMarkdown reports what is wrong with a text part that should show
// markdownDoc as written: its Markdown there, no HTML made of it.
func plainMarkdown(text string) (problems []string) {
	for _, want := range []string{"# Release notes", "- first point", "`make deploy`", "[the runbook](https://example.com/runbook)"} {
		if !strings.Contains(text, want) {
			problems = append(problems, "missing "+want)
		}
	}
	for _, tag := range []string{"<h1", "<li", "<code", "<a ", "<p>", "<pre"} {
		if strings.Contains(text, tag) {
			problems = append(problems, "HTML "+tag)
		}
	}
	return problems
}

// TestEmailRendersMarkdown (issue 27, item 11): an email's HTML part
// shows Markdown — a Markdown document's summary, a request's description —
// rendered and sanitised (heading, list, code, a link with noreferrer; no
// script, handler or javascript: link), its text part the Markdown as
// written; the action page behind the email renders both the same way.
func TestEmailRendersMarkdown(t *testing.T) {
	t.Parallel()
	e := setup(t, mailOpts())
	ctx := context.Background()
	for _, name := range []string{"alice", "bob"} {
		e.user(name, auth.RoleApprover)
		if err := e.auth.SetEmail(ctx, "test", name, name+"@example.com"); err != nil {
			t.Fatal(err)
		}
	}
	smtp := e.withMail(t)
	e.stub.SetReplies(feature.RoleMerge, markdownDoc)

	waitMail := func(subject string) notifytest.Message {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			for _, m := range smtp.Messages() {
				if strings.Contains(m.Header.Get("Subject"), subject) && m.To[0] == "alice@example.com" {
					return m
				}
			}
		}
		t.Fatalf("no email to alice about %q", subject)
		return notifytest.Message{}
	}
	check := func(what string, m notifytest.Message, page string) {
		t.Helper()
		if p := renderedMarkdown(m.HTML); len(p) > 0 {
			t.Errorf("%s: the HTML part: %v\n%s", what, p, m.HTML)
		}
		if p := plainMarkdown(m.Text); len(p) > 0 {
			t.Errorf("%s: the text part: %v\n%s", what, p, m.Text)
		}
		if p := renderedMarkdown(page); len(p) > 0 {
			t.Errorf("%s: the action page: %v\n%s", what, p, page)
		}
	}

	// A Markdown document under decision: merge.md.
	id := e.createAs(t, "carol", "Markdown merge", `{"allowPrd":true,"allowPlan":true}`)
	e.waitPending(id, "merge")
	m := waitMail("Markdown merge")
	status, _, page := e.rawDo(t, http.MethodGet, actLinkOf(t, m), "", nil)
	if status != http.StatusOK || !strings.Contains(page, `class="doc doc-markdown artifact-doc"`) {
		t.Fatalf("action page of the merge: %d, want merge.md rendered\n%s", status, page)
	}
	check("merge.md", m, page)

	// A request's description.
	e.createRequest(t, map[string]any{"kind": "deploy_check", "title": "Markdown request", "description": markdownDoc})
	m = waitMail("Markdown request")
	status, _, page = e.rawDo(t, http.MethodGet, actLinkOf(t, m), "", nil)
	if status != http.StatusOK || !strings.Contains(page, `request-description`) {
		t.Fatalf("action page of the request: %d\n%s", status, page)
	}
	check("request description", m, page)
}
