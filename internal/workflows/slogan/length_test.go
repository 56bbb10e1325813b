package slogan_test

import (
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/internal/workflows/slogan"
)

// TestWriterKeepsToTheLengthAsked (issue 27, item 9): a review asking for
// a length ("under 6 words", "at most four words", "shorter") gets a
// slogan that keeps to it, for products of any name length; the same
// review gets the same slogan (deterministic).
func TestWriterKeepsToTheLengthAsked(t *testing.T) {
	t.Parallel()
	products := []string{"Organic tea for night owls", "A bicycle repair app",
		"Handmade ceramic coffee mugs for remote workers who love slow mornings", "Invoices", ""}
	reviews := []struct {
		review string
		max    int // words; 0: fewer than the first slogan
	}{
		{"Make it under 6 words", 5},
		{"under 6 words please", 5},
		{"Fewer than four words.", 3},
		{"At most four words", 4},
		{"no more than 3 words", 3},
		{"Two words max", 2},
		{"Say it in two words", 2},
		{"Too long. Shorter!", 0},
		{"Make it shorter and punchier", 0},
	}
	for _, p := range products {
		first, _ := slogan.BuiltinReply(slogan.RoleWriter, p)
		for _, r := range reviews {
			got, ok := slogan.Builtin(slogan.RoleWriter, p, []string{"Not bad.", r.review})
			if !ok {
				t.Fatal("no writer reply")
			}
			n, limit := len(strings.Fields(got)), r.max
			if limit == 0 {
				limit = len(strings.Fields(first)) - 1
			}
			if n > limit || n == 0 {
				t.Errorf("%q, review %q: %q has %d words, want at most %d (the first was %q)", p, r.review, got, n, limit, first)
			}
			if strings.Contains(got, "\n") || strings.Contains(got, "As You Asked") {
				t.Errorf("%q, review %q: %q", p, r.review, got)
			}
			if again, _ := slogan.Builtin(slogan.RoleWriter, p, []string{"Not bad.", r.review}); again != got {
				t.Errorf("not deterministic: %q then %q", got, again)
			}
		}
	}
	// A review about something else still changes the wording, around its
	// key word, without a length rule.
	got, _ := slogan.Builtin(slogan.RoleWriter, "Organic tea for night owls", []string{"Mention the caffeine"})
	if !strings.Contains(got, "Caffeine") {
		t.Errorf("revision %q does not answer the review", got)
	}
}
