package postgres_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// mergeGate is one node gated by a "merge" interrupt: a second kind for
// the inbox filter.
func mergeGate() *graph.Graph[graphtest.LinearState] {
	g, err := graph.New[graphtest.LinearState]("mergegate").
		Node("m", func(_ context.Context, _ *graph.NodeRun, s graphtest.LinearState) (graphtest.LinearState, error) {
			return s, nil
		}).
		Gate("m", graph.Gate[graphtest.LinearState]{Kind: "merge", Option: "never",
			OnReject: func(s graphtest.LinearState, _ string, _ int) (graphtest.LinearState, error) { return s, nil }}).
		Edge("m", graph.END).
		Init(func(json.RawMessage, graph.Options) (graphtest.LinearState, error) {
			return graphtest.LinearState{Path: []string{}, Notes: map[string]string{}}, nil
		}).
		Compile()
	if err != nil {
		panic(err)
	}
	return g
}

// TestInboxPage: the inbox pages pending interrupts oldest first by
// keyset on (created_at, id) — interrupts raised at the same instant are
// neither repeated nor skipped across pages — filters by kind, carries
// each task's title and workflow, and leaves out what is no longer
// pending.
func TestInboxPage(t *testing.T) {
	t.Parallel()
	store := postgres.NewStore(pgtest.NewPool(t), postgres.Options{})
	ctx := context.Background()
	// The clock stands still while tasks are raised, then moves: three
	// interrupts share an instant, the others come later.
	now := time.Date(2026, 5, 1, 12, 0, 0, 123456000, time.UTC)
	e, err := graph.NewEngine(store, []graph.Workflow{graphtest.GateCycle(), mergeGate()},
		graph.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	type raised struct {
		itr   graph.Interrupt
		title string
		wf    string
	}
	var all []raised
	for i, wf := range []string{"gatecycle", "mergegate", "gatecycle", "mergegate", "gatecycle", "gatecycle", "mergegate"} {
		if i == 3 || i == 5 {
			now = now.Add(time.Second)
		}
		title := wf + " task " + string(rune('A'+i))
		task, err := e.Create(ctx, graph.NewTask{Workflow: wf, Title: title, Options: []byte(`{"gates":{}}`)})
		if err != nil {
			t.Fatal(err)
		}
		if out, err := e.Run(ctx, task.ID, task.Fence); err != nil || out.Status != graph.StatusWaiting {
			t.Fatalf("run %s: %+v %v", wf, out, err)
		}
		itr, err := store.PendingInterrupt(ctx, task.ID)
		if err != nil || itr == nil {
			t.Fatalf("pending of %s: %v %v", task.ID, itr, err)
		}
		all = append(all, raised{itr: *itr, title: title, wf: wf})
	}
	byKey := func(a, b raised) int {
		return cmp.Or(a.itr.CreatedAt.Compare(b.itr.CreatedAt), cmp.Compare(a.itr.ID, b.itr.ID))
	}
	slices.SortFunc(all, byKey)
	if !all[0].itr.CreatedAt.Equal(all[2].itr.CreatedAt) {
		t.Fatalf("the first three interrupts should share an instant: %v %v", all[0].itr.CreatedAt, all[2].itr.CreatedAt)
	}

	// walk pages through the inbox, limit at a time.
	walk := func(f postgres.InboxFilter) (ids []string, sizes []int) {
		t.Helper()
		for range 20 {
			page, next, err := store.InboxPage(ctx, f)
			if err != nil {
				t.Fatalf("%+v: %v", f, err)
			}
			sizes = append(sizes, len(page))
			for _, en := range page {
				ids = append(ids, en.ID)
			}
			if next == nil {
				return ids, sizes
			}
			f.After = next
		}
		t.Fatalf("%+v: the pages never end", f)
		return nil, nil
	}
	want := func(keep func(raised) bool) []string {
		var ids []string
		for _, r := range all {
			if keep(r) {
				ids = append(ids, r.itr.ID)
			}
		}
		return ids
	}
	every := func(raised) bool { return true }

	ids, sizes := walk(postgres.InboxFilter{Limit: 2})
	if w := want(every); !slices.Equal(ids, w) || !slices.Equal(sizes, []int{2, 2, 2, 1}) {
		t.Fatalf("pages of 2: %v (sizes %v), want %v", ids, sizes, w)
	}
	ids, sizes = walk(postgres.InboxFilter{Limit: 7})
	if w := want(every); !slices.Equal(ids, w) || !slices.Equal(sizes, []int{7}) {
		t.Fatalf("one full page: %v (sizes %v), want %v", ids, sizes, w)
	}
	ids, _ = walk(postgres.InboxFilter{Limit: 0}) // at least one a page
	if w := want(every); !slices.Equal(ids, w) {
		t.Fatalf("limit 0: %v, want %v", ids, w)
	}
	ids, sizes = walk(postgres.InboxFilter{Kind: "merge", Limit: 2})
	if w := want(func(r raised) bool { return r.itr.Kind == "merge" }); !slices.Equal(ids, w) || !slices.Equal(sizes, []int{2, 1}) {
		t.Fatalf("merge only: %v (sizes %v), want %v", ids, sizes, w)
	}
	if page, next, err := store.InboxPage(ctx, postgres.InboxFilter{Kind: "prd", Limit: 5}); err != nil || len(page) != 0 || next != nil {
		t.Fatalf("a kind with nothing pending: %d %v %v", len(page), next, err)
	}

	// The entries themselves: the interrupt as the store reads it, and its task.
	page, _, err := store.InboxPage(ctx, postgres.InboxFilter{Limit: 10})
	if err != nil || len(page) != len(all) {
		t.Fatalf("inbox: %d %v", len(page), err)
	}
	for i, en := range page {
		r := all[i]
		if en.ID != r.itr.ID || en.TaskID != r.itr.TaskID || en.Node != r.itr.Node || en.Kind != r.itr.Kind ||
			en.Iteration != r.itr.Iteration || en.Status != graph.InterruptPending || !en.CreatedAt.Equal(r.itr.CreatedAt) ||
			en.Payload.Title != r.itr.Payload.Title || en.Payload.Title == "" {
			t.Errorf("entry %d: %+v, want %+v", i, en.Interrupt, r.itr)
		}
		if en.Task != (postgres.TaskRef{ID: r.itr.TaskID, Title: r.title, Workflow: r.wf}) {
			t.Errorf("entry %d task: %+v, want %s %q %s", i, en.Task, r.itr.TaskID, r.title, r.wf)
		}
	}
	// Paging agrees with the unpaged list of pending interrupts.
	list, err := store.ListInterrupts(ctx, postgres.InterruptFilter{Status: graph.InterruptPending, Limit: 10})
	if err != nil || len(list) != len(page) {
		t.Fatalf("list: %d %v", len(list), err)
	}
	for i := range list {
		if list[i].ID != page[i].ID || list[i].Task != page[i].Task {
			t.Errorf("list and page differ at %d: %s %s", i, list[i].ID, page[i].ID)
		}
	}

	// A cursor in the middle of the instant three interrupts share.
	mid := &postgres.InboxCursor{CreatedAt: all[1].itr.CreatedAt, ID: all[1].itr.ID}
	rest, _, err := store.InboxPage(ctx, postgres.InboxFilter{Limit: 10, After: mid})
	if err != nil || len(rest) != len(all)-2 || rest[0].ID != all[2].itr.ID {
		t.Fatalf("after the second: %d entries (%v), first %v, want %s", len(rest), err, rest, all[2].itr.ID)
	}
	// Past the last: nothing, and no next page.
	last := all[len(all)-1].itr
	if page, next, err := store.InboxPage(ctx, postgres.InboxFilter{Limit: 3,
		After: &postgres.InboxCursor{CreatedAt: last.CreatedAt, ID: last.ID}}); err != nil || len(page) != 0 || next != nil {
		t.Fatalf("after the last: %d %v %v", len(page), next, err)
	}

	// A decided interrupt leaves the inbox.
	first := all[0].itr
	if _, err := e.Decide(ctx, first.TaskID, graph.DecisionInput{InterruptID: first.ID, Action: "approve", DecidedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	ids, _ = walk(postgres.InboxFilter{Limit: 3})
	if w := want(func(r raised) bool { return r.itr.ID != first.ID }); !slices.Equal(ids, w) {
		t.Fatalf("after a decision: %v, want %v", ids, w)
	}

	// A cursor naming no id is refused.
	var ve *graph.ValidationError
	if _, _, err := store.InboxPage(ctx, postgres.InboxFilter{Limit: 1, After: &postgres.InboxCursor{ID: "x"}}); !errors.As(err, &ve) ||
		ve.Field != "after" || !errors.Is(err, graph.ErrInvalid) {
		t.Errorf("malformed cursor: %v", err)
	}
}
