// Package graph is Gatehouse's workflow engine: typed state graphs with
// plain and conditional edges, cycles, gated nodes, in-node questions,
// per-node retries and timeouts, and one durable checkpoint per node run.
// It is the public API for writing a workflow; package
// github.com/gatehousehq/gatehouse serves workflows written with it (the
// desk, the API, the workers on PostgreSQL).
//
// The engine knows no SQL and no HTTP, and imports nothing but the
// standard library (and a small JSON helper of this module). It persists through the Checkpointer interface:
// MemoryCheckpointer serves tests and examples, Gatehouse's PostgreSQL
// store serves production.
//
// # A workflow
//
// A workflow is a graph over a state type S, built with New and checked by
// Compile:
//
//	type Refund struct {
//		OrderID string   `json:"order_id"`
//		Cents   int      `json:"cents"`
//		Notes   []string `json:"notes"`
//	}
//
//	g, err := graph.New[Refund]("refund").
//		Init(func(input json.RawMessage, opts graph.Options) (Refund, error) { … }).
//		Node("assess", assess).
//		Node("propose", propose).
//		Node("pay", pay, graph.WithRetry(graph.RetryPolicy{Attempts: 3, Backoff: time.Second})).
//		Route("assess", bySize, "propose", "pay").
//		Gate("propose", graph.Gate[Refund]{Kind: "refund", Option: "allowRefund", Artifact: "proposal.md",
//			OnReject: func(r Refund, feedback string, _ int) (Refund, error) {
//				r.Notes = append(r.Notes, feedback)
//				return r, nil
//			}}).
//		Edge("propose", "pay").
//		Edge("pay", graph.END).
//		Compile()
//
// The name is the workflow's name in the API, the desk and the database;
// it must be unique among the workflows a server runs.
//
// # State
//
// S is any type that round-trips through encoding/json: its exported
// fields are the state, stored as JSON in every checkpoint and shown in the
// desk, and nothing else of it survives a restart (unexported fields,
// channels, functions are lost). Init makes the first state from the task's
// input and options, and should return a *ValidationError naming the field
// ("input.order_id") for an input it refuses: the API then answers 422 and
// no task is made. InputSchema and OptionsSchema attach JSON Schemas the
// API and the desk show. Result makes the task's result from the final
// state (default: the state itself).
//
// Nodes receive the state by value and return the next one. A node must
// not keep pointers into a state across runs: the next run may be in
// another process, with the state read back from JSON.
//
// # Nodes, edges and routers
//
// A node is a NodeFunc: it gets a context (cancelled when the task is
// cancelled or the server shuts down, and bounded by WithTimeout), its
// NodeRun and the state, and returns the next state or an error. Nodes run
// one at a time per task.
//
// Edge adds a plain edge; an edge to END completes the task. Route adds a
// conditional edge: after the node, a RouterFunc picks the next node from
// the state among the targets it declares. Compile refuses an edge to an
// unknown node, a node without a way out, and a node that cannot be
// reached from the entry (the first node added, or Entry). A router that
// returns a name it did not declare fails the task with a *RouteError
// instead of guessing. Cycles are allowed: a loop runs its nodes again, as
// the next iteration of each (NodeRun.Iteration, NodeRun.Phase: "draft",
// then "draft:2", "draft:3", …).
//
// # Gates
//
// Gate makes a node gated: after each run of it, its output waits for a
// person, as an interrupt of the gate's Kind carrying the artifact named by
// Gate.Artifact (the reviewer decides on exactly what the node produced).
// The person's decision:
//
//   - approve: the task continues along the node's outgoing edge; the node
//     does not run again. OnApprove, if set, updates the state first.
//   - reject (with feedback): OnReject records the feedback in the state,
//     and the node runs again as its next iteration (or the task goes on at
//     Gate.RejectTo, a revision loop that leads back to the gate), then
//     the gate asks again. Any number of rejections works the same.
//   - edit: OnEdit puts the person's edited artifact in place of the
//     node's output and the task continues as on approval. Without OnEdit,
//     edit is not offered.
//
// Whether a gate asks depends on the task's "gates" option: a task without
// it passes every gate (the workflow runs unattended), unless the gate is
// AlwaysAsks; with it, a gate asks unless its Option is set true
// ({"gates": {"allowRefund": true}} passes the gate above).
//
// A gate's Kind is a short lowercase name ("prd", "refund"; the policy
// file takes any of the form ^[a-z][a-z0-9_]{0,39}$): it is what the desk's inbox filters by, what the approval
// policy file governs (how many approvers, who, deadlines, reminders,
// escalation), what the analytics count and the notifications announce.
// A custom kind needs nothing but its name.
//
// # Questions
//
// A node may ask a person something inside its run with NodeRun.Ask. The
// first time, Ask records the question and returns ErrInterrupted: the
// node should return that error at once. The node run is then abandoned
// (its state changes are dropped, its events kept), the task waits on a
// question interrupt (kind "question", or Question.Kind), and once the
// person responds the node runs again from its start, where the same Ask
// call — matched by its index among the run's Ask calls — returns the
// answer. Answers belong to one node run: when the node completes they are
// cleared, so a later run of the node asks afresh. Raises declares a
// question's custom kind before any is asked.
//
// # Artifacts and events
//
// NodeRun.Artifact records a named document the node produced (a spec, a
// plan, a proposal): versioned per task and name, listed by the API and
// the desk, and shown to the reviewer of a gate that names it. Artifacts of
// a node run that fails or asks a question are not kept. Deliverable names
// the artifact the desk shows first on a task that succeeded.
// NodeRun.Event adds an event of the node's own to the task's timeline
// (kept even when the node then fails).
//
// # Retries and timeouts
//
// A node that returns an error fails its try. WithRetry gives it more
// tries (RetryPolicy: attempts, an exponential backoff with jitter, and
// which errors are transient); an error wrapped with Permanent is never
// retried. WithTimeout bounds each try: the node's context ends and the
// error says the node timed out. A node that runs out of tries fails the
// task with its error recorded; a retry of the task (the API's
// POST /tasks/{id}/retry) runs the failed node again from the last
// checkpoint.
//
// # What is durable, and when a node runs again
//
// After every node run the engine commits one checkpoint — the state, the
// last and next node, the per-node iterations, a pending interrupt —
// atomically with the node run's events and artifacts, before the next
// node starts. A decision is durable before the API answers. So:
//
//   - A crash, a deploy or a lost lease loses at most the node run in
//     flight, which runs again from its start on recovery, on any replica.
//     Nodes that act on the world (pay, merge, send) should be idempotent,
//     e.g. keyed by NodeRun.TaskID and NodeRun.Node.
//   - A node runs again, as a new iteration, after a rejection of its gate
//     or when a cycle comes back to it.
//   - A node runs again from its start, in the same iteration, after it
//     asked a question that was answered, after a failed try that its
//     retry policy retries, and after a retry of the failed task.
//   - An approved gate never runs its node again.
//
// # Versions
//
// Each compiled graph has a definition version (Graph.Version): a hash of
// its nodes, edges, gates and StateVersion. Every task records the version
// it was created under. When a server runs a changed definition, tasks
// stored under another version are flagged (definition_changed in the API;
// logged at start); one standing at a node the new definition no longer
// has refuses decisions and retries with a *NodeGoneError until it is
// forked from an earlier checkpoint or cancelled. Bump StateVersion when a
// change of S makes stored states mean something else.
//
// # Running graphs without a server
//
// Engine runs tasks against a Checkpointer: Create stores a task, Run
// runs it until it waits, succeeds or fails, Decide records a person's
// decision on its interrupt. Gatehouse's server does this with workers and
// leases on PostgreSQL; tests and examples use MemoryCheckpointer in one
// process (see the examples).
package graph
