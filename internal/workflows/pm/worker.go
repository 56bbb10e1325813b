package pm

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
)

// Job is one dispatch of a step: what the worker must do, for which
// attempt, with the remediation a failed verification asked for.
type Job struct {
	// ID is "<task id>/<step id>/<attempt>": the same for every try of
	// the same dispatch, so a Worker can recognise a repeated Dispatch.
	ID                 string         `json:"id"`
	StepID             string         `json:"step_id"`
	Attempt            int            `json:"attempt"`
	Title              string         `json:"title"`
	Description        string         `json:"description,omitempty"`
	ExpectedOutputs    []string       `json:"expected_outputs"`
	Evidence           []string       `json:"evidence"`
	Capabilities       []string       `json:"capabilities,omitempty"`
	Task               string         `json:"task"`
	AcceptanceCriteria []string       `json:"acceptance_criteria"`
	Preferences        map[string]any `json:"preferences,omitempty"`
	// Remediation is the last failed verification of this step (findings
	// and recommended actions), empty on the first attempt.
	Remediation string `json:"remediation,omitempty"`
	// Timeout is how long the job may take.
	Timeout string `json:"timeout,omitempty"`
}

// Ticket is a dispatched job's claim check.
type Ticket struct {
	JobID        string    `json:"job_id"`
	Target       string    `json:"target"`
	DispatchedAt time.Time `json:"dispatched_at"`
}

// Result statuses a Worker reports.
const (
	ResultCompleted = "completed"
	ResultError     = "error"
)

// StepResult is a job's result, normalised into the state (seed 001's
// last_result).
type StepResult struct {
	JobID   string `json:"job_id"`
	StepID  string `json:"step_id"`
	Attempt int    `json:"attempt"`
	Target  string `json:"target"`
	// Status is completed, or error when the job ran but failed; either
	// way the verifier judges it.
	Status      string    `json:"status"`
	Output      string    `json:"output"`
	Artifacts   []string  `json:"artifacts"`
	CollectedAt time.Time `json:"collected_at"`
}

// Worker executes the steps of a plan: seed 001's worker nodes and
// sandboxes behind the orchestrator's worker API. dispatch_step calls
// Dispatch and collect_result calls Collect, each in its own node run, so a
// restart between them does not dispatch the job again.
//
// Both may be called again with the same job when their node run is
// retried or a replica dies before the node run is checkpointed:
// implementations must treat a known Job.ID as the same job. Errors are
// retried by the node's retry policy unless marked graph.Permanent.
type Worker interface {
	// Dispatch hands job to an execution target.
	Dispatch(ctx context.Context, run *graph.NodeRun, job Job) (Ticket, error)
	// Collect waits for the job's result (honouring ctx: the node's
	// timeout) and returns it.
	Collect(ctx context.Context, run *graph.NodeRun, job Job, t Ticket) (StepResult, error)
}

// LLMWorker is the built-in Worker: it runs each job as one call of the
// pm.worker role to p, made (and recorded as an llm.call event) when the
// result is collected. Dispatch only names the target.
func LLMWorker(p llm.Provider) Worker { return llmWorker{p: p} }

type llmWorker struct{ p llm.Provider }

var _ Worker = llmWorker{}

// Dispatch implements Worker.
func (w llmWorker) Dispatch(_ context.Context, _ *graph.NodeRun, job Job) (Ticket, error) {
	return Ticket{JobID: job.ID, Target: "llm:" + w.p.Name()}, nil
}

// Collect implements Worker.
func (w llmWorker) Collect(ctx context.Context, run *graph.NodeRun, job Job, t Ticket) (StepResult, error) {
	resp, err := agent.AskAnswering(ctx, w.p, run, RoleWorker, workerPrompt(job), job.Title, remediation(job.Remediation))
	if err != nil {
		return StepResult{}, err
	}
	return StepResult{JobID: job.ID, StepID: job.StepID, Attempt: job.Attempt, Target: t.Target, Status: ResultCompleted,
		Output: strings.TrimSpace(resp.Text) + "\n", Artifacts: []string{}}, nil
}

func list(title string, items []string) string {
	if len(items) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString(title + ":\n")
	for _, i := range items {
		fmt.Fprintf(&sb, "- %s\n", i)
	}
	return sb.String() + "\n"
}

func workerPrompt(j Job) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "You are a worker (role %s) executing one step of a project plan (job %s, attempt %d).\n\n", RoleWorker, j.ID, j.Attempt)
	fmt.Fprintf(&sb, "The task:\n---\n%s\n---\n\n", j.Task)
	sb.WriteString(list("Acceptance criteria of the task", j.AcceptanceCriteria))
	fmt.Fprintf(&sb, "Your step: %s (%s)\n", j.Title, j.StepID)
	if j.Description != "" {
		sb.WriteString(j.Description + "\n")
	}
	sb.WriteString("\n")
	sb.WriteString(list("Expected outputs", j.ExpectedOutputs))
	sb.WriteString(list("Evidence to provide", j.Evidence))
	if len(j.Preferences) > 0 {
		sb.WriteString("Preferences: " + prefsText(j.Preferences) + "\n\n")
	}
	if j.Remediation != "" {
		sb.WriteString("An earlier attempt of this step failed verification. Remediate every finding:\n")
		sb.WriteString(j.Remediation)
		sb.WriteString("\n\n")
	}
	sb.WriteString("Do the step. Reply in Markdown: what you did, each expected output, and the evidence.\n")
	return sb.String()
}
