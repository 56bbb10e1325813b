package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
)

// st is the small state of the generic test graphs.
type st struct {
	N       int      `json:"n"`
	Log     []string `json:"log,omitempty"`
	Answers []string `json:"answers,omitempty"`
	Content string   `json:"content,omitempty"`
	Touched int      `json:"touched,omitempty"`
	// Marks is a map a node may change in place.
	Marks map[string]bool `json:"marks,omitempty"`
}

func noop(_ context.Context, _ *graph.NodeRun, s st) (st, error) { return s, nil }

func initSt(json.RawMessage, graph.Options) (st, error) { return st{}, nil }

func rejectSt(s st, feedback string, iteration int) (st, error) {
	s.Log = append(s.Log, fmt.Sprintf("rejected %d: %s", iteration, feedback))
	return s, nil
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	toA := func(st) string { return "a" }
	for _, tc := range []struct {
		name  string
		build func() *graph.Builder[st]
		want  []string
	}{
		{"unknown node in edge", func() *graph.Builder[st] {
			return graph.New[st]("g").Node("a", noop).Edge("a", "b")
		}, []string{`edge a → b: unknown node "b"`}},
		{"edge from unknown node", func() *graph.Builder[st] {
			return graph.New[st]("g").Node("a", noop).Edge("a", graph.END).Edge("x", "a")
		}, []string{`edge from unknown node "x"`}},
		{"unreachable node", func() *graph.Builder[st] {
			return graph.New[st]("g").Node("a", noop).Node("b", noop).Edge("a", graph.END).Edge("b", graph.END)
		}, []string{`node "b" cannot be reached from entry "a"`}},
		{"unreachable cycle", func() *graph.Builder[st] {
			return graph.New[st]("g").Node("a", noop).Node("b", noop).Node("c", noop).
				Edge("a", graph.END).Edge("b", "c").Edge("c", "b")
		}, []string{`node "b" cannot be reached`, `node "c" cannot be reached`}},
		{"node without outgoing edge", func() *graph.Builder[st] {
			return graph.New[st]("g").Node("a", noop).Node("b", noop).Edge("a", "b")
		}, []string{`node "b" has no outgoing edge`}},
		{"route declaring an unknown node", func() *graph.Builder[st] {
			return graph.New[st]("g").Node("a", noop).Node("b", noop).Edge("b", graph.END).Route("a", toA, "b", "zz")
		}, []string{`route from "a" declares unknown node "zz"`}},
		{"route without targets", func() *graph.Builder[st] {
			return graph.New[st]("g").Node("a", noop).Route("a", toA)
		}, []string{`route from "a" needs a function and its targets`}},
		{"two outgoing edges", func() *graph.Builder[st] {
			return graph.New[st]("g").Node("a", noop).Edge("a", graph.END).Route("a", toA, "a")
		}, []string{`node "a" already has an outgoing edge`}},
		{"node declared twice", func() *graph.Builder[st] {
			return graph.New[st]("g").Node("a", noop).Node("a", noop).Edge("a", graph.END)
		}, []string{`node "a" declared twice`}},
		{"invalid node names", func() *graph.Builder[st] {
			return graph.New[st]("g").Node("a", noop).Edge("a", graph.END).Node("b:2", noop).Node(graph.END, noop).Node("", noop)
		}, []string{`invalid node name "b:2"`, `invalid node name "__end__"`, `invalid node name ""`}},
		{"node without function", func() *graph.Builder[st] {
			return graph.New[st]("g").Node("a", nil)
		}, []string{`node "a" has no function`}},
		{"gate on unknown node", func() *graph.Builder[st] {
			return graph.New[st]("g").Node("a", noop).Edge("a", graph.END).Gate("b", graph.Gate[st]{Kind: "k", OnReject: rejectSt})
		}, []string{`gate on unknown node "b"`}},
		{"gate without kind", func() *graph.Builder[st] {
			return graph.New[st]("g").Node("a", noop).Edge("a", graph.END).Gate("a", graph.Gate[st]{OnReject: rejectSt})
		}, []string{`gate on node "a" has no kind`}},
		{"gate without OnReject", func() *graph.Builder[st] {
			return graph.New[st]("g").Node("a", noop).Edge("a", graph.END).Gate("a", graph.Gate[st]{Kind: "k"})
		}, []string{`gate on node "a" has no OnReject`}},
		{"entry not declared", func() *graph.Builder[st] {
			return graph.New[st]("g").Node("a", noop).Edge("a", graph.END).Entry("zz")
		}, []string{`entry node "zz" is not declared`}},
		{"no nodes", func() *graph.Builder[st] { return graph.New[st]("g") }, []string{`entry node "" is not declared`}},
		{"no name", func() *graph.Builder[st] {
			return graph.New[st]("").Node("a", noop).Edge("a", graph.END)
		}, []string{"graph has no name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := tc.build().Init(initSt).Compile()
			if err == nil {
				t.Fatalf("Compile succeeded: %v", g.Describe().Nodes)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	t.Run("no Init", func(t *testing.T) {
		t.Parallel()
		_, err := graph.New[st]("g").Node("a", noop).Edge("a", graph.END).Compile()
		if err == nil || !strings.Contains(err.Error(), "graph has no Init") {
			t.Fatalf("Compile: %v", err)
		}
	})
	t.Run("cycles compile", func(t *testing.T) {
		t.Parallel()
		_, err := graph.New[st]("g").Node("a", noop).Node("b", noop).Edge("a", "b").
			Route("b", func(st) string { return "a" }, "a", graph.END).Init(initSt).Compile()
		if err != nil {
			t.Fatalf("Compile: %v", err)
		}
	})
}

func mermaidGraph(t *testing.T) *graph.Graph[st] {
	t.Helper()
	g, err := graph.New[st]("m").
		Node("start", noop, graph.WithDescription("first")).
		Node("review", noop).
		Node("fix", noop).
		Gate("review", graph.Gate[st]{Kind: "review", Option: "allowReview", OnReject: rejectSt}).
		Edge("start", "review").
		Route("review", func(s st) string { return graph.END }, "fix=needs work", graph.END).
		Edge("fix", "review").
		Init(initSt).Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestMermaidHasEveryNodeAndEdge(t *testing.T) {
	t.Parallel()
	g := mermaidGraph(t)
	m := g.Mermaid()
	d := g.Describe()
	if !strings.HasPrefix(m, "graph TD\n") {
		t.Errorf("not a Mermaid flowchart:\n%s", m)
	}
	for _, want := range []string{
		"start[start]", "review{{review}}:::gated", "fix[fix]", "__start__((Start))", "__end__((End))",
		"__start__ --> start", "start --> review", "review -.->|needs work| fix", "review -.->|→ __end__| __end__", "fix --> review",
	} {
		if !strings.Contains(m, "    "+want+"\n") {
			t.Errorf("Mermaid lacks %q:\n%s", want, m)
		}
	}
	for _, n := range d.Nodes {
		if !strings.Contains(m, "    "+n.Name+"[") && !strings.Contains(m, "    "+n.Name+"{{") {
			t.Errorf("node %s not drawn", n.Name)
		}
	}
	for _, e := range d.Edges {
		plain := fmt.Sprintf("    %s --> %s\n", e.From, e.To)
		cond := fmt.Sprintf("    %s -.->|%s| %s\n", e.From, e.Condition, e.To)
		if !strings.Contains(m, plain) && !strings.Contains(m, cond) {
			t.Errorf("edge %+v not drawn", e)
		}
	}
	if m != d.Mermaid {
		t.Error("Describe().Mermaid differs from Mermaid()")
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	d := mermaidGraph(t).Describe()
	wantNodes := []graph.NodeInfo{{Name: "start", Description: "first"}, {Name: "review", Gated: true}, {Name: "fix"}}
	if !slices.Equal(d.Nodes, wantNodes) {
		t.Errorf("nodes = %+v", d.Nodes)
	}
	wantEdges := []graph.EdgeInfo{{From: "start", To: "review"}, {From: "review", To: "fix", Condition: "needs work"},
		{From: "review", To: graph.END, Condition: "→ __end__"}, {From: "fix", To: "review"}}
	if !slices.Equal(d.Edges, wantEdges) {
		t.Errorf("edges = %+v", d.Edges)
	}
	if !slices.Equal(d.Gates, []graph.GateInfo{{Node: "review", Kind: "review", Option: "allowReview"}}) {
		t.Errorf("gates = %+v", d.Gates)
	}
	if d.Name != "m" || d.Title != "m" || d.Entry != "start" || string(d.InputSchema) != `{"type":"object"}` {
		t.Errorf("description = %+v", d)
	}
	if got := d.GateOptions(); !slices.Equal(got, []string{"allowReview"}) {
		t.Errorf("GateOptions = %v", got)
	}
	b, err := json.Marshal(d)
	if err != nil || !json.Valid(b) {
		t.Errorf("description does not marshal: %v", err)
	}
}

func TestParseOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw string
		wantErr   bool
		nilGates  bool
		approves  map[string]bool
	}{
		{"empty", "", false, true, map[string]bool{"allowA": true, "allowB": true}},
		{"null", "null", false, true, map[string]bool{"allowA": true}},
		{"no gates key", `{"max": 3}`, false, true, map[string]bool{"allowA": true}},
		{"gates null", `{"gates": null}`, false, true, map[string]bool{"allowA": true}},
		{"empty gates", `{"gates": {}}`, false, false, map[string]bool{"allowA": false, "allowB": false}},
		{"some allowed", `{"gates": {"allowA": true, "allowB": false}}`, false, false, map[string]bool{"allowA": true, "allowB": false, "allowC": false}},
		{"not an object", `[1]`, true, false, nil},
		{"gate not a bool", `{"gates": {"allowA": "yes"}}`, true, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, err := graph.ParseOptions(json.RawMessage(tc.raw))
			if tc.wantErr {
				var ve *graph.ValidationError
				if !errors.As(err, &ve) || ve.Field != "options" {
					t.Fatalf("ParseOptions(%s) = %v, want ValidationError on options", tc.raw, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (o.Gates == nil) != tc.nilGates {
				t.Errorf("Gates = %v", o.Gates)
			}
			if !json.Valid(o.Raw) {
				t.Errorf("Raw = %q", o.Raw)
			}
			for opt, want := range tc.approves {
				if got := o.AutoApproves(opt); got != want {
					t.Errorf("AutoApproves(%s) = %v, want %v", opt, got, want)
				}
			}
		})
	}
}

func TestPhase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		node      string
		iteration int
		want      string
	}{
		{"requirements", 0, "requirements"},
		{"requirements", 1, "requirements"},
		{"requirements", 2, "requirements:2"},
		{"plan", 11, "plan:11"},
	} {
		if got := graph.Phase(tc.node, tc.iteration); got != tc.want {
			t.Errorf("Phase(%s, %d) = %q, want %q", tc.node, tc.iteration, got, tc.want)
		}
	}
}

func TestIDs(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		id := graph.NewID()
		if !graph.ValidID(id) || id[14] != '4' || !strings.ContainsRune("89ab", rune(id[19])) {
			t.Fatalf("NewID() = %q is not a v4 uuid", id)
		}
		if seen[id] {
			t.Fatalf("NewID repeated %s", id)
		}
		seen[id] = true
	}
	for _, bad := range []string{"", "x", "0123456789abcdef0123456789abcdef0123", "01234567-89ab-cdef-0123-456789abcdeg", "01234567+89ab-cdef-0123-456789abcdef"} {
		if graph.ValidID(bad) {
			t.Errorf("ValidID(%q) = true", bad)
		}
	}
}
