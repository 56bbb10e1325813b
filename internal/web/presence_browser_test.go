package web

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// secondReplica serves the same database from another server with its own
// store and hub (another replica), returning its base URL. The desk's
// session cookie is the same for both (same host).
func (e *bundle) secondReplica(t testing.TB) string {
	t.Helper()
	store := postgres.NewStore(e.pool, postgres.Options{})
	hub := live.NewHub(e.pool.Config().ConnString(), store, e.log)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	<-hub.Ready()
	srv := New(Deps{Engine: e.engine, Store: store, Hub: hub, Auth: e.auth,
		Decider: auth.NewDecider(e.engine, store, e.policy, e.log), Logger: e.log, Version: "test"})
	addr, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		stop()
		<-done
	})
	return "http://" + addr.String()
}

// TestPresenceAcrossReplicas: alice has a task open on one replica, bob on
// another: each page lists the other (data-presence, data-user), the
// inbox counts two people on the item, and when bob leaves he is gone from
// alice's page well within 30 s.
func TestPresenceAcrossReplicas(t *testing.T) {
	t.Parallel()
	env := setup(t, withRunner())
	id := env.createFeature("Presence")
	env.waitPending(id, "prd")
	other := env.secondReplica(t)
	alice, bob := env.openTab(t, "alice"), env.openTab(t, "bob")
	alice.do(chromedp.Navigate(env.base + "/tasks/" + id))
	alice.liveOpen()
	bob.do(chromedp.Navigate(other + "/tasks/" + id))
	bob.liveOpen()
	start := time.Now()
	alice.waitJS(`document.querySelector('[data-presence] [data-user="bob"]') !== null`, 10*time.Second)
	t.Logf("alice saw bob after %v", time.Since(start))
	bob.waitJS(`document.querySelector('[data-presence] [data-user="alice"]') !== null`, 10*time.Second)
	if n := eval[int](alice, `document.querySelectorAll('[data-presence] [data-user]').length`); n != 1 {
		t.Errorf("alice's page lists %d people, want 1 (bob; not herself)", n)
	}
	alice.screenshot("presence-bob")

	// The inbox (on bob's replica, in a third tab of carol) counts them.
	carol := env.openTab(t, "carol")
	carol.do(chromedp.Navigate(other + "/inbox"))
	carol.waitJS(`(function(){var v=document.querySelector('[data-interrupt] [data-viewers]');return v&&v.dataset.viewers==="2"})()`, 10*time.Second)
	carol.screenshot("inbox-viewers")

	bob.do(chromedp.Navigate(other + "/inbox"))
	left := time.Now()
	alice.waitJS(`document.querySelector('[data-presence] [data-user="bob"]') === null`, 30*time.Second)
	t.Logf("bob was gone from alice's page %v after he left", time.Since(left))
}
