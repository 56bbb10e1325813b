package graph

import (
	"context"
	"encoding/json"
	"time"
)

// END is the name of the virtual node after the last one; an edge to END
// completes the task.
const END = "__end__"

// TaskStatus is where a task is in its life: queued → running ⇄ waiting →
// succeeded | failed | cancelled.
type TaskStatus string

// The task statuses of SPEC §1.
const (
	StatusQueued    TaskStatus = "queued"
	StatusRunning   TaskStatus = "running"
	StatusWaiting   TaskStatus = "waiting"
	StatusSucceeded TaskStatus = "succeeded"
	StatusFailed    TaskStatus = "failed"
	StatusCancelled TaskStatus = "cancelled"
)

// Terminal reports whether no node of the task will run again without a retry.
func (s TaskStatus) Terminal() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCancelled
}

// Event types of SPEC §7.
const (
	EventTaskCreated      = "task.created"
	EventNodeStarted      = "node.started"
	EventNodeCompleted    = "node.completed"
	EventNodeFailed       = "node.failed"
	EventNodeRetrying     = "node.retrying"
	EventLLMCall          = "llm.call"
	EventInterruptRaised  = "interrupt.raised"
	EventDecisionRecorded = "decision.recorded"
	EventTaskWaiting      = "task.waiting"
	EventTaskCompleted    = "task.completed"
	EventTaskFailed       = "task.failed"
	EventTaskCancelled    = "task.cancelled"
	EventTaskRetried      = "task.retried"
	// EventApprovalRecorded is one approval of an interrupt whose kind
	// needs several distinct approvers, short of (or completing) the number.
	EventApprovalRecorded = "approval.recorded"
	EventArtifactCreated  = "artifact.created"
	// EventTaskForked is seq 1 of a task forked from a checkpoint of
	// another (Engine.Fork).
	EventTaskForked = "task.forked"
)

// Decision actions of SPEC §1.
const (
	ActionApprove = "approve"
	ActionReject  = "reject"
	ActionEdit    = "edit"
	ActionRespond = "respond"
)

// Interrupt statuses.
const (
	InterruptPending   = "pending"
	InterruptResolved  = "resolved"
	InterruptCancelled = "cancelled"
	// InterruptExpired: its deadline passed and the policy acted on it
	// (failed, approved or cancelled the task). Never a rejection.
	InterruptExpired = "expired"
)

// Interrupt types, carried in the payload: a gate approves a node's output,
// a question asks for an answer inside a node run.
const (
	InterruptGate     = "gate"
	InterruptQuestion = "question"
)

// Task is one durable execution of a workflow.
type Task struct {
	ID          string          // a uuid
	Workflow    string          // the workflow's name
	Title       string          // shown in the desk
	Input       json.RawMessage // the input it was created with (a JSON object)
	Options     json.RawMessage // its options (a JSON object)
	Status      TaskStatus      // where it is in its life
	CurrentNode string          // the node it runs or waits at
	Result      json.RawMessage // a succeeded task's result (Builder.Result)
	Error       string          // a failed task's error
	CreatedBy   string          // the principal who created it
	CreatedAt   time.Time       // when it was created
	UpdatedAt   time.Time       // when its row last changed
	CompletedAt *time.Time      // when it ended, if it has
	// Fence is the lease fencing counter a writer must present.
	Fence int64
	// DefinitionVersion is the version of the workflow's definition the
	// task was created (or forked) under (Workflow.Version); empty for a
	// task older than versions.
	DefinitionVersion string
	// ForkedFrom names the checkpoint the task was forked from; nil for a
	// task that was not.
	ForkedFrom *ForkRef
}

// ForkRef is a checkpoint of a task: where a fork started.
type ForkRef struct {
	TaskID string // the source task
	Step   int    // its checkpoint the fork started from
}

// Checkpoint is the persisted position of a task after a node run (or a
// start, an interrupt, a decision): enough to resume it in a fresh process.
type Checkpoint struct {
	TaskID   string          // the task
	Step     int             // 0 for the first, one more per checkpoint
	LastNode string          // the node that ran last ("" before any)
	NextNode string          // the node to run next, or END
	State    json.RawMessage // the state as JSON (without Fields)
	// Fields, when not empty, are top-level members of the state kept
	// apart from State, which then holds the other members only (FullState
	// joins them). Only a FieldCheckpointer gives or is given checkpoints
	// with Fields.
	Fields []StateField
	// Iterations counts completed runs per node.
	Iterations map[string]int
	// Answers holds the answers to questions asked by the current run of
	// NextNode, by call index; cleared when that node run completes.
	Answers []Answer
	// PendingInterrupt is the id of the interrupt the task waits on, if any.
	PendingInterrupt string
	UpdatedAt        time.Time // when it was written
}

