package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// NodeFunc is a node's work: it gets the state and returns the next state.
// It may ask questions, record artifacts and events through run.
type NodeFunc[S any] func(ctx context.Context, run *NodeRun, s S) (S, error)

// RouterFunc picks the next node from the state.
type RouterFunc[S any] func(s S) string

// Gate declares a node whose output a human approves before the graph
// moves on (SPEC §3.3).
type Gate[S any] struct {
	// Kind is the interrupt kind shown in the inbox (prd, plan, merge, …).
	Kind string
	// Option is the task option that auto-approves the gate (allowPrd, …).
	Option string
	// AlwaysAsks makes the gate stop even when the task has no "gates"
	// option at all: only Option set true passes it (seed 000's "Human
	// Review Must Approve").
	AlwaysAsks bool
	// Title is shown to the reviewer.
	Title string
	// Artifact names the artifact of the node run the reviewer decides on.
	Artifact string
	// OnApprove, if set, updates the state when the gate is approved
	// (also when auto-approved).
	OnApprove func(s S) (S, error)
	// OnReject records the feedback in the state before the node runs
	// again as the next iteration. Required.
	OnReject func(s S, feedback string, iteration int) (S, error)
	// RejectTo, when set, is the node a rejection continues at instead of
	// running the gated node again at once: a revision loop that leads
	// back to the gated node, which then runs as its next iteration and
	// raises the gate again (seed 000: a rejected design is redrafted from
	// the high-level design on).
	RejectTo string
	// OnEdit puts the edited artifact in place of the node's output. When
	// nil, edit is not offered.
	OnEdit func(s S, content string) (S, error)
}

// RetryPolicy says how often a failing node run is tried again.
type RetryPolicy struct {
	// Attempts is the total number of tries (1 or less: no retry).
	Attempts int
	// Backoff is the wait before the second try; it doubles each time up to
	// MaxBackoff, with up to Jitter (0–1) of it randomised away.
	Backoff    time.Duration
	MaxBackoff time.Duration // the longest wait between tries (0: no bound)
	Jitter     float64       // the part of each wait (0–1) randomised away
	// Transient reports whether an error is worth retrying. When nil, every
	// error not marked Permanent is.
	Transient func(error) bool
}

// NodeOption configures a node.
type NodeOption func(*nodeConfig)

type nodeConfig struct {
	retry       RetryPolicy
	timeout     time.Duration
	description string
}

// WithRetry sets the node's retry policy.
func WithRetry(p RetryPolicy) NodeOption { return func(c *nodeConfig) { c.retry = p } }

// WithTimeout bounds each try of the node.
func WithTimeout(d time.Duration) NodeOption { return func(c *nodeConfig) { c.timeout = d } }

// WithDescription documents the node for the UI.
func WithDescription(s string) NodeOption { return func(c *nodeConfig) { c.description = s } }

type node[S any] struct {
	name string
	fn   NodeFunc[S]
	cfg  nodeConfig
	gate *Gate[S]
	next string // plain edge target
	rt   *route[S]
}

type route[S any] struct {
	fn       RouterFunc[S]
	targets  []string
	labels   map[string]string
	declared string
}

// Builder assembles a graph; Compile checks it.
type Builder[S any] struct {
	g    *Graph[S]
	errs []error
}

// New starts a graph named name with state type S.
func New[S any](name string) *Builder[S] {
	return &Builder[S]{g: &Graph[S]{name: name, nodes: map[string]*node[S]{}}}
}

func (b *Builder[S]) fail(format string, args ...any) *Builder[S] {
	b.errs = append(b.errs, fmt.Errorf(format, args...))
	return b
}

// Describe sets the title and description shown in the UI.
func (b *Builder[S]) Describe(title, description string) *Builder[S] {
	b.g.title, b.g.description = title, description
	return b
}

// Deliverable names the artifact a finished task of the workflow makes for
// people (merge.md, sdd.md): what the desk shows first on a task that
// succeeded and what its artifact viewer opens on.
func (b *Builder[S]) Deliverable(artifact string) *Builder[S] {
	b.g.deliverable = artifact
	return b
}

