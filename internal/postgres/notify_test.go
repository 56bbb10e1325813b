package postgres

import (
	"slices"
	"strings"
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

// The event ranges of a window travel joined in one payload (as many as
// fit under maxEventsPayload), the other notes one each, in order.
func TestNotifyParamsJoinEventRanges(t *testing.T) {
	a, b := "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	p := notifyParams([]note{
		{task: a, first: 1, last: 3},
		{task: b, at: 4},
		{task: b, first: 4, last: 4},
		{ch: ChannelOutbox},
	})
	wantCh := []string{ChannelRunnable, ChannelOutbox, ChannelEvents}
	wantPl := []string{b + "@4", "", a + ":1:3 " + b + ":4:4"}
	if !slices.Equal(p.Channels, wantCh) || !slices.Equal(p.Payloads, wantPl) {
		t.Fatalf("channels %q payloads %q, want %q %q", p.Channels, p.Payloads, wantCh, wantPl)
	}

	var many []note
	for i := range 1000 {
		many = append(many, note{task: a, first: int64(1_000_000_000 + 2*i), last: int64(1_000_000_001 + 2*i)})
	}
	p = notifyParams(many)
	ranges := 0
	for i, pl := range p.Payloads {
		if p.Channels[i] != ChannelEvents || len(pl) > maxEventsPayload || len(pl) == 0 {
			t.Fatalf("payload %d on %s: %d bytes", i, p.Channels[i], len(pl))
		}
		ranges += strings.Count(pl, " ") + 1
	}
	if ranges != len(many) || len(p.Payloads) < 2 {
		t.Fatalf("%d ranges in %d payloads, want %d in several", ranges, len(p.Payloads), len(many))
	}
}
