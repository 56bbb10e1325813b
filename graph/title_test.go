package graph_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
)

func TestDefaultTitle(t *testing.T) {
	long := strings.Repeat("word ", 30)
	for _, tc := range []struct{ input, want string }{
		{`{"description":"  Add\n dark   mode ", "title":""}`, "Add dark mode"},
		{`{"zeta":"z", "query":"find the bug", "alpha":"a"}`, "find the bug"},
		{`{"user_input":"a slogan for tea"}`, "a slogan for tea"},
		{`{"zeta":"z", "beta":"b", "n":3}`, "b"},
		{`{"n":3}`, "wf"},
		{`[1,2]`, "wf"},
		{``, "wf"},
		{`{"title":"` + long + `"}`, strings.TrimSpace(strings.Repeat("word ", 15)) + "…"},
	} {
		if got := graph.DefaultTitle("wf", json.RawMessage(tc.input)); got != tc.want {
			t.Errorf("DefaultTitle(%s) = %q, want %q", tc.input, got, tc.want)
		}
	}
}

// TestCreateAppliesDefaultTitle: a task created without a title (or with
// white space only) is titled DefaultTitle, whichever channel created it;
// a title given is kept.
func TestCreateAppliesDefaultTitle(t *testing.T) {
	e := newEnv(t, compile(t, graph.New[st]("titled").Node("a", noop).Edge("a", graph.END)))
	ctx := context.Background()
	for _, tc := range []struct{ title, input, want string }{
		{"", `{"question":"Why  is the sky blue?"}`, "Why is the sky blue?"},
		{" \t", `{}`, "titled"},
		{"Mine", `{"question":"q"}`, "Mine"},
	} {
		task, err := e.eng.Create(ctx, graph.NewTask{Workflow: "titled", Title: tc.title, Input: json.RawMessage(tc.input)})
		if err != nil {
			t.Fatal(err)
		}
		if task.Title != tc.want {
			t.Errorf("Create(title %q, input %s): title %q, want %q", tc.title, tc.input, task.Title, tc.want)
		}
	}
}

// TestDescriptionFacts: a workflow's deliverable and its interrupt kinds
// (its gates' and those it declares it raises) are in its description,
// and change nothing of its definition version.
func TestDescriptionFacts(t *testing.T) {
	gate := graph.Gate[st]{Kind: "merge", Option: "allowMerge", OnReject: func(s st, _ string, _ int) (st, error) { return s, nil }}
	build := func(facts bool) *graph.Graph[st] {
		b := graph.New[st]("facts").Node("a", noop).Node("b", noop).Gate("b", gate).Edge("a", "b").Edge("b", graph.END)
		if facts {
			b = b.Deliverable("merge.md").Raises("question", "merge")
		}
		return compile(t, b)
	}
	g := build(true)
	d := g.Describe()
	if d.Deliverable != "merge.md" || !slices.Equal(d.Kinds, []string{"merge", "question"}) {
		t.Errorf("facts: deliverable %q, kinds %v", d.Deliverable, d.Kinds)
	}
	if plain := build(false); plain.Version() != g.Version() || !slices.Equal(plain.Describe().Kinds, []string{"merge"}) {
		t.Errorf("without facts: version %s (with: %s), kinds %v", plain.Version(), g.Version(), plain.Describe().Kinds)
	}
	b, _ := json.Marshal(d)
	if strings.Contains(string(b), "merge.md") {
		t.Errorf("the facts are in the workflow's JSON: %s", b)
	}
}
