package postgres

import (
	"slices"
	"testing"
)

func TestCoalesceNotes(t *testing.T) {
	in := []note{
		{task: "a", first: 1, last: 2},
		{task: "a", at: 2},
		{task: "b", at: 5},
		{task: "a", first: 3, last: 3},
		{task: "a", at: 3},
		{task: "b"}, // unknown cause: wakes regardless
		{task: "b", at: 9},
		{task: "a", first: 5, last: 6}, // not adjacent: a range of its own
	}
	want := []note{
		{task: "a", first: 1, last: 3},
		{task: "a", at: 3},
		{task: "b"},
		{task: "a", first: 5, last: 6},
	}
	if got := coalesce(in); !slices.Equal(got, want) {
		t.Fatalf("coalesce:\n got %+v\nwant %+v", got, want)
	}
	var payloads []string
	for _, n := range want {
		payloads = append(payloads, n.channel()+" "+n.payload())
	}
	if w := []string{ChannelEvents + " a:1:3", ChannelRunnable + " a@3", ChannelRunnable + " b", ChannelEvents + " a:5:6"}; !slices.Equal(payloads, w) {
		t.Fatalf("payloads %q, want %q", payloads, w)
	}
}
