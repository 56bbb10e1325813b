package desk

import (
	"fmt"
	"sort"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/views"
)

// Graph geometry, in SVG user units.
const (
	gNodeH    = 36
	gTermH    = 24
	gTermW    = 64
	gGapY     = 22
	gGapX     = 18
	gPad      = 12
	gLane     = 14
	gCharW    = 7
	gMinNodeW = 150
	gMaxNodeW = 280
	startName = "__start__"
)

// nodeRun is what the page knows of a node: its status and runs so far.
type nodeRun struct {
	Status    string
	Iteration int
}

// layoutGraph draws a workflow top to bottom in layers: each node on the
// layer after its furthest predecessor (back edges of cycles left out),
// ordered within a layer by the mean position of its predecessors. Edges
// that go back up, or skip layers past other nodes, run in lanes on the
// right.
func layoutGraph(d graph.Description, runs map[string]nodeRun) views.Graph {
	names := []string{startName}
	for _, n := range d.Nodes {
		names = append(names, n.Name)
	}
	hasEnd := false
	type edge struct {
		from, to, label string
		dashed          bool
	}
	edges := []edge{{from: startName, to: d.Entry}}
	for _, e := range d.Edges {
		if e.To == graph.END {
			hasEnd = true
		}
		edges = append(edges, edge{from: e.From, to: e.To, label: e.Condition, dashed: e.Condition != ""})
	}
	if hasEnd {
		names = append(names, graph.END)
	}
	index := map[string]int{}
	for i, n := range names {
		index[n] = i
	}
	out := make([][]int, len(names))
	for i, e := range edges {
		if _, ok := index[e.from]; !ok {
			continue
		}
		if _, ok := index[e.to]; !ok {
			continue
		}
		out[index[e.from]] = append(out[index[e.from]], i)
	}

	// Back edges: those reaching a node on the DFS stack.
	back := make([]bool, len(edges))
	state := make([]int, len(names)) // 0 new, 1 on stack, 2 done
	var order []int
	var dfs func(v int)
	dfs = func(v int) {
		state[v] = 1
		for _, ei := range out[v] {
			w := index[edges[ei].to]
			switch state[w] {
			case 0:
				dfs(w)
			case 1:
				back[ei] = true
			}
		}
		state[v] = 2
		order = append(order, v)
	}
	dfs(0)
	for v := range names {
		if state[v] == 0 {
			dfs(v)
		}
	}
	// Longest path layering over forward edges, in topological order.
	layer := make([]int, len(names))
	for i := len(order) - 1; i >= 0; i-- {
		v := order[i]
		for _, ei := range out[v] {
			if back[ei] {
				continue
			}
			w := index[edges[ei].to]
			layer[w] = max(layer[w], layer[v]+1)
		}
	}
	if hasEnd {
		// The end sits alone below everything.
		endL := 0
		for v := range names {
			if names[v] != graph.END {
				endL = max(endL, layer[v]+1)
			}
		}
		layer[index[graph.END]] = endL
	}
	nLayers := 0
	for _, l := range layer {
		nLayers = max(nLayers, l+1)
	}
	layers := make([][]int, nLayers)
	for i := len(order) - 1; i >= 0; i-- { // topological order within layers
		v := order[i]
		layers[layer[v]] = append(layers[layer[v]], v)
	}
	// Order within a layer by the mean position of the predecessors.
	pos := make([]float64, len(names))
	for _, ly := range layers {
		for i, v := range ly {
			pos[v] = float64(i)
		}
	}
	preds := make([][]int, len(names))
	for i, e := range edges {
		if back[i] {
			continue
		}
		f, okf := index[e.from]
		t, okt := index[e.to]
		if okf && okt {
			preds[t] = append(preds[t], f)
		}
	}
	for l := 1; l < nLayers; l++ {
		ly := layers[l]
		bary := map[int]float64{}
		for _, v := range ly {
			if len(preds[v]) == 0 {
				bary[v] = pos[v]
				continue
			}
			s := 0.0
			for _, p := range preds[v] {
				s += pos[p]
			}
			bary[v] = s / float64(len(preds[v]))
		}
		sort.SliceStable(ly, func(i, j int) bool { return bary[ly[i]] < bary[ly[j]] })
		for i, v := range ly {
			pos[v] = float64(i)
		}
	}

	// Sizes: one width for every node box, from the longest label.
	nodeW := gMinNodeW
	for _, n := range d.Nodes {
		nodeW = max(nodeW, len(n.Name)*gCharW+100)
	}
	nodeW = min(nodeW, gMaxNodeW)
	size := func(v int) (int, int) {
		if names[v] == startName || names[v] == graph.END {
			return gTermW, gTermH
		}
		return nodeW, gNodeH
	}
	maxRow := 0
	for _, ly := range layers {
		w := 0
		for i, v := range ly {
			nw, _ := size(v)
			w += nw
			if i > 0 {
				w += gGapX
			}
		}
		maxRow = max(maxRow, w)
	}
	x := make([]int, len(names))
	y := make([]int, len(names))
	cy := gPad
	for _, ly := range layers {
		w := 0
		for i, v := range ly {
			nw, _ := size(v)
			w += nw
			if i > 0 {
				w += gGapX
			}
		}
		cx := gPad + (maxRow-w)/2
		rowH := 0
		for _, v := range ly {
			nw, nh := size(v)
			x[v] = cx
			cx += nw + gGapX
			rowH = max(rowH, nh)
		}
		for _, v := range ly {
			_, nh := size(v)
			y[v] = cy + (rowH-nh)/2
		}
		cy += rowH + gGapY
	}
	height := cy - gGapY + gPad
	right := gPad + maxRow

	g := views.Graph{}
	lanes := 0
	for i, e := range edges {
		f, okf := index[e.from]
		t, okt := index[e.to]
		if !okf || !okt {
			continue
		}
		fw, fh := size(f)
		tw, th := size(t)
		ge := views.GraphEdge{Dashed: e.dashed, Back: back[i]}
		if e.label != "" {
			ge.Label = e.label
		}
		fr, tr := runs[names[f]], runs[names[t]]
		ge.Taken = (names[f] == startName || fr.Iteration > 0) && (tr.Iteration > 0 || (names[t] == graph.END && fr.Status == "done"))
		skips := !back[i] && layer[t]-layer[f] > 1 && blocked(layers, layer[f], layer[t], x, size, x[f]+fw/2, x[t]+tw/2)
		if back[i] || skips {
			lanes++
			lane := right + gLane*lanes
			y1, y2 := y[f]+fh/2, y[t]+th/2
			x1, x2 := x[f]+fw, x[t]+tw
			dir := 1
			if y2 < y1 {
				dir = -1
			}
			ge.Path = fmt.Sprintf("M%d,%d H%d Q%d,%d %d,%d V%d Q%d,%d %d,%d H%d",
				x1, y1, lane-8, lane, y1, lane, y1+8*dir, y2-8*dir, lane, y2, lane-8, y2, x2+2)
			ge.LX, ge.LY = lane, (y1+y2)/2 // moved right of every lane below
		} else {
			x1, y1 := x[f]+fw/2, y[f]+fh
			x2, y2 := x[t]+tw/2, y[t]-2
			if x1 == x2 {
				ge.Path = fmt.Sprintf("M%d,%d V%d", x1, y1, y2)
			} else {
				my := (y1 + y2) / 2
				ge.Path = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y1, x1, my, x2, my, x2, y2)
			}
			ge.LX, ge.LY = (x1+x2)/2+6, (y1+y2)/2+4
		}
		g.Edges = append(g.Edges, ge)
	}
	// Labels of lane edges go right of the outermost lane, clear of them all.
	labelRoom := 0
	for i := range g.Edges {
		e := &g.Edges[i]
		if e.LX > right {
			e.LX = right + gLane*lanes + 4
			e.LY += 4
			if e.Label != "" {
				labelRoom = max(labelRoom, len(e.Label)*6+8)
			}
		}
	}
	g.Width = right + gLane*lanes + gPad + labelRoom
	g.Height = height
	for v, name := range names {
		w, h := size(v)
		n := views.GraphNode{Name: name, Label: nodeLabelOf(name), X: x[v], Y: y[v], W: w, H: h}
		switch name {
		case startName:
			n.Terminal, n.Label = true, "start"
		case graph.END:
			n.Terminal, n.Label = true, "end"
		default:
			r := runs[name]
			n.Status, n.Iteration = r.Status, r.Iteration
			if n.Status == "" {
				n.Status = "pending"
			}
			for _, info := range d.Nodes {
				if info.Name == name {
					n.Gated, n.Description = info.Gated, info.Description
				}
			}
		}
		g.Nodes = append(g.Nodes, n)
	}
	return g
}

// blocked reports whether a straight edge between layers lf and lt would
// cross a node of a layer in between.
func blocked(layers [][]int, lf, lt int, x []int, size func(int) (int, int), x1, x2 int) bool {
	for l := lf + 1; l < lt; l++ {
		for _, v := range layers[l] {
			w, _ := size(v)
			lo, hi := min(x1, x2), max(x1, x2)
			if x[v] <= hi && x[v]+w >= lo {
				return true
			}
		}
	}
	return false
}

// nodeLabelOf is a node's name as drawn.
func nodeLabelOf(name string) string {
	if len(name) > 30 {
		return name[:29] + "…"
	}
	return name
}
