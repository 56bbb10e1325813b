package analytics

import (
	"errors"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	bins := []Bin{{Code: 1, N: 1}, {Code: 2, N: 1}, {Code: 3, N: 1}, {Code: 4, N: 1}, {Code: 5, N: 1},
		{Code: 6, N: 1}, {Code: 7, N: 1}, {Code: 8, N: 1}, {Code: 9, N: 1}, {Code: 10, N: 1}}
	for _, c := range []struct {
		bins      []Bin
		pct, want int
	}{
		{bins, 50, 5},
		{bins, 90, 9}, // ceil(0.9·10) is 9, not 10 (no floating point)
		{bins, 100, 10},
		{bins, 1, 1},
		{[]Bin{{Code: 7, N: 3}}, 50, 7},
		{[]Bin{{Code: 1, N: 1}, {Code: 9, N: 1}}, 50, 1}, // nearest rank: the lower of an even pair
		{[]Bin{{Code: 1, N: 1}, {Code: 9, N: 3}}, 50, 9},
	} {
		if got, ok := Percentile(c.bins, c.pct); !ok || got != c.want {
			t.Errorf("p%d of %v = %d, want %d", c.pct, c.bins, got, c.want)
		}
	}
	if _, ok := Percentile(nil, 50); ok {
		t.Error("an empty histogram has a percentile")
	}
}

func TestParseFilter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 15, 4, 5, 0, time.UTC)
	day := func(m time.Month, d int) time.Time { return time.Date(2026, m, d, 0, 0, 0, 0, time.UTC) }
	for _, c := range []struct {
		since, until string
		from, to     time.Time
	}{
		{"", "", day(2, 9), day(3, 11)}, // the last 30 days, today included
		{"2026-03-01", "", day(3, 1), day(3, 11)},
		{"2026-03-01", "2026-03-05", day(3, 1), day(3, 6)},                          // a date until is inclusive
		{"2026-03-01T23:59:59+02:00", "2026-03-05T00:00:00Z", day(3, 1), day(3, 5)}, // UTC days; a midnight until ends there
		{"2026-03-02T10:00:00Z", "2026-03-02T11:00:00Z", day(3, 2), day(3, 3)},
		{"", "2026-01-31", day(1, 2), day(2, 1)}, // 30 days up to and including 31 January
	} {
		f, err := ParseFilter(c.since, c.until, "", "", now)
		if err != nil || !f.Since.Equal(c.from) || !f.Until.Equal(c.to) {
			t.Errorf("%q–%q: %v – %v, %v; want %v – %v", c.since, c.until, f.Since, f.Until, err, c.from, c.to)
		}
	}
	for _, c := range []struct{ since, until, field string }{
		{"soon", "", "since"},
		{"", "2026-02-30", "until"},
		{"2026-03-05", "2026-03-01", "since"},
		{"2024-01-01", "2026-01-01", "since"},
	} {
		_, err := ParseFilter(c.since, c.until, "", "", now)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%q–%q: %v, want an error on %s", c.since, c.until, err, c.field)
		}
	}
}