// StateField is a large top-level member of a state that travels beside
// Checkpoint.State instead of inside it, so that a step that did not change
// it neither copies, parses, compares nor hashes it again. Its JSON is
// never modified once made: whoever remembers one recognises it again by
// identity (the same slice).
type StateField struct {
	Key  string          // the member's name
	JSON json.RawMessage // its value
}

// FullState is the checkpoint's whole state: State with Fields added.
func (cp *Checkpoint) FullState() (json.RawMessage, error) {
	return joinFields(cp.State, cp.Fields)
}

// Answer is a human's answer to one question within a node run.
type Answer struct {
	Action string `json:"action"` // ActionRespond, or the action taken on a question that offers others
	Text   string `json:"text"`   // the answer
}

// Event is one entry of a task's timeline. Seq is assigned by the
// Checkpointer when the event is committed.
type Event struct {
	Seq        int64           // 1, 2, … per task, assigned at commit
	TaskID     string          // the task
	Type       string          // EventTaskCreated, EventNodeStarted, … or a node's own
	Node       string          // the node it concerns, if any
	Iteration  int             // that node run's iteration
	Phase      string          // Phase(Node, Iteration)
	At         time.Time       // when it happened
	DurationMS *int64          // a node run's duration, on node.completed
	Data       json.RawMessage // a JSON object of the type's details
}

// Artifact is a named document a node run produced. Version is assigned by
// the Checkpointer (1, 2, … per task and name).
type Artifact struct {
	Name        string    // its name ("spec.yaml"); the same name makes a new version
	Version     int       // 1, 2, … per task and name
	Node        string    // the node that produced it
	Iteration   int       // that node run's iteration
	ContentType string    // a MIME type ("text/markdown")
	Content     string    // the document
	CreatedAt   time.Time // when the node run made it
}

// ArtifactRef is an artifact as shown in an interrupt.
type ArtifactRef struct {
	Name        string `json:"name"`         // the artifact's name
	ContentType string `json:"content_type"` // its MIME type
	Content     string `json:"content"`      // the document
}

// InterruptPayload is what a reviewer sees and may do.
type InterruptPayload struct {
	Type     string       `json:"type"`               // InterruptGate or InterruptQuestion
	Title    string       `json:"title"`              // shown to the reviewer
	Artifact *ArtifactRef `json:"artifact"`           // the document decided on, if any
	Question string       `json:"question,omitempty"` // a question's text
	Actions  []string     `json:"actions"`            // the actions it accepts
}

// Interrupt is a pause that waits for a human.
type Interrupt struct {
	ID         string           // a fresh uuid per interrupt
	TaskID     string           // the task waiting on it
	Node       string           // the node that raised it
	Kind       string           // the gate's kind, or the question's ("question")
	Iteration  int              // the raising node run's iteration
	Payload    InterruptPayload // what the reviewer sees and may do
	Status     string           // InterruptPending, InterruptResolved, InterruptCancelled or InterruptExpired
	CreatedAt  time.Time        // when it was raised
	ResolvedAt *time.Time       // when it stopped being pending

	// The interrupt in time (SPEC §11), kept by the store; the engine
	// neither reads nor writes them.
	Deadline        *time.Time
	Overdue         bool       // its deadline passed and on_timeout is none
	EscalationLevel int        // how many escalation steps have added deciders
	ClaimedBy       string     // who holds its claim ("": nobody)
	ClaimExpiresAt  *time.Time // when that claim ends
	// PayloadSHA256 is the SHA-256 of the payload's canonical JSON (RFC
	// 8785), lowercase hex: what a reviewer saw.
	PayloadSHA256 string
	// Timers, set by the engine's raise hook (WithRaiseHook) on a new
	// interrupt, are written with it: its deadline, reminders and
	// escalation steps.
	Timers []Timer
	// Ruled, when the raise hook sets it, decides the interrupt as it is
	// raised (a rule of the policy, SPEC §18): it is written resolved,
	// with its decision, and the task goes on as after any decision — no
	// inbox item, no notification of the raise.
	Ruled *Ruled
	// RuleErrors, set by the raise hook, are rules that failed to
	// evaluate; each becomes an interrupt.rule_error event.
	RuleErrors []RuleError
}

