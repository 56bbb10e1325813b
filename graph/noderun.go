package graph

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrInterrupted is returned by NodeRun.Ask when the question has no answer
// yet. The node should return it; the task then waits for a human.
var ErrInterrupted = errors.New("node interrupted: waiting for an answer")

// Question is what a node asks a human.
type Question struct {
	// Kind is the interrupt kind (default "question").
	Kind     string
	Title    string       // the interrupt's title (default "Question from <node>")
	Text     string       // the question, for people
	Artifact *ArtifactRef // a document to show with it, if any
	// Actions offered (default: respond).
	Actions []string
}

// NodeRun is one execution of a node: its identity, and the way to ask
// questions and record artifacts and events.
type NodeRun struct {
	TaskID    string          // the task's id
	Workflow  string          // the workflow's name
	Node      string          // the node's name
	Iteration int             // 1 for the node's first run in the task, then 2, 3, … (a rejection, a loop)
	Phase     string          // Phase(Node, Iteration): "write", "write:2", …
	Attempt   int             // the try of this run, from 1 (WithRetry)
	Input     json.RawMessage // the task's input
	Options   Options         // the task's options

	now       func() time.Time
	answers   []Answer
	asked     int
	question  *Question
	artifacts []Artifact
	events    []Event
}

// Ask returns the answer to the call-index'th question of this node run.
// Without one it records q and returns ErrInterrupted; the node is run again
// from its start once the human answers, and this call then returns it.
func (r *NodeRun) Ask(q Question) (Answer, error) {
	i := r.asked
	r.asked++
	if i < len(r.answers) {
		return r.answers[i], nil
	}
	if r.question == nil {
		if q.Kind == "" {
			q.Kind = "question"
		}
		if len(q.Actions) == 0 {
			q.Actions = []string{ActionRespond}
		}
		r.question = &q
	}
	return Answer{}, ErrInterrupted
}

// Artifact records a document this node run produced.
func (r *NodeRun) Artifact(name, contentType, content string) {
	r.artifacts = append(r.artifacts, Artifact{Name: name, ContentType: contentType, Content: content,
		Node: r.Node, Iteration: r.Iteration, CreatedAt: r.now()})
}

// Event records an event of this node run (llm.call, …) with data
// marshalled as JSON.
func (r *NodeRun) Event(typ string, data any) {
	r.events = append(r.events, newEvent(r.TaskID, typ, r.Node, r.Iteration, r.now(), nil, data))
}

func newEvent(taskID, typ, node string, iteration int, at time.Time, dur *time.Duration, data any) Event {
	ev := Event{TaskID: taskID, Type: typ, Node: node, Iteration: iteration, At: at}
	if node != "" {
		ev.Phase = Phase(node, iteration)
	}
	if dur != nil {
		ms := dur.Milliseconds()
		ev.DurationMS = &ms
	}
	switch d := data.(type) {
	case nil:
		ev.Data = emptyData
	case json.RawMessage:
		ev.Data = d
	default:
		b, err := json.Marshal(d)
		if err != nil {
			b, _ = json.Marshal(map[string]string{"marshal_error": err.Error()})
		}
		ev.Data = b
	}
	return ev
}

// emptyData is the data of an event without any: one shared value (event
// data is never modified), not an allocation for each node.started and
// node.completed.
var emptyData = json.RawMessage(`{}`)

// Phase names a node run: the node name for iteration 1, "name:N" after.
func Phase(node string, iteration int) string {
	if iteration <= 1 {
		return node
	}
	return fmt.Sprintf("%s:%d", node, iteration)
}
