// Package preflight holds the checks a server logs at start and the admin
// commands print: the waiting and failed tasks that the running workflow
// definitions affect (SPEC §15; gatehouse tasks check), and the users an
// approval policy names who do not exist yet (SPEC §11; gatehouse policy
// show). It reads only, through the small Store interfaces it declares.
//
// It imports graph, auth and postgres (read-model types); never the web
// packages.
package preflight

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// TaskLister lists the waiting and failed tasks with their positions
// (postgres.Store).
type TaskLister interface {
	// StandingTasks lists the waiting and failed tasks, oldest first.
	StandingTasks(ctx context.Context) ([]postgres.StandingTask, error)
}

// Finding is one task the running definitions affect.
type Finding struct {
	// Task is the task as stored.
	Task postgres.StandingTask
	// Running is this binary's version of the task's workflow; empty when
	// the workflow is gone.
	Running string
	// Problem says why the task cannot resume; nil when it can.
	Problem error
}

// Definitions lists the waiting and failed tasks stored under another
// definition version than the running one, and those that cannot resume
// under it, oldest first. One statement; nothing is written.
func Definitions(ctx context.Context, store TaskLister, workflows []graph.Workflow) ([]Finding, error) {
	byName := map[string]graph.Workflow{}
	for _, w := range workflows {
		byName[w.Name()] = w
	}
	tasks, err := store.StandingTasks(ctx)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, t := range tasks {
		f := Finding{Task: t}
		w, ok := byName[t.Workflow]
		if !ok {
			f.Problem = &graph.UnknownWorkflowError{Name: t.Workflow}
			out = append(out, f)
			continue
		}
		f.Running = w.Version()
		pos := t.Position
		if t.Status != graph.StatusWaiting {
			// A failed task resumes at its checkpoint's next node; an
			// interrupt it had is no longer pending.
			pos.InterruptNode, pos.InterruptType = "", ""
		}
		f.Problem = w.Resumable(pos)
		if f.Problem != nil || (t.DefinitionVersion != "" && t.DefinitionVersion != f.Running) {
			out = append(out, f)
		}
	}
	return out, nil
}

// ProblemText is the short form of why a task cannot resume.
func ProblemText(err error) string {
	var ng *graph.NodeGoneError
	var uw *graph.UnknownWorkflowError
	switch {
	case errors.As(err, &ng) && ng.Gate:
		return fmt.Sprintf("node %q is no longer gated", ng.Node)
	case errors.As(err, &ng):
		return fmt.Sprintf("node %q is gone", ng.Node)
	case errors.As(err, &uw):
		return fmt.Sprintf("workflow %q is gone", uw.Name)
	}
	return err.Error()
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// maxStartWarnings bounds the per-task lines logged at start.
const maxStartWarnings = 100

// WarnDefinitions logs, at a server's start, a warning per waiting or
// failed task that the running definitions affect (those that cannot
// resume first, at most 100 lines), and a summary.
func WarnDefinitions(ctx context.Context, store TaskLister, workflows []graph.Workflow, log *slog.Logger) {
	found, err := Definitions(ctx, store, workflows)
	if err != nil {
		log.Warn("checking tasks against the running workflow definitions", "error", err)
		return
	}
	if len(found) == 0 {
		return
	}
	slices.SortStableFunc(found, func(a, b Finding) int {
		return cmp.Compare(boolInt(a.Problem == nil), boolInt(b.Problem == nil))
	})
	blocked := 0
	for i, f := range found {
		resumes := "yes"
		if f.Problem != nil {
			blocked++
			resumes = "no: " + ProblemText(f.Problem)
		}
		if i < maxStartWarnings {
			log.Warn("task stored under another workflow definition", "task", f.Task.ID, "status", f.Task.Status,
				"workflow", f.Task.Workflow, "stored_under", orDash(f.Task.DefinitionVersion), "running", orDash(f.Running),
				"resumes", resumes)
		}
	}
	log.Warn("waiting or failed tasks affected by a workflow definition change (gatehouse tasks check lists them; "+
		"fork those that cannot resume from an earlier step, or cancel them)", "tasks", len(found), "cannot_resume", blocked)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// UserLister lists the users (postgres.Store).
type UserLister interface {
	// Users lists every user.
	Users(ctx context.Context) ([]auth.User, error)
}

// MissingPolicyUsers lists the users the policy names that the database
// does not have (a warning, not an error: SPEC §11).
func MissingPolicyUsers(ctx context.Context, store UserLister, p auth.Policy) ([]string, error) {
	named := p.NamedUsers()
	if len(named) == 0 {
		return nil, nil
	}
	users, err := store.Users(ctx)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, n := range named {
		if strings.HasPrefix(n, "token:") {
			continue
		}
		if !slices.ContainsFunc(users, func(u auth.User) bool { return u.Username == n }) {
			missing = append(missing, n)
		}
	}
	return missing, nil
}

// WarnPolicyUsers logs the users the policy names who do not exist yet.
func WarnPolicyUsers(ctx context.Context, store UserLister, p auth.Policy, log *slog.Logger) {
	missing, err := MissingPolicyUsers(ctx, store, p)
	if err != nil {
		log.Warn("checking the policy's users", "error", err)
		return
	}
	for _, u := range missing {
		log.Warn("the approval policy names a user who does not exist yet", "user", u)
	}
}