// Ruled is a decision a rule took on an interrupt as it was raised.
type Ruled struct {
	Rule     string // the rule's name
	By       string // the principal: policy:<rule>
	Action   string // approve or reject
	Feedback string
}

// RuleError is a rule that failed to evaluate on an interrupt.
type RuleError struct {
	Rule  string
	Error string
}

// EventRuleError is a rule of the policy that failed to evaluate on an
// interrupt being raised (counted as not holding).
const EventRuleError = "interrupt.rule_error"

// Timer kinds.
const (
	TimerDeadline = "deadline"
	TimerReminder = "reminder"
	TimerEscalate = "escalate"
)

// Timer is a moment at which the policy acts on a pending interrupt
// (SPEC §11): its deadline, a reminder before it, an escalation step.
type Timer struct {
	What string // TimerDeadline, TimerReminder or TimerEscalate
	// Step: 0 for the deadline; a reminder's place in the list and an
	// escalation's level, from 1.
	Step  int
	DueAt time.Time // when it fires
	// Action is the deadline's on_timeout (fail, approve, cancel, none).
	Action string
	// Offset is a reminder's distance before the deadline.
	Offset time.Duration
}

// Decision is a human's answer to an interrupt.
type Decision struct {
	ID          string          // assigned by the Checkpointer
	InterruptID string          // the interrupt answered
	TaskID      string          // its task
	Action      string          // ActionApprove, ActionReject, ActionEdit or ActionRespond
	Feedback    string          // a rejection's feedback
	Value       json.RawMessage // an edit's artifact or a response's answer, as JSON
	DecidedBy   string          // the principal who decided
	DecidedAt   time.Time       // when, assigned by the Checkpointer
	// PayloadSHA256 is the hash of the payload the decision was made on
	// (the interrupt's; a decider that sent one had it checked).
	PayloadSHA256 string
	// Lease, when set, asks Checkpointer.Decide to lease the task it makes
	// runnable, in the same transaction (see Lease).
	Lease *Lease
}

// Lease hands the task a decision makes runnable straight to a worker of
// the replica that took the decision: Checkpointer.Decide leases it to
// Owner for TTL in the decision's own transaction, moving the fence on as
// a claim does, instead of queueing it for any worker to claim — one
// commit and one round trip less before the next node starts.
type Lease struct {
	Owner string        // the worker's owner name
	TTL   time.Duration // how long the lease lasts unless extended
	// Fence is set by Decide to the fence the lease carries; it stays 0
	// when the task was queued instead (it was not waiting).
	Fence int64
	// Snapshot, when the checkpointer sets it with Fence, is the task as
	// the decision left it, read in the decision's own transaction (as
	// FieldCheckpointer.LoadRun reads it, when the checkpointer is one):
	// the run starts from it (Engine.RunFrom) without loading the task
	// again. Under the lease nothing else writes the task.
	Snapshot *Snapshot
}

// Claim is a task leased to a worker by a claim of the task store, with
// the fence its writes must carry.
type Claim struct {
	TaskID string // the task claimed
	Fence  int64  // the fence its writes carry
	// Seq is the task's last event seq when it was claimed: the claim
	// consumed every runnable announcement up to it.
	Seq int64
	// Snapshot is the task as the claim read it under the new fence (what
	// FieldCheckpointer.LoadRun would return), or nil: the run loads the
	// task itself.
	Snapshot *Snapshot
}

// Snapshot is everything Run needs to resume a task.
type Snapshot struct {
	Task       Task       // the task
	Checkpoint Checkpoint // its current checkpoint
	// Interrupt is the interrupt the checkpoint names as pending (whatever
	// its status now), and Decision the decision recorded for it, if any.
	Interrupt *Interrupt
	Decision  *Decision
}

