package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gatehousehq/gatehouse/graph"
)

// Draft is the state of the examples' workflows.
type Draft struct {
	Topic    string   `json:"topic"`
	Text     string   `json:"text"`
	Feedback []string `json:"feedback"`
	Audience string   `json:"audience"`
}

func initDraft(input json.RawMessage, _ graph.Options) (Draft, error) {
	var d Draft
	if err := json.Unmarshal(input, &d); err != nil || d.Topic == "" {
		return d, &graph.ValidationError{Field: "input.topic", Message: "is required"}
	}
	return d, nil
}

func write(_ context.Context, run *graph.NodeRun, d Draft) (Draft, error) {
	d.Text = fmt.Sprintf("%s, take %d", d.Topic, run.Iteration)
	if n := len(d.Feedback); n > 0 {
		d.Text += " (" + d.Feedback[n-1] + ")"
	}
	run.Artifact("draft.md", "text/markdown", d.Text)
	return d, nil
}

// start compiles g, creates a task on an engine over memory and runs it
// until it waits or ends.
func start(g graph.Workflow, input string, options string) (*graph.Engine, *graph.Task, graph.Outcome) {
	e, err := graph.NewEngine(graph.NewMemoryCheckpointer(), []graph.Workflow{g})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	t, err := e.Create(ctx, graph.NewTask{Workflow: g.Name(), Input: json.RawMessage(input),
		Options: json.RawMessage(options)})
	if err != nil {
		panic(err)
	}
	out, err := e.Run(ctx, t.ID, 0)
	if err != nil {
		panic(err)
	}
	return e, t, out
}

// decide records a person's decision and runs the task on until it waits
// or ends again.
func decide(e *graph.Engine, t *graph.Task, in graph.DecisionInput) graph.Outcome {
	ctx := context.Background()
	if _, err := e.Decide(ctx, t.ID, in); err != nil {
		panic(err)
	}
	out, err := e.Run(ctx, t.ID, 0)
	if err != nil {
		panic(err)
	}
	return out
}

// A workflow of two nodes in a line, run to its end on an engine over
// memory.
func ExampleNew() {
	g, err := graph.New[Draft]("post").
		Init(initDraft).
		Node("write", write).
		Node("publish", func(_ context.Context, _ *graph.NodeRun, d Draft) (Draft, error) {
			d.Text = strings.ToUpper(d.Text)
			return d, nil
		}).
		Edge("write", "publish").
		Edge("publish", graph.END).
		Result(func(d Draft) any { return d.Text }).
		Compile()
	if err != nil {
		panic(err)
	}
	_, _, out := start(g, `{"topic": "tea"}`, "")
	fmt.Println(out.Status)
	// Output: succeeded
}

// Compile refuses a graph that cannot run, naming every problem.
func ExampleBuilder_Compile() {
	_, err := graph.New[Draft]("broken").
		Init(initDraft).
		Node("write", write).
		Edge("write", "review").
		Compile()
	fmt.Println(err)
	// Output: graph "broken": edge write → review: unknown node "review"
}

// A gate: the task waits with the node's artifact; a rejection runs the
// node again with the feedback, an approval moves on.
func ExampleGate() {
	g, err := graph.New[Draft]("reviewed").
		Init(initDraft).
		Node("write", write).
		Gate("write", graph.Gate[Draft]{Kind: "draft", Option: "allowDraft", Artifact: "draft.md",
			OnReject: func(d Draft, feedback string, _ int) (Draft, error) {
				d.Feedback = append(d.Feedback, feedback)
				return d, nil
			}}).
		Edge("write", graph.END).
		Compile()
	if err != nil {
		panic(err)
	}
	// {"gates": {}}: every gate asks (a task without "gates" runs unattended).
	e, t, out := start(g, `{"topic": "tea"}`, `{"gates": {}}`)
	fmt.Println(out.Status, out.Interrupt.Kind, out.Interrupt.Payload.Artifact.Content)

	out = decide(e, t, graph.DecisionInput{InterruptID: out.Interrupt.ID, Action: graph.ActionReject,
		Feedback: "shorter", DecidedBy: "ann"})
	fmt.Println(out.Status, out.Interrupt.Iteration, out.Interrupt.Payload.Artifact.Content)

	out = decide(e, t, graph.DecisionInput{InterruptID: out.Interrupt.ID, Action: graph.ActionApprove, DecidedBy: "bob"})
	fmt.Println(out.Status)
	// Output:
	// waiting draft tea, take 1
	// waiting 2 tea, take 2 (shorter)
	// succeeded
}

// A question inside a node: Ask interrupts the run; once answered, the
// node runs again from its start and the same call returns the answer.
func ExampleNodeRun_Ask() {
	g, err := graph.New[Draft]("asking").
		Init(initDraft).
		Node("ask", func(_ context.Context, run *graph.NodeRun, d Draft) (Draft, error) {
			a, err := run.Ask(graph.Question{Title: "Audience", Text: "Who is it for?"})
			if err != nil {
				return d, err // graph.ErrInterrupted: the task waits
			}
			d.Audience = a.Text
			return d, nil
		}).
		Edge("ask", graph.END).
		Result(func(d Draft) any { return d.Audience }).
		Compile()
	if err != nil {
		panic(err)
	}
	e, t, out := start(g, `{"topic": "tea"}`, "")
	fmt.Println(out.Status, out.Interrupt.Kind, out.Interrupt.Payload.Question)

	out = decide(e, t, graph.DecisionInput{InterruptID: out.Interrupt.ID, Action: graph.ActionRespond,
		Value: json.RawMessage(`"night owls"`), DecidedBy: "ann"})
	fmt.Println(out.Status)
	// Output:
	// waiting question Who is it for?
	// succeeded
}

// A router picks the next node from the state among the targets it
// declares; a node may loop back.
func ExampleBuilder_Route() {
	g, err := graph.New[Draft]("loop").
		Init(initDraft).
		Node("write", write).
		Route("write", func(d Draft) string {
			if strings.Contains(d.Text, "take 3") {
				return graph.END
			}
			return "write"
		}, "write", graph.END).
		Result(func(d Draft) any { return d.Text }).
		Compile()
	if err != nil {
		panic(err)
	}
	_, _, out := start(g, `{"topic": "tea"}`, "")
	fmt.Println(out.Status)
	// Output: succeeded
}

// Permanent marks an error no retry policy retries.
func ExamplePermanent() {
	err := graph.Permanent(errors.New("card declined"))
	fmt.Println(graph.IsPermanent(err), graph.IsPermanent(errors.New("timeout")), err)
	// Output: true false card declined
}

// Describe reports the graph as data, and Mermaid as a flowchart.
func ExampleGraph_Describe() {
	g, err := graph.New[Draft]("described").
		Init(initDraft).
		Node("write", write).
		Gate("write", graph.Gate[Draft]{Kind: "draft", Option: "allowDraft", Artifact: "draft.md",
			OnReject: func(d Draft, _ string, _ int) (Draft, error) { return d, nil }}).
		Edge("write", graph.END).
		Compile()
	if err != nil {
		panic(err)
	}
	d := g.Describe()
	fmt.Println(d.Name, d.Entry, len(d.Nodes), d.Gates[0].Kind, d.Gates[0].Option, d.GateOptions())
	// Output: described write 1 draft allowDraft [allowDraft]
}
