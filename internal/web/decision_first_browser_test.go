package web

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDecisionCardInView (issue 27, item 5): on a waiting feature task
// the decision card — what is asked, the document, the buttons — is in
// view without scrolling at 1366×900, and starts within one screen of the
// top on a 390×844 phone (the graph goes beside it, or after it); the
// inbox's link lands with the claim and deadline row visible below the
// sticky header.
func TestDecisionCardInView(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner())
	id := env.createFeature("Export reports as CSV")
	env.waitPending(id, "prd")
	b := env.openTab(t, "ada")
	card := pendingSel("prd")
	rect := func(css, side string) float64 {
		return eval[float64](b, `document.querySelector(`+jsq(css)+`).getBoundingClientRect().`+side)
	}
	for _, vp := range []struct {
		w, h  int
		whole bool // the whole card within the screen, not just its start
	}{{1366, 900, true}, {390, 844, false}} {
		name := fmt.Sprintf("%dx%d", vp.w, vp.h)
		b.do(chromedp.EmulateViewport(int64(vp.w), int64(vp.h)))
		b.do(chromedp.Navigate(env.base + "/tasks/" + id))
		b.waitJS(`document.querySelector(`+jsq(card+` button[name=action][value=approve]`)+`)`, 10*time.Second)
		b.screenshotViewport(name + "-task")
		if top := rect(card+" #pending-title", "bottom"); top > float64(vp.h) {
			t.Errorf("%s: what is asked is %.0f px down, below the screen", name, top)
		}
		if vp.whole {
			if top := rect(card+" .doc", "top"); top > float64(vp.h)-100 {
				t.Errorf("%s: the document starts %.0f px down", name, top)
			}
			if bottom := rect(card+` button[name=action][value=approve]`, "bottom"); bottom > float64(vp.h) {
				t.Errorf("%s: the Approve button is %.0f px down, below the screen", name, bottom)
			}
		}
		if w := eval[float64](b, `document.documentElement.scrollWidth`); w > float64(vp.w)+1 {
			t.Errorf("%s: the page is %.0f px wide", name, w)
		}

		// From the inbox: the claim and deadline row shows under the header.
		b.do(chromedp.Navigate(env.base + "/inbox"))
		b.waitJS(`document.querySelector(".inbox-item[data-kind=prd] a")`, 10*time.Second)
		b.click(`.inbox-item[data-kind=prd] a`)
		b.waitJS(`location.hash === "#decide" && document.querySelector(".pending-time")`, 10*time.Second)
		time.Sleep(300 * time.Millisecond) // the scroll to the anchor
		header := rect(".topbar", "bottom")
		row := rect(".pending-time", "top")
		b.screenshotViewport(name + "-from-inbox")
		if row < header || row > float64(vp.h)/2 {
			t.Errorf("%s: from the inbox the claim row is at %.0f px, the header ends at %.0f px", name, row, header)
		}
	}
}