// Commit is one atomic write: a node run's outcome with its events and
// artifacts, the new checkpoint, the task's status, and an interrupt raised.
type Commit struct {
	TaskID string // the task written
	Fence  int64  // the writer's fence; a stale one is refused (ErrLeaseLost)
	// Create inserts the task row (first commit of a task only).
	Create *Task

	Status      TaskStatus      // the task's status after the commit
	CurrentNode string          // the node the task stands at
	Result      json.RawMessage // the result of a succeeded task
	Error       string          // the error of a failed task

	// Checkpoint, when set, replaces the current checkpoint and is appended
	// to the history with Reason (start, node, interrupt, decision).
	Checkpoint *Checkpoint
	Reason     string // why the checkpoint changed: start, node, interrupt, decision

	Events    []Event    // the events to append, in order
	Artifacts []Artifact // the artifacts to store
	Raise     *Interrupt // the interrupt raised, if any

	// Redoable marks a commit the engine would redo identically from the
	// previous checkpoint and the recorded decisions (a node's start, a
	// retry notice). A Checkpointer may make it durable lazily: it must
	// never become durable after a later commit of the same task.
	Redoable bool

	// Quiet: the task row need not be written (Status is running, as the
	// row says, there is no result or error, and the row was written less
	// than quietFor ago); its current node and update time may lag.
	Quiet bool

	// With, on a task's first commit only, is a write of the task's
	// creator (NewTask.With) the Checkpointer makes in the commit's
	// transaction, e.g. the PostgreSQL store's approval request row: a
	// Checkpointer fails a commit whose With it does not know, and may
	// fill in what With asks it to read back.
	With any

	// Before, when set, is an earlier commit of the same task and fence
	// that was held back (a decision applied, while its node ran): it is
	// written first, in the same transaction, its checkpoint appended to
	// the history before this one's and its events given the lower seqs.
	Before *Commit
}

// Checkpointer persists tasks. Implementations must make Commit atomic.
type Checkpointer interface {
	// Load returns the task with its current checkpoint. Errors:
	// ErrTaskNotFound, *StateError for unreadable stored data.
	Load(ctx context.Context, taskID string) (*Snapshot, error)
	// Commit writes c atomically, assigning event seqs and artifact versions
	// in place. Errors: ErrLeaseLost when c.Fence is not the task's fence,
	// ErrTaskNotFound.
	Commit(ctx context.Context, c *Commit) error
	// Interrupt returns one interrupt. Errors: ErrInterruptNotFound.
	Interrupt(ctx context.Context, id string) (*Interrupt, error)
	// ForkPoint returns the task with its checkpoint at step of its
	// history (not the current one), and the interrupt that checkpoint
	// names as pending, whatever its status now (Decision stays nil).
	// Errors: ErrTaskNotFound, ErrCheckpointNotFound.
	ForkPoint(ctx context.Context, taskID string, step int) (*Snapshot, error)
	// Decide records d for its pending interrupt in one transaction: the
	// interrupt becomes resolved, the decision row and ev are written and
	// the task becomes queued, or, with d.Lease, leased to its owner (then
	// d.Lease.Fence is set). It assigns d.ID, d.DecidedAt and ev.Seq.
	// Errors: ErrInterruptNotFound, *ConflictError when the interrupt is
	// not pending.
	Decide(ctx context.Context, d *Decision, ev *Event) error
}

// FieldCheckpointer is a Checkpointer that takes and gives the large
// fields of states apart (Checkpoint.Fields): its Commit accepts
// checkpoints with Fields, and LoadRun is Load for a run of the engine,
// whose checkpoint may come with Fields. Load still gives whole states.
type FieldCheckpointer interface {
	Checkpointer
	// LoadRun is Load for a run: the checkpoint may come with Fields.
	LoadRun(ctx context.Context, taskID string) (*Snapshot, error)
}

// Toucher is a Checkpointer that may leave a running task's row behind
// its checkpoint (Commit.Quiet): TouchTask brings the row's current node
// and update time up to a node that has run for a while, when fence is
// still the task's. The engine calls it from another goroutine.
type Toucher interface {
	// TouchTask moves the task row's current node and update time on.
	TouchTask(ctx context.Context, taskID string, fence int64, node string) error
}

// EventSink receives events after they are committed, in seq order per task.
type EventSink interface {
	// Publish is called with the events of one commit; it should return
	// quickly (the committing run waits for it).
	Publish(events []Event)
}
