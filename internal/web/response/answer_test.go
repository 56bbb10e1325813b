package response

import (
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/markdown"
	"github.com/gatehousehq/gatehouse/internal/workflows/request"
)

// TestQuestionLineOfALongDescription: the inbox's line of a 64 KiB
// description is the line of the whole document, read from its start
// only; a cut never splits a character.
func TestQuestionLineOfALongDescription(t *testing.T) {
	t.Parallel()
	md := markdown.New()
	para := "Customer **Ana** asks for a [refund](https://example.com/r) — café ☕ `order-42`.\n\n"
	long := strings.Repeat(para, (64<<10)/len(para))
	want := graph.Excerpt(md.PlainText(long), 200)
	if got := QuestionLine(request.Name, long, 200, md); got != want {
		t.Errorf("line = %q, want %q", got, want)
	}
	for n := 1; n < 40; n++ {
		if h := markdownHead(strings.Repeat("é☕", 40), n); !strings.HasPrefix(strings.Repeat("é☕", 40), h) || strings.ToValidUTF8(h, "?") != h {
			t.Fatalf("markdownHead(…, %d) = %q: not a whole-character prefix", n, h)
		}
	}
}
