package main

// gatehouse tasks check: the waiting and failed tasks whose workflow
// definition changed since they were stored, and whether each can resume
// under this binary's definitions (SPEC §15). serve logs the same list at
// start.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm/scripted"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

const tasksSynopsis = `tasks check

Lists the waiting and failed tasks that this binary's workflow definitions
affect: those stored under another definition version of their workflow (a
hash of its nodes, edges, gates and state version), and any that cannot
resume here because the node they stand at (or wait on) is gone from the
workflow, is no longer gated, or the workflow itself is gone. Each line says
whether the task can resume; one that cannot refuses decisions and retries
with 409 until it is forked from an earlier step or cancelled.

Exit status: 0 when every listed task can resume (or none is listed), 1
when at least one cannot, 2 for a wrong command line or setting. Reads only.`

func cmdTasks(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := newFlags("tasks", tasksSynopsis, stdout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() == 0:
		return usageError{"tasks needs a subcommand: check (try gatehouse tasks --help)"}
	case fs.Arg(0) != "check":
		return usageError{fmt.Sprintf("tasks %q: want check", fs.Arg(0))}
	case fs.NArg() > 1:
		return usageError{fmt.Sprintf("tasks check takes no arguments, got %q", fs.Arg(1))}
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	pool, err := openMigrated(ctx, cfg.DatabaseURL, 2, "check tasks")
	if err != nil {
		return err
	}
	defer pool.Close()
	// The structure of the workflows does not depend on the LLM provider:
	// the offline one compiles them without any setting or network.
	workflows, err := buildWorkflows(scripted.New(nil, nil), cfg.LLM)
	if err != nil {
		return err
	}
	found, err := checkDefinitions(ctx, postgres.NewStore(pool), workflows)
	if err != nil {
		return err
	}
	if printDefinitionCheck(stdout, found) > 0 {
		return exitStatus{code: 1}
	}
	return nil
}

// definitionFinding is one task the running definitions affect.
type definitionFinding struct {
	Task postgres.StandingTask
	// Running is this binary's version of the task's workflow; empty when
	// the workflow is gone.
	Running string
	// Problem says why the task cannot resume; nil when it can.
	Problem error
}

// checkDefinitions lists the waiting and failed tasks stored under another
// definition version than the running one, and those that cannot resume
// under it, oldest first. One statement; nothing is written.
func checkDefinitions(ctx context.Context, store *postgres.Store, workflows []graph.Workflow) ([]definitionFinding, error) {
	byName := map[string]graph.Workflow{}
	for _, w := range workflows {
		byName[w.Name()] = w
	}
	tasks, err := store.StandingTasks(ctx)
	if err != nil {
		return nil, err
	}
	var out []definitionFinding
	for _, t := range tasks {
		f := definitionFinding{Task: t}
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

// printDefinitionCheck writes the findings as a table and returns how
// many tasks cannot resume.
func printDefinitionCheck(w io.Writer, found []definitionFinding) int {
	if len(found) == 0 {
		fmt.Fprintln(w, "every waiting and failed task runs under its workflow's current definition")
		return 0
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATUS\tWORKFLOW\tSTORED UNDER\tRUNNING\tRESUMES\tTITLE")
	blocked := 0
	for _, f := range found {
		resumes := "yes"
		if f.Problem != nil {
			blocked++
			resumes = "NO: " + problemText(f.Problem)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Task.ID, f.Task.Status, f.Task.Workflow,
			orDash(f.Task.DefinitionVersion), orDash(f.Running), resumes, titleLine(f.Task.Title))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d task(s) stored under another definition or unable to resume; %d cannot resume", len(found), blocked)
	if blocked > 0 {
		fmt.Fprint(w, " (fork each from an earlier step, or cancel it)")
	}
	fmt.Fprintln(w)
	return blocked
}

// problemText is the short form of why a task cannot resume.
func problemText(err error) string {
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

func titleLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// maxStartWarnings bounds the per-task lines serve logs at start.
const maxStartWarnings = 100

// warnDefinitions logs, at serve's start, a warning per waiting or failed
// task that the running definitions affect (those that cannot resume
// first, at most 100 lines), and a summary.
func warnDefinitions(ctx context.Context, store *postgres.Store, workflows []graph.Workflow, log *slog.Logger) {
	found, err := checkDefinitions(ctx, store, workflows)
	if err != nil {
		log.Warn("checking tasks against the running workflow definitions", "error", err)
		return
	}
	if len(found) == 0 {
		return
	}
	slices.SortStableFunc(found, func(a, b definitionFinding) int {
		return cmp.Compare(boolInt(a.Problem == nil), boolInt(b.Problem == nil))
	})
	blocked := 0
	for i, f := range found {
		resumes := "yes"
		if f.Problem != nil {
			blocked++
			resumes = "no: " + problemText(f.Problem)
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