// Unlisted marks a workflow that is served but started only through its
// own door (the built-in request workflow is started by /api/v1/requests
// and MCP): generic lists of workflows to start — the LangGraph API's
// assistants, MCP's list_workflows — leave it out (Description.Unlisted).
func (b *Builder[S]) Unlisted() *Builder[S] {
	b.g.unlisted = true
	return b
}

// Raises declares the interrupt kinds the workflow's nodes raise besides
// its gates' (the kinds of the questions they ask, NodeRun.Ask), so that
// they are known before any is raised (Description.Kinds).
func (b *Builder[S]) Raises(kinds ...string) *Builder[S] {
	b.g.raises = append(b.g.raises, kinds...)
	return b
}

// Node adds a node.
func (b *Builder[S]) Node(name string, fn NodeFunc[S], opts ...NodeOption) *Builder[S] {
	switch {
	case name == "" || name == END || strings.ContainsAny(name, ": \t\n"):
		return b.fail("invalid node name %q", name)
	case fn == nil:
		return b.fail("node %q has no function", name)
	case b.g.nodes[name] != nil:
		return b.fail("node %q declared twice", name)
	}
	n := &node[S]{name: name, fn: fn}
	for _, o := range opts {
		o(&n.cfg)
	}
	b.g.nodes[name] = n
	b.g.order = append(b.g.order, name)
	if b.g.entry == "" {
		b.g.entry = name
	}
	return b
}

// Gate makes an existing node gated.
func (b *Builder[S]) Gate(nodeName string, gate Gate[S]) *Builder[S] {
	n := b.g.nodes[nodeName]
	switch {
	case n == nil:
		return b.fail("gate on unknown node %q", nodeName)
	case gate.Kind == "":
		return b.fail("gate on node %q has no kind", nodeName)
	case gate.OnReject == nil:
		return b.fail("gate on node %q has no OnReject", nodeName)
	}
	n.gate = &gate
	return b
}

// Entry sets the first node (default: the first node added).
func (b *Builder[S]) Entry(name string) *Builder[S] {
	b.g.entry = name
	return b
}

// Edge adds a plain edge from → to (to may be END).
func (b *Builder[S]) Edge(from, to string) *Builder[S] {
	n := b.g.nodes[from]
	switch {
	case n == nil:
		return b.fail("edge from unknown node %q", from)
	case n.next != "" || n.rt != nil:
		return b.fail("node %q already has an outgoing edge", from)
	}
	n.next = to
	return b
}

// Route adds a conditional edge: after from, fn picks one of targets. A
// label per target may be given as "target=label" to show on the edge.
func (b *Builder[S]) Route(from string, fn RouterFunc[S], targets ...string) *Builder[S] {
	n := b.g.nodes[from]
	switch {
	case n == nil:
		return b.fail("route from unknown node %q", from)
	case n.next != "" || n.rt != nil:
		return b.fail("node %q already has an outgoing edge", from)
	case fn == nil || len(targets) == 0:
		return b.fail("route from %q needs a function and its targets", from)
	}
	r := &route[S]{fn: fn, labels: map[string]string{}}
	for _, t := range targets {
		name, label, _ := strings.Cut(t, "=")
		r.targets = append(r.targets, name)
		if label != "" {
			r.labels[name] = label
		}
	}
	n.rt = r
	return b
}

// Init sets how a task's input and options become the initial state. It
// should return *ValidationError for bad input.
func (b *Builder[S]) Init(fn func(input json.RawMessage, opts Options) (S, error)) *Builder[S] {
	b.g.init = fn
	return b
}

// Result sets what a succeeded task reports as its result.
func (b *Builder[S]) Result(fn func(s S) any) *Builder[S] {
	b.g.result = fn
	return b
}

// InputSchema attaches the JSON Schema of the workflow's input.
func (b *Builder[S]) InputSchema(schema json.RawMessage) *Builder[S] {
	b.g.inputSchema = schema
	return b
}

