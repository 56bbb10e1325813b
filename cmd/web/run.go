package main

// gatehouse run: start a task (or attach to one) and follow it in the
// terminal, answering its interrupts at a prompt — the whole product
// without a browser, in the manner of seed 003's shell.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/console"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/pgtext"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/runner"
	"github.com/gatehousehq/gatehouse/internal/workflows/builtin"
)

// Exit statuses of run besides 0 (succeeded), 1 (failed, cancelled or an
// error) and 2 (usage).
const exitDetached = 3

const runSynopsis = `run WORKFLOW --input FILE [flags]
       gatehouse run --attach TASK_ID [flags]

Starts a task of WORKFLOW with the JSON input in FILE and follows it: a line
per node run (phase, duration, LLM model and tokens), and at each interrupt
the artifact or the question, with a prompt:

  a, approve             approve the artifact
  r, reject FEEDBACK     reject it; the node runs again with the feedback
  e, edit [FILE]         approve an edited artifact (from FILE, or typed,
                         ending with a line holding only ".")
  w, write FILE          write the artifact to FILE (to edit it)
  any text               the answer, at a question
  s, show                show the interrupt again
  c, cancel              cancel the task
  q, quit (or Ctrl-D)    detach: the task keeps waiting; attach again with
                         gatehouse run --attach TASK_ID (or decide in the browser)

Every gate asks a human unless --auto-approve names its option. The task runs
in this process (one worker, no HTTP) unless a serve replica takes it first;
decisions made elsewhere (the browser, the API) show up here too.

Decisions at the prompt go through the approval policy that serve enforces,
as the --as principal (default cli:$USER, an admin):
  GATEHOUSE_SOD_KINDS (default merge): the task's creator may not approve
    these kinds. The refusal says why and the prompt stays: reject instead,
    or leave it to another approver (the browser, or gatehouse run --attach
    TASK_ID --as NAME), or allow it with GATEHOUSE_SOD_KINDS=none.
  GATEHOUSE_APPROVALS (e.g. prd=2): an approval of such a kind is recorded
    ("1 of 2 approvals"); the task waits for the other approvers and is
    followed here until it moves on (Ctrl-C leaves it waiting).

Exit status: 0 succeeded, 1 failed or cancelled, 2 usage, 3 detached.

Flags:`

// stringList is a repeatable, comma-separated flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

type runFlags struct {
	workflow    string
	input       string
	title       string
	options     string
	autoApprove stringList
	attach      string
	as          string
}

func parseRunFlags(args []string, getenv func(string) string, stdout io.Writer) (runFlags, error) {
	var f runFlags
	fs := newFlags("run", runSynopsis, stdout)
	fs.StringVar(&f.input, "input", "", "JSON `FILE` holding the task's input (see GET /api/v1/workflows for each schema)")
	fs.StringVar(&f.title, "title", "", "task title (default: an excerpt of the input)")
	fs.StringVar(&f.options, "options", "", "task options as a JSON object, e.g. '{\"max_turns\":3}' (its \"gates\", if any, replace --auto-approve)")
	fs.Var(&f.autoApprove, "auto-approve", "gate `OPTIONS` approved without asking (comma-separated, e.g. allowPrd,allowPlan), or all")
	fs.StringVar(&f.attach, "attach", "", "follow the existing task `TASK_ID` instead of starting one")
	fs.StringVar(&f.as, "as", "", "`NAME` that decides at the prompt, in the audit trail: an admin under the approval policy (default cli:$USER)")
	// Flags may follow WORKFLOW: parse again after each positional argument.
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return f, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case f.attach != "" && len(pos) > 0:
		return f, usageError{"run --attach takes no WORKFLOW"}
	case f.attach != "" && (f.input != "" || f.options != "" || len(f.autoApprove) > 0 || f.title != ""):
		return f, usageError{"run --attach follows a task as it is: --input, --title, --options and --auto-approve do not apply"}
	case f.attach != "":
		if !graph.ValidID(f.attach) {
			return f, usageError{fmt.Sprintf("run --attach %q: want a task id (a uuid)", f.attach)}
		}
	case len(pos) == 0:
		return f, usageError{"run needs a WORKFLOW and --input FILE (try gatehouse run --help)"}
	case len(pos) > 1:
		return f, usageError{fmt.Sprintf("run takes one WORKFLOW, got %q", strings.Join(pos, " "))}
	case f.input == "":
		return f, usageError{"run needs --input FILE: the task's input as a JSON object"}
	case pgtext.Problem(f.title) != "":
		return f, usageError{"--title " + pgtext.Problem(f.title)}
	default:
		f.workflow = pos[0]
	}
	if f.as == "" {
		f.as = "cli"
		if u := getenv("USER"); u != "" {
			f.as = "cli:" + u
		}
	}
	return f, nil
}

