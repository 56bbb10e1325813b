package api

import (
	"encoding/json"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// The JSON shapes of SPEC §7. Times are RFC 3339 with nanoseconds, in UTC.

// Task is the JSON of a task.
type Task struct {
	ID               string          `json:"id"`
	Workflow         string          `json:"workflow"`
	Title            string          `json:"title"`
	Status           string          `json:"status"`
	CurrentNode      string          `json:"current_node"`
	Input            json.RawMessage `json:"input"`
	Options          json.RawMessage `json:"options"`
	PendingInterrupt *Interrupt      `json:"pending_interrupt"`
	Result           json.RawMessage `json:"result"`
	Error            *string         `json:"error"`
	CreatedAt        string          `json:"created_at"`
	UpdatedAt        string          `json:"updated_at"`
	CompletedAt      *string         `json:"completed_at"`
	// DefinitionVersion is the version of the workflow's definition the
	// task was created under ("" before versions); DefinitionChanged says
	// the running binary's differs (SPEC §15).
	DefinitionVersion string `json:"definition_version"`
	DefinitionChanged bool   `json:"definition_changed"`
	// ForkedFrom names the checkpoint a fork started from; null otherwise.
	ForkedFrom *ForkRef `json:"forked_from"`
}

// ForkRef is the JSON of the checkpoint a fork started from.
type ForkRef struct {
	TaskID string `json:"task_id"`
	Step   int    `json:"step"`
}

// Interrupt is the JSON of an interrupt; Task is set in the inbox only.
type Interrupt struct {
	ID        string                 `json:"id"`
	TaskID    string                 `json:"task_id"`
	Node      string                 `json:"node"`
	Kind      string                 `json:"kind"`
	Iteration int                    `json:"iteration"`
	Payload   graph.InterruptPayload `json:"payload"`
	Status    string                 `json:"status"`
	CreatedAt string                 `json:"created_at"`
	// SPEC §11: the interrupt in time.
	Deadline        *string  `json:"deadline"`
	Overdue         bool     `json:"overdue"`
	EscalationLevel int      `json:"escalation_level"`
	ClaimedBy       *string  `json:"claimed_by"`
	ClaimExpiresAt  *string  `json:"claim_expires_at"`
	PayloadSHA256   string   `json:"payload_sha256"`
	Task            *TaskRef `json:"task,omitempty"`
	// Approvals is set on a pending interrupt whose kind needs several
	// distinct approvers.
	Approvals *Approvals `json:"approvals,omitempty"`
}

// Approvals is the approval progress of an interrupt: "1 of 2 approvals".
type Approvals struct {
	Required  int      `json:"required"`
	Approvers []string `json:"approvers"`
	Progress  string   `json:"progress"`
}

// TaskRef names the task of an inbox entry.
type TaskRef struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Workflow string `json:"workflow"`
}

// Event is the JSON of an event.
type Event struct {
	Seq        int64           `json:"seq"`
	TaskID     string          `json:"task_id"`
	Type       string          `json:"type"`
	Node       string          `json:"node"`
	Iteration  int             `json:"iteration"`
	Phase      string          `json:"phase"`
	At         string          `json:"at"`
	DurationMS *int64          `json:"duration_ms,omitempty"`
	Data       json.RawMessage `json:"data"`
}

// Artifact is the JSON of one version of an artifact.
type Artifact struct {
	Name        string `json:"name"`
	Version     int    `json:"version"`
	Node        string `json:"node"`
	Iteration   int    `json:"iteration"`
	ContentType string `json:"content_type"`
	Content     string `json:"content"`
	CreatedAt   string `json:"created_at"`
}

// Decision is the JSON of a decision.
type Decision struct {
	ID          string          `json:"id"`
	InterruptID string          `json:"interrupt_id"`
	TaskID      string          `json:"task_id"`
	Action      string          `json:"action"`
	Feedback    string          `json:"feedback"`
	Value       json.RawMessage `json:"value"`
	DecidedBy   string          `json:"decided_by"`
	DecidedAt   string          `json:"decided_at"`
	// PayloadSHA256 is the hash of the payload decided on (SPEC §11).
	PayloadSHA256 string `json:"payload_sha256"`
}