// OptionsSchema attaches the JSON Schema of the task options the workflow
// reads (gates, limits, …): the start form offers a field for each.
func (b *Builder[S]) OptionsSchema(schema json.RawMessage) *Builder[S] {
	b.g.optionsSchema = schema
	return b
}

// Compile checks the graph: every edge names a node, every node is
// reachable from the entry and has a way out.
func (b *Builder[S]) Compile() (*Graph[S], error) {
	g := b.g
	g.stringFields = stringFields[S]()
	errs := slices.Clone(b.errs)
	if g.name == "" {
		errs = append(errs, errors.New("graph has no name"))
	}
	if g.nodes[g.entry] == nil {
		errs = append(errs, fmt.Errorf("entry node %q is not declared", g.entry))
	}
	if g.init == nil {
		errs = append(errs, errors.New("graph has no Init"))
	}
	known := func(name string) bool { return name == END || g.nodes[name] != nil }
	for _, name := range g.order {
		n := g.nodes[name]
		switch {
		case n.next == "" && n.rt == nil:
			errs = append(errs, fmt.Errorf("node %q has no outgoing edge (add one to graph.END to finish)", name))
		case n.next != "" && !known(n.next):
			errs = append(errs, fmt.Errorf("edge %s → %s: unknown node %q", name, n.next, n.next))
		case n.rt != nil:
			for _, t := range n.rt.targets {
				if !known(t) {
					errs = append(errs, fmt.Errorf("route from %q declares unknown node %q", name, t))
				}
			}
		}
		if n.gate != nil && n.gate.RejectTo != "" && g.nodes[n.gate.RejectTo] == nil {
			errs = append(errs, fmt.Errorf("gate on node %q rejects to unknown node %q", name, n.gate.RejectTo))
		}
	}
	if len(errs) == 0 {
		seen := map[string]bool{g.entry: true}
		queue := []string{g.entry}
		for len(queue) > 0 {
			n := g.nodes[queue[0]]
			queue = queue[1:]
			for _, t := range n.successors() {
				if t != END && !seen[t] {
					seen[t] = true
					queue = append(queue, t)
				}
			}
		}
		for _, name := range g.order {
			if !seen[name] {
				errs = append(errs, fmt.Errorf("node %q cannot be reached from entry %q", name, g.entry))
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("graph %q: %w", g.name, errors.Join(errs...))
	}
	if g.result == nil {
		g.result = func(s S) any { return s }
	}
	g.version = definitionVersion(g.Describe(), g.stateVersion)
	b.g = nil // a compiled graph is immutable
	return g, nil
}

func (n *node[S]) successors() []string {
	out := []string{n.next}
	if n.rt != nil {
		out = slices.Clone(n.rt.targets)
	}
	if n.gate != nil && n.gate.RejectTo != "" {
		out = append(out, n.gate.RejectTo)
	}
	return out
}

// Graph is a compiled workflow definition. It is immutable and safe for
// concurrent use by many tasks.
type Graph[S any] struct {
	name, title, description string
	entry                    string
	nodes                    map[string]*node[S]
	order                    []string
	init                     func(json.RawMessage, Options) (S, error)
	result                   func(S) any
	inputSchema              json.RawMessage
	optionsSchema            json.RawMessage
	// stringFields are the state's fields the state codec may treat apart.
	stringFields []stringField
	// stateVersion is the author's version of the state's shape;
	// version the definition version Compile derives (version.go).
	stateVersion  int
	version       string
	validateState func(S) error
	// deliverable and raises are facts for the desk (Description).
	deliverable string
	raises      []string
	unlisted    bool
}

// Name is the workflow's name.
func (g *Graph[S]) Name() string { return g.name }

// next returns the node after from for state s.
func (g *Graph[S]) next(from string, s S) (string, error) {
	n := g.nodes[from]
	if n.rt == nil {
		return n.next, nil
	}
	to := n.rt.fn(s)
	if !slices.Contains(n.rt.targets, to) {
		return "", &RouteError{From: from, Returned: to, Declared: slices.Clone(n.rt.targets)}
	}
	return to, nil
}

// NodeInfo describes one node for the UI and the API.
type NodeInfo struct {
	Name        string `json:"name"`                  // the node's name
	Description string `json:"description,omitempty"` // what it does (WithDescription)
	Gated       bool   `json:"gated"`                 // whether a gate follows its runs
}

// EdgeInfo describes one edge; Condition is empty for plain edges.
type EdgeInfo struct {
	From      string `json:"from"`                // the node the edge leaves
	To        string `json:"to"`                  // the node it leads to, or END
	Condition string `json:"condition,omitempty"` // the route's label, "rejected" for a gate's RejectTo; "" for a plain edge
}

// GateInfo describes one gate.
type GateInfo struct {
	Node   string `json:"node"`   // the gated node
	Kind   string `json:"kind"`   // the interrupt kind it raises
	Option string `json:"option"` // the task option that passes it
}

// Description is a workflow as data.
type Description struct {
	Name        string          `json:"name"`         // the workflow's name
	Title       string          `json:"title"`        // its title (Builder.Describe; default the name)
	Description string          `json:"description"`  // what it does, for people
	Entry       string          `json:"entry"`        // the first node
	Nodes       []NodeInfo      `json:"nodes"`        // its nodes in declaration order
	Edges       []EdgeInfo      `json:"edges"`        // its plain, routed and rejection edges
	Gates       []GateInfo      `json:"gates"`        // its gated nodes
	InputSchema json.RawMessage `json:"input_schema"` // the JSON Schema of the input, if declared
	// OptionsSchema is the task options' JSON Schema, when the workflow
	// declares one.
	OptionsSchema json.RawMessage `json:"options_schema,omitempty"`
	Mermaid       string          `json:"mermaid"` // the graph as a Mermaid flowchart
	// Deliverable is the artifact a finished task makes for people
	// (Builder.Deliverable), "" for none. Kinds are the interrupt kinds
	// the workflow raises: its gates' and those declared with
	// Builder.Raises, sorted. Both are for the desk, not the API's body of
	// a workflow.
	Deliverable string   `json:"-"`
	Kinds       []string `json:"-"`
	// Unlisted is set by Builder.Unlisted: the workflow is served but
	// left out of generic lists of workflows to start.
	Unlisted bool `json:"-"`
}

// Describe reports the graph's nodes, edges and gates as data.
func (g *Graph[S]) Describe() Description {
	d := Description{Name: g.name, Title: g.title, Description: g.description, Entry: g.entry,
		Nodes: []NodeInfo{}, Edges: []EdgeInfo{}, Gates: []GateInfo{}, InputSchema: g.inputSchema,
		OptionsSchema: g.optionsSchema}
	if d.Title == "" {
		d.Title = g.name
	}
	if len(d.InputSchema) == 0 {
		d.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	for _, name := range g.order {
		n := g.nodes[name]
		d.Nodes = append(d.Nodes, NodeInfo{Name: name, Description: n.cfg.description, Gated: n.gate != nil})
		if n.gate != nil {
			d.Gates = append(d.Gates, GateInfo{Node: name, Kind: n.gate.Kind, Option: n.gate.Option})
		}
		if n.rt == nil {
			d.Edges = append(d.Edges, EdgeInfo{From: name, To: n.next})
		} else {
			for _, t := range n.rt.targets {
				label := n.rt.labels[t]
				if label == "" {
					label = "→ " + t
				}
				d.Edges = append(d.Edges, EdgeInfo{From: name, To: t, Condition: label})
			}
		}
		if n.gate != nil && n.gate.RejectTo != "" {
			d.Edges = append(d.Edges, EdgeInfo{From: name, To: n.gate.RejectTo, Condition: "rejected"})
		}
	}
	d.Kinds = slices.Clone(g.raises)
	for _, gt := range d.Gates {
		d.Kinds = append(d.Kinds, gt.Kind)
	}
	slices.Sort(d.Kinds)
	d.Kinds = slices.Compact(d.Kinds)
	d.Deliverable = g.deliverable
	d.Unlisted = g.unlisted
	d.Mermaid = mermaid(d)
	return d
}

// entryNode is the first node (Describe builds the whole picture, Mermaid
// included: too much for each task created).
func (g *Graph[S]) entryNode() string { return g.entry }

// Mermaid renders the graph as Mermaid flowchart text.
func (g *Graph[S]) Mermaid() string { return g.Describe().Mermaid }

func mermaid(d Description) string {
	var sb strings.Builder
	sb.WriteString("graph TD\n")
	sb.WriteString("    __start__((Start))\n")
	sb.WriteString("    __end__((End))\n")
	for _, n := range d.Nodes {
		if n.Gated {
			fmt.Fprintf(&sb, "    %s{{%s}}:::gated\n", n.Name, n.Name)
		} else {
			fmt.Fprintf(&sb, "    %s[%s]\n", n.Name, n.Name)
		}
	}
	fmt.Fprintf(&sb, "    __start__ --> %s\n", d.Entry)
	for _, e := range d.Edges {
		if e.Condition != "" {
			fmt.Fprintf(&sb, "    %s -.->|%s| %s\n", e.From, mermaidLabel(e.Condition), e.To)
		} else {
			fmt.Fprintf(&sb, "    %s --> %s\n", e.From, e.To)
		}
	}
	sb.WriteString("    classDef gated fill:#FFF3E0,stroke:#F4A226,stroke-width:2px\n")
	return sb.String()
}

func mermaidLabel(s string) string {
	r := strings.NewReplacer("|", "/", "\"", "'", "\n", " ")
	return r.Replace(s)
}

// Options are the engine's view of a task's options: which gates
// auto-approve. Workflows read their own keys from Raw.
type Options struct {
	// Gates is nil when the task has no "gates" option: then no gate
	// interrupts. Otherwise Gates[option] true auto-approves that gate.
	Gates map[string]bool
	// Deadlines are the task's own deadlines per interrupt kind (options
	// "deadlines": {"prd": "4h"}), replacing the policy's (SPEC §11).
	Deadlines map[string]time.Duration
	Raw       json.RawMessage // the whole options object, for the workflow's own keys
}

// ParseOptions reads a task's options object.
func ParseOptions(raw json.RawMessage) (Options, error) {
	o := Options{Raw: raw}
	if len(raw) == 0 || string(raw) == "null" {
		o.Raw = json.RawMessage(`{}`)
		return o, nil
	}
	var v struct {
		Gates     *map[string]bool  `json:"gates"`
		Deadlines map[string]string `json:"deadlines"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return o, &ValidationError{Field: "options", Message: "must be an object with optional \"gates\" of booleans and \"deadlines\" of durations: " + err.Error()}
	}
	for _, kind := range slices.Sorted(maps.Keys(v.Deadlines)) {
		s := strings.TrimSpace(v.Deadlines[kind])
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			return o, &ValidationError{Field: "options.deadlines." + kind, Message: fmt.Sprintf("%q is not a duration (want e.g. 90m, 4h)", s)}
		case d < time.Second:
			return o, &ValidationError{Field: "options.deadlines." + kind, Message: fmt.Sprintf("%s is shorter than the minimum of 1s", s)}
		}
		if o.Deadlines == nil {
			o.Deadlines = map[string]time.Duration{}
		}
		o.Deadlines[kind] = d
	}
	if v.Gates != nil {
		o.Gates = *v.Gates
		if o.Gates == nil {
			o.Gates = map[string]bool{}
		}
	}
	return o, nil
}

// AutoApproves reports whether the gate with this option passes without a human.
func (o Options) AutoApproves(option string) bool {
	return o.Gates == nil || o.Gates[option]
}

// AutoApprovesGate is AutoApproves for a gate that may always ask: such a
// gate passes only when its option is set true.
func (o Options) AutoApprovesGate(option string, alwaysAsks bool) bool {
	if alwaysAsks {
		return o.Gates[option]
	}
	return o.AutoApproves(option)
}

// GateOptions lists the gate options of a description, sorted.
func (d Description) GateOptions() []string {
	var out []string
	for _, g := range d.Gates {
		out = append(out, g.Option)
	}
	sort.Strings(out)
	return out
}