// taskOptions builds the options object: --options, with "gates" from
// --auto-approve unless it has its own.
func (f runFlags) taskOptions(w graph.Workflow) (json.RawMessage, error) {
	opts := map[string]any{}
	if f.options != "" {
		dec := json.NewDecoder(strings.NewReader(f.options))
		dec.UseNumber()
		if err := dec.Decode(&opts); err != nil || opts == nil {
			return nil, usageError{"--options: want a JSON object such as '{\"max_turns\": 3}'"}
		}
		if err := storable("--options:", "options", []byte(f.options)); err != nil {
			return nil, err
		}
	}
	if _, ok := opts["gates"]; !ok {
		gates := map[string]bool{}
		known := w.Describe().GateOptions()
		for _, o := range f.autoApprove {
			if o == "all" {
				for _, k := range known {
					gates[k] = true
				}
				continue
			}
			if !slices.Contains(known, o) {
				return nil, usageError{fmt.Sprintf("--auto-approve %s: workflow %s has gate options %s", o, w.Name(), listOr(known))}
			}
			gates[o] = true
		}
		opts["gates"] = gates
	}
	return json.Marshal(opts)
}

func listOr(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

func readInput(path string) (json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError{"--input: " + err.Error()}
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, usageError{fmt.Sprintf("--input %s: not JSON: %v", path, err)}
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, usageError{fmt.Sprintf("--input %s: want a JSON object", path)}
	}
	if err := storable("--input "+path+":", "input", b); err != nil {
		return nil, err
	}
	return b, nil
}

// storable refuses a flag's JSON with a string that PostgreSQL cannot
// store (U+0000, invalid UTF-8: pgtext), naming the field under root
// ("--input in.json: input.description contains a NUL character…").
func storable(flag, root string, doc []byte) error {
	field, problem := pgtext.JSON(doc)
	if problem == "" {
		return nil
	}
	if field != "" {
		root += "." + field
	}
	return usageError{flag + " " + root + " " + problem}
}

