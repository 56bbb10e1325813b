package main

// gatehouse tasks check: the waiting and failed tasks whose workflow
// definition changed since they were stored, and whether each can resume
// under this binary's definitions (SPEC §15). serve logs the same list at
// start.

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gatehousehq/gatehouse/internal/llm/scripted"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/preflight"
	"github.com/gatehousehq/gatehouse/internal/workflows/builtin"
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
	pool, err := postgres.OpenMigrated(ctx, cfg.DatabaseURL, 2, "check tasks")
	if err != nil {
		return err
	}
	defer pool.Close()
	// The structure of the workflows does not depend on the LLM provider:
	// the offline one compiles them without any setting or network.
	workflows, err := builtin.Workflows(scripted.New(nil, nil), cfg.LLM)
	if err != nil {
		return err
	}
	found, err := preflight.Definitions(ctx, postgres.NewStore(pool, postgres.Options{}), workflows)
	if err != nil {
		return err
	}
	if printDefinitionCheck(stdout, found) > 0 {
		return exitStatus{code: 1}
	}
	return nil
}

// printDefinitionCheck writes the findings as a table and returns how
// many tasks cannot resume.
func printDefinitionCheck(w io.Writer, found []preflight.Finding) int {
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
			resumes = "NO: " + preflight.ProblemText(f.Problem)
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

func titleLine(s string) string { return strings.Join(strings.Fields(s), " ") }