// Checkpoint is the JSON of a checkpoint of the history; State is set when
// one checkpoint is asked for.
type Checkpoint struct {
	Step       int             `json:"step"`
	Reason     string          `json:"reason"`
	LastNodeID string          `json:"last_node_id"`
	NextNodeID string          `json:"next_node_id"`
	CreatedAt  string          `json:"created_at"`
	State      json.RawMessage `json:"state,omitempty"`
}

// State is the JSON of the current checkpoint.
type State struct {
	State      json.RawMessage `json:"state"`
	LastNodeID string          `json:"last_node_id"`
	Step       int             `json:"step"`
	UpdatedAt  string          `json:"updated_at"`
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func stampPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := stamp(*t)
	return &s
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil // marshals as null
	}
	return b
}

func orObject(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || string(b) == "null" {
		return json.RawMessage(`{}`)
	}
	return b
}

func taskJSON(t *graph.Task, pending *graph.Interrupt) Task {
	out := Task{ID: t.ID, Workflow: t.Workflow, Title: t.Title, Status: string(t.Status), CurrentNode: t.CurrentNode,
		Input: orObject(t.Input), Options: orObject(t.Options), Result: orNull(t.Result),
		CreatedAt: stamp(t.CreatedAt), UpdatedAt: stamp(t.UpdatedAt), CompletedAt: stampPtr(t.CompletedAt)}
	if t.Error != "" {
		e := t.Error
		out.Error = &e
	}
	out.DefinitionVersion = t.DefinitionVersion
	if f := t.ForkedFrom; f != nil {
		out.ForkedFrom = &ForkRef{TaskID: f.TaskID, Step: f.Step}
	}
	if pending != nil {
		itr := interruptJSON(pending)
		out.PendingInterrupt = &itr
	}
	return out
}

func interruptJSON(i *graph.Interrupt) Interrupt {
	p := i.Payload
	if p.Actions == nil {
		p.Actions = []string{}
	}
	out := Interrupt{ID: i.ID, TaskID: i.TaskID, Node: i.Node, Kind: i.Kind, Iteration: i.Iteration, Payload: p,
		Status: i.Status, CreatedAt: stamp(i.CreatedAt), Deadline: stampPtr(i.Deadline), Overdue: i.Overdue,
		EscalationLevel: i.EscalationLevel, PayloadSHA256: i.PayloadSHA256}
	if i.ClaimedBy != "" && i.ClaimExpiresAt != nil {
		holder := i.ClaimedBy
		out.ClaimedBy, out.ClaimExpiresAt = &holder, stampPtr(i.ClaimExpiresAt)
	}
	return out
}

func inboxJSON(e *postgres.InboxEntry) Interrupt {
	out := interruptJSON(&e.Interrupt)
	out.Task = &TaskRef{ID: e.Task.ID, Title: e.Task.Title, Workflow: e.Task.Workflow}
	return out
}

// EventOf is the wire form of an event.
func EventOf(e *graph.Event) Event {
	return Event{Seq: e.Seq, TaskID: e.TaskID, Type: e.Type, Node: e.Node, Iteration: e.Iteration, Phase: e.Phase,
		At: stamp(e.At), DurationMS: e.DurationMS, Data: orObject(e.Data)}
}

func artifactJSON(a *graph.Artifact) Artifact {
	return Artifact{Name: a.Name, Version: a.Version, Node: a.Node, Iteration: a.Iteration, ContentType: a.ContentType,
		Content: a.Content, CreatedAt: stamp(a.CreatedAt)}
}

func decisionJSON(d *graph.Decision) Decision {
	return Decision{ID: d.ID, InterruptID: d.InterruptID, TaskID: d.TaskID, Action: d.Action, Feedback: d.Feedback,
		Value: orNull(d.Value), DecidedBy: d.DecidedBy, DecidedAt: stamp(d.DecidedAt), PayloadSHA256: d.PayloadSHA256}
}

func checkpointJSON(h *postgres.HistoryEntry) Checkpoint {
	return Checkpoint{Step: h.Step, Reason: h.Reason, LastNodeID: h.LastNode, NextNodeID: h.NextNode, CreatedAt: stamp(h.CreatedAt)}
}