func cmdRun(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	f, err := parseRunFlags(args, getenv, stdout)
	if err != nil {
		return err
	}
	if getenv("GATEHOUSE_LOG_LEVEL") == "" {
		// The terminal is for the task; logs only when something is wrong.
		getenv = withEnv(getenv, "GATEHOUSE_LOG_LEVEL", "warn")
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := cfg.Logger(stderr)
	provider, err := builtin.Provider(cfg.LLM, log.With("component", "llm"))
	if err != nil {
		return settingError(err)
	}
	workflows, err := builtin.Workflows(provider, cfg.LLM)
	if err != nil {
		return err
	}

	// Everything about the command line is checked before the database.
	var input, options json.RawMessage
	if f.attach == "" {
		w := findWorkflow(workflows, f.workflow)
		if w == nil {
			names := make([]string, 0, len(workflows))
			for _, w := range workflows {
				names = append(names, w.Name())
			}
			return usageError{fmt.Sprintf("unknown workflow %q (workflows: %s)", f.workflow, strings.Join(names, ", "))}
		}
		if input, err = readInput(f.input); err != nil {
			return err
		}
		if options, err = f.taskOptions(w); err != nil {
			return err
		}
	}

	pool, err := postgres.OpenMigrated(ctx, cfg.DatabaseURL, 8, "run")
	if err != nil {
		return err
	}
	defer pool.Close()
	store := postgres.NewStore(pool, postgres.Options{})
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	// No background notifier: announcements go out with each commit, and
	// nothing is left to send when the command returns.
	hub := live.NewHub(cfg.DatabaseURL, store, log.With("component", "live"))
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(bg) }()
	defer func() { stopBG(); <-hubDone }()
	engine, err := graph.NewEngine(store, workflows, graph.WithLogger(log), graph.WithSink(hub),
		graph.WithRaiseHook(cfg.Auth.Policy.Raise))
	if err != nil {
		return err
	}

	var task *graph.Task
	if f.attach != "" {
		if task, err = store.Task(ctx, f.attach); err != nil {
			if errors.Is(err, graph.ErrTaskNotFound) {
				return usageError{fmt.Sprintf("run --attach %s: no such task", f.attach)}
			}
			return err
		}
	} else {
		task, err = engine.Create(ctx, graph.NewTask{Workflow: f.workflow, Title: f.title, Input: input, Options: options, CreatedBy: f.as})
		var ve *graph.ValidationError
		if errors.As(err, &ve) {
			return usageError{fmt.Sprintf("%s: %s", f.input, ve.Error())}
		}
		if err != nil {
			return err
		}
	}

	// One worker that claims only this task; it hands the lease back when
	// we leave, so a serve replica (or a later run --attach) continues.
	exec := runner.New(oneTask{Store: store, id: task.ID}, engine, runner.Config{Owner: runner.OwnerName(), Workers: 1,
		LeaseTTL: cfg.LeaseTTL, MaxSweep: 5 * time.Second, Logger: log.With("component", "runner")})
	hub.OnRunnable(func(id string, seq int64) {
		if id == "" || id == task.ID {
			exec.WakeFor(id, seq)
		}
	})
	select {
	case <-hub.Ready():
	case <-time.After(10 * time.Second):
		log.Warn("not listening for notifications yet; following by polling")
	case <-ctx.Done():
	}
	exec.Start()
	defer func() {
		grace, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
		defer cancel()
		exec.Stop(grace)
	}()

	// The prompt decides through the policy the API and the desk enforce.
	decider := auth.NewDecider(engine, store, cfg.Auth.Policy, log.With("component", "auth"), builtin.DeciderOptions(exec)...)
	verb := "started"
	if f.attach != "" {
		verb = "attached to"
	}
	fmt.Fprintf(stdout, "%s task %s · %s · %q (%s)\n", verb, task.ID, task.Workflow, task.Title, task.Status)
	out, err := console.Follow(ctx, console.Config{Task: task, Decider: decider, Store: store, Follow: hub.Follow,
		As: console.Principal(f.as), In: stdin, Out: stdout})
	switch {
	case err != nil:
		return err
	case out == console.Detached:
		return exitStatus{code: exitDetached}
	case out != console.Succeeded:
		return exitStatus{code: 1}
	}
	return nil
}

// oneTask is the store as the runner sees it, claiming one task only.
type oneTask struct {
	*postgres.Store
	id string
}

func (o oneTask) Claim(ctx context.Context, owner string, _ int, ttl time.Duration) ([]graph.Claim, error) {
	return o.ClaimTask(ctx, owner, o.id, ttl)
}

func findWorkflow(ws []graph.Workflow, name string) graph.Workflow {
	for _, w := range ws {
		if w.Name() == name {
			return w
		}
	}
	return nil
}

func withEnv(getenv func(string) string, name, value string) func(string) string {
	return func(k string) string {
		if k == name {
			return value
		}
		return getenv(k)
	}
}

// exitStatus ends a command with a status; what to say was said.
type exitStatus struct{ code int }

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", e.code) }
