package web

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestInboxOnAPhone: at 390 px an inbox item with a long title, a long
// unbroken word in its description and a deadline fits the screen (no
// sideways scrolling, nothing cut at the card's edge), and a request,
// whose task and interrupt share one title, names it once.
func TestInboxOnAPhone(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	b := e.openTab(t, "ada")
	b.do(chromedp.EmulateViewport(390, 844))
	long := "https://example.com/" + strings.Repeat("refunds-policy-", 8)
	e.createRequest(t, map[string]any{"kind": "refund", "title": "Refund order #1234 for a customer whose parcel arrived late and damaged",
		"description": "Customer asks for a refund, see " + long, "deadline": "2h"})

	b.Navigate(e.base + "/inbox")
	item := `.inbox-item[data-kind="refund"]`
	b.waitJS(`document.querySelector(`+jsq(item)+`)`, 20*time.Second)
	b.screenshotViewport("inbox-390")
	if w := eval[int](b, `document.documentElement.scrollWidth - window.innerWidth`); w > 0 {
		t.Errorf("the inbox scrolls sideways by %d px at 390 px", w)
	}
	// Every piece of the item ends inside its card.
	out := eval[string](b, `(function(){var a=document.querySelector(`+jsq(item+` a`)+`),r=a.getBoundingClientRect(),bad=[];`+
		`a.querySelectorAll("span,time").forEach(function(e){var q=e.getBoundingClientRect();if(q.width>0&&q.right>r.right+0.5)bad.push(e.className||e.tagName)});return bad.join(",")})()`)
	if out != "" {
		t.Errorf("inbox item parts past the card's right edge: %s", out)
	}
	if n := b.Count(item + ` .task-title-line`); n != 0 {
		t.Errorf("a request's title is shown twice (%d task-title lines)", n)
	}
}
