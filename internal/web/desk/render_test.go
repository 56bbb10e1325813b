package desk

// Unit tests of the desk's pure parts: the line diff, the graph layout,
// the form a workflow's schema gives, and the document renderer.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/views"
)

func TestLineDiff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, a, b string
		add, del   int
		ops        string
	}{
		{"Same", "a\nb\n", "a\nb\n", 0, 0, ""},
		{"Append", "a\nb", "a\nb\nc", 1, 0, "==+"},
		{"Replace", "a\nb\nc", "a\nx\nc", 1, 1, "=-+="},
		{"FromEmpty", "", "a\nb", 2, 0, "++"},
		{"ToEmpty", "a", "", 0, 1, "-"},
		{"Moved", "a\nb\nc\nd", "b\nc\nd\na", 1, 1, "-===+"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := lineDiff(tc.a, tc.b)
			if d.Added != tc.add || d.Removed != tc.del {
				t.Fatalf("+%d -%d, want +%d -%d", d.Added, d.Removed, tc.add, tc.del)
			}
			var ops strings.Builder
			for _, h := range d.Hunks {
				for _, l := range h.Lines {
					ops.WriteString(l.Op)
				}
			}
			if ops.String() != tc.ops {
				t.Fatalf("ops %q, want %q", ops.String(), tc.ops)
			}
		})
	}
	// Context: far-apart changes make two hunks with the gap counted.
	var a, b []string
	for range 30 {
		a = append(a, "line")
		b = append(b, "line")
	}
	b[2], b[27] = "changed", "changed too"
	d := lineDiff(strings.Join(a, "\n"), strings.Join(b, "\n"))
	if len(d.Hunks) != 2 || d.Hunks[0].Skipped != 0 || d.Hunks[1].Skipped == 0 {
		t.Fatalf("hunks: %+v", d.Hunks)
	}
}

func TestLayoutGraph(t *testing.T) {
	t.Parallel()
	// A loop back (review → draft) and a conditional exit.
	d := graph.Description{Entry: "draft",
		Nodes: []graph.NodeInfo{{Name: "draft"}, {Name: "review"}, {Name: "publish", Gated: true}},
		Edges: []graph.EdgeInfo{{From: "draft", To: "review"}, {From: "review", To: "draft", Condition: "revise"},
			{From: "review", To: "publish", Condition: "ok"}, {From: "publish", To: graph.END}}}
	g := layoutGraph(d, map[string]nodeRun{"draft": {Status: "done", Iteration: 2}, "review": {Status: "running", Iteration: 2}})
	byName := map[string]views.GraphNode{}
	for _, n := range g.Nodes {
		byName[n.Name] = n
	}
	if byName["draft"].Y >= byName["review"].Y || byName["review"].Y >= byName["publish"].Y || byName["publish"].Y >= byName[graph.END].Y {
		t.Fatalf("layers out of order: %+v", g.Nodes)
	}
	if byName["publish"].Status != "pending" || !byName["publish"].Gated || byName["draft"].Iteration != 2 {
		t.Fatalf("node facts: %+v", byName)
	}
	backs := 0
	for _, e := range g.Edges {
		if e.Back {
			backs++
			if e.Label != "revise" || !e.Dashed {
				t.Errorf("back edge %+v", e)
			}
		}
	}
	if backs != 1 {
		t.Fatalf("%d back edges, want 1", backs)
	}
	for _, n := range g.Nodes {
		if n.X < 0 || n.Y < 0 || n.X+n.W > g.Width || n.Y+n.H > g.Height {
			t.Errorf("node %s outside the drawing %dx%d: %+v", n.Name, g.Width, g.Height, n)
		}
	}
}

func TestSchemaForm(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","required":["query","mode"],"properties":{
		"query":{"type":"string","maxLength":4000,"title":"Query"},
		"mode":{"type":"string","enum":["fast","deep"]},
		"label":{"type":"string","maxLength":40},
		"dryRun":{"type":"boolean","default":true},
		"max_turns":{"type":"integer","minimum":1,"maximum":10},
		"tags":{"type":"array","items":{"type":"string"}},
		"extra":{"type":"object"}}}`)
	props, err := schemaForm(schema)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range props {
		f := fieldOf(p)
		got = append(got, p.Name+":"+f.Kind+":"+map[bool]string{true: "req", false: "opt"}[f.Required])
	}
	want := []string{"query:textarea:req", "mode:select:req", "label:text:opt", "dryRun:checkbox:opt",
		"max_turns:number:opt", "tags:lines:opt", "extra:textarea:opt"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("fields\n got %v\nwant %v", got, want)
	}
	if f := fieldOf(props[3]); !f.Checked {
		t.Error("boolean default not applied")
	}
	if f := fieldOf(props[4]); f.Min != "1" || f.Max != "10" || f.Step != "1" || f.Label != "Max turns" {
		t.Errorf("number field %+v", f)
	}
	cases := []struct {
		i       int
		raw     string
		want    any
		problem bool
	}{
		{4, "3", int64(3), false}, {4, "3.5", nil, true}, {4, "11", nil, true}, {1, "deep", "deep", false},
		{1, "other", nil, true}, {0, "  ", nil, true}, {6, `{"a":1}`, map[string]any{"a": float64(1)}, false},
		{6, `{`, nil, true}, {2, strings.Repeat("x", 41), nil, true},
	}
	for _, c := range cases {
		v, msg := formValue(props[c.i], fieldOf(props[c.i]).Kind, c.raw)
		if (msg != "") != c.problem {
			t.Errorf("%s=%q: message %q", props[c.i].Name, c.raw, msg)
			continue
		}
		if !c.problem {
			a, _ := json.Marshal(v)
			b, _ := json.Marshal(c.want)
			if string(a) != string(b) {
				t.Errorf("%s=%q: %s, want %s", props[c.i].Name, c.raw, a, b)
			}
		}
	}
	if v, _ := formValue(props[5], views.FieldLines, "a\n\n b \n"); len(v.([]string)) != 2 {
		t.Errorf("lines: %v", v)
	}
}

func TestRenderIsSafe(t *testing.T) {
	t.Parallel()
	r := newRenderer()
	md := string(r.document("text/markdown", "# Hi\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n[x](javascript:alert(3)) **bold**"))
	for _, bad := range []string{"<script", "onerror", "javascript:"} {
		if strings.Contains(md, bad) {
			t.Errorf("markdown output has %q: %s", bad, md)
		}
	}
	if !strings.Contains(md, "<h1") || !strings.Contains(md, "<strong>bold</strong>") {
		t.Errorf("markdown not rendered: %s", md)
	}
	y := string(r.document("application/yaml", "key: <script>x</script>\n"))
	if strings.Contains(y, "<script>") || !strings.Contains(y, "&lt;script&gt;") || !strings.Contains(y, `class="nt"`) {
		t.Errorf("yaml: %s", y)
	}
	j := string(r.document("application/json", `{"a":"<img>"}`))
	if strings.Contains(j, "<img>") || !strings.Contains(j, "\n") {
		t.Errorf("json: %s", j)
	}
	st := string(r.state([]byte(`{"spec_yaml":"name: x\nsummary: <b>y</b>\n","n":"12"}`)))
	if !strings.Contains(st, "|") || strings.Contains(st, "\\n") || strings.Contains(st, "<b>") || !strings.Contains(st, "&#34;12&#34;") {
		t.Errorf("state as YAML: %s", st)
	}
	p := string(r.document("text/plain", "<b>x</b>"))
	if p != `<pre class="plain">&lt;b&gt;x&lt;/b&gt;</pre>` {
		t.Errorf("plain: %s", p)
	}
}
