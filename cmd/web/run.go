package main

// gatehouse run: start a task (or attach to one) and follow it in the
// terminal, answering its interrupts at a prompt — the whole product
// without a browser, in the manner of seed 003's shell.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/live"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/runner"
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
	return b, nil
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
	log := newLogger(cfg, stderr)
	provider, err := newProvider(cfg.LLM, log.With("component", "llm"))
	if err != nil {
		return err
	}
	workflows, err := buildWorkflows(provider, cfg.LLM)
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

	pool, err := openMigrated(ctx, cfg.DatabaseURL, 8, "run")
	if err != nil {
		return err
	}
	defer pool.Close()
	store := postgres.NewStore(pool)
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	// No background notifier: announcements go out with each commit, and
	// nothing is left to send when the command returns.
	hub := live.NewHub(cfg.DatabaseURL, store, log.With("component", "live"))
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(bg) }()
	defer func() { stopBG(); <-hubDone }()
	engine, err := graph.NewEngine(store, workflows, graph.WithLogger(log), graph.WithSink(hub),
		graph.WithRaiseHook(cfg.Auth.Policy.Schedule))
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
	exec := runner.New(oneTask{Store: store, id: task.ID}, engine, runner.Config{Owner: replicaName(), Workers: 1,
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
	decider := newDecider(cfg, engine, store, exec, log)
	t := &terminal{ctx: ctx, decider: decider, store: store, task: task, as: consolePrincipal(f.as),
		out: stdout, lines: readLines(stdin), echo: !isTerminal(stdin), started: time.Now()}
	verb := "started"
	if f.attach != "" {
		verb = "attached to"
	}
	t.printf("%s task %s · %s · %q (%s)\n", verb, task.ID, task.Workflow, task.Title, task.Status)
	return t.follow(hub)
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

// isTerminal reports whether r is a character device (a terminal).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// readLines delivers stdin's lines; the channel closes at end of input.
func readLines(r io.Reader) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}

// terminal follows one task and talks to the person at the keyboard.
type terminal struct {
	ctx     context.Context
	decider *auth.Decider
	store   *postgres.Store
	task    *graph.Task
	// as decides and cancels at the prompt.
	as    auth.Principal
	out   io.Writer
	lines <-chan string
	// echo repeats the lines read when they do not come from a terminal
	// (a script, a pipe), so the transcript reads like a session.
	echo    bool
	eof     bool
	started time.Time

	// itr is the interrupt the prompt is about (nil: no prompt).
	itr *graph.Interrupt
	// awaiting is the interrupt this terminal approved that waits for
	// more approvers ("": none); the prompt is closed meanwhile.
	awaiting string
	// mode is what the next line is: "" a command, "feedback" the
	// rejection's feedback, "edit" a line of the edited artifact.
	mode    string
	editBuf []string
	// llm is the last llm.call of the node run in progress, by phase.
	llm map[string]string
}

func (t *terminal) printf(format string, args ...any) { fmt.Fprintf(t.out, format, args...) }

// follow prints the task's events and prompts at its interrupts until the
// task ends (exit 0 or 1) or the person detaches (exit 3).
func (t *terminal) follow(hub *live.Hub) error {
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	events := make(chan graph.Event, 64)
	followErr := make(chan error, 1)
	go func() {
		_, err := hub.Follow(ctx, t.task.ID, 0, func(ev graph.Event) error {
			select {
			case events <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		followErr <- err
	}()
	t.llm = map[string]string{}
	for {
		var lines <-chan string
		if t.itr != nil {
			lines = t.lines
		}
		select {
		case <-t.ctx.Done():
			return t.detach("interrupted")
		case err := <-followErr:
			if t.ctx.Err() != nil {
				return t.detach("interrupted")
			}
			return fmt.Errorf("following task %s: %w", t.task.ID, err)
		case ev := <-events:
			if done, err := t.event(ev); done {
				return err
			}
		case line, ok := <-lines:
			if !ok {
				t.eof = true
				t.printf("\n")
				return t.detach("end of input")
			}
			if t.echo {
				t.printf("%s\n", line)
			}
			if done, err := t.line(line); done {
				return err
			}
		}
	}
}

// event prints one event; done reports that the command is over.
func (t *terminal) event(ev graph.Event) (done bool, err error) {
	var data map[string]any
	_ = json.Unmarshal(ev.Data, &data)
	str := func(k string) string { s, _ := data[k].(string); return s }
	num := func(k string) int64 { n, _ := data[k].(float64); return int64(n) }
	switch ev.Type {
	case graph.EventNodeStarted:
		t.printf("  ▸ %s\n", ev.Phase)
	case graph.EventLLMCall:
		info := str("model")
		if pt, rt := num("prompt_tokens"), num("reply_tokens"); pt > 0 || rt > 0 {
			info += fmt.Sprintf(", %d→%d tokens", pt, rt)
		}
		if e := str("error"); e != "" {
			t.printf("    LLM %s failed after %s: %s\n", str("role"), ms(num("duration_ms")), e)
		}
		t.llm[ev.Phase] = info
	case graph.EventNodeCompleted:
		var d int64
		if ev.DurationMS != nil {
			d = *ev.DurationMS
		}
		line := fmt.Sprintf("  ✓ %-28s %8s", ev.Phase, ms(d))
		if info := t.llm[ev.Phase]; info != "" {
			line += "  " + info
			delete(t.llm, ev.Phase)
		}
		t.printf("%s\n", line)
	case graph.EventNodeRetrying:
		t.printf("  ↻ %s: attempt %d failed (%s); retrying\n", ev.Phase, num("attempt"), str("error"))
	case graph.EventNodeFailed:
		t.printf("  ✗ %s: %s\n", ev.Phase, str("error"))
	case graph.EventArtifactCreated:
		if by := str("edited_by"); by != "" {
			t.printf("  ✎ %s edited by %s\n", str("name"), by)
		}
	case graph.EventTaskWaiting:
		itr, err := t.store.Interrupt(t.ctx, str("interrupt_id"))
		if err != nil {
			return true, err
		}
		if itr.Status == graph.InterruptPending {
			t.itr, t.mode, t.editBuf, t.awaiting = itr, "", nil, ""
			t.show()
			if t.eof {
				return true, t.detach("end of input")
			}
			t.prompt()
		}
	case graph.EventApprovalRecorded:
		// An approval of several needed, here or elsewhere; an open prompt
		// (attached to a task someone approved already) is asked again.
		open := t.itr != nil && t.mode == ""
		if open {
			t.printf("\n")
		}
		n, req := num("approvals"), num("required")
		t.printf("  ● approve (%s) by %s\n", auth.Progress(int(n), int(req)), str("approved_by"))
		if open {
			t.prompt()
		}
	case graph.EventDecisionRecorded:
		what := str("action")
		switch {
		case str("feedback") != "":
			what += ": " + str("feedback")
		}
		by := str("decided_by")
		if as, ok := data["approvers"].([]any); ok && len(as) > 1 {
			names := make([]string, 0, len(as))
			for _, a := range as {
				if s, ok := a.(string); ok {
					names = append(names, s)
				}
			}
			by = strings.Join(names, ", ")
		}
		t.printf("  ● %s by %s\n", what, by)
		if t.itr != nil && t.itr.ID == str("interrupt_id") {
			t.itr, t.mode = nil, ""
		}
		if t.awaiting == str("interrupt_id") {
			t.awaiting = ""
		}
	case graph.EventTaskRetried:
		t.printf("  ↻ retried by %s\n", str("retried_by"))
	case graph.EventTaskCompleted:
		return true, t.finish(graph.StatusSucceeded, "")
	case graph.EventTaskFailed:
		return true, t.finish(graph.StatusFailed, str("error"))
	case graph.EventTaskCancelled:
		return true, t.finish(graph.StatusCancelled, str("cancelled_by"))
	}
	return false, nil
}

func ms(d int64) string {
	return (time.Duration(d) * time.Millisecond).Round(time.Millisecond).String()
}

// show prints the interrupt: its title, artifact or question, and actions.
func (t *terminal) show() {
	itr := t.itr
	p := itr.Payload
	t.printf("\n── %s · %s · %s, iteration %d\n", itr.Kind, p.Title, itr.Node, itr.Iteration)
	if p.Question != "" {
		t.printf("\n%s\n", indent(p.Question, "  "))
	}
	if a := p.Artifact; a != nil {
		t.printf("\n───── %s (%s) ─────\n%s\n───── end of %s ─────\n", a.Name, a.ContentType, strings.TrimRight(a.Content, "\n"), a.Name)
	}
	t.printf("\n%s\n", t.help())
}

func (t *terminal) help() string {
	var parts []string
	acts := t.itr.Payload.Actions
	if slices.Contains(acts, graph.ActionRespond) {
		parts = append(parts, "type your answer")
	}
	if slices.Contains(acts, graph.ActionApprove) {
		parts = append(parts, "a(pprove)")
	}
	if slices.Contains(acts, graph.ActionReject) {
		parts = append(parts, "r(eject) FEEDBACK")
	}
	if slices.Contains(acts, graph.ActionEdit) {
		parts = append(parts, "e(dit) [FILE]", "w(rite) FILE")
	}
	parts = append(parts, "s(how)", "c(ancel)", "q(uit)")
	return strings.Join(parts, " · ")
}

func (t *terminal) prompt() {
	switch t.mode {
	case "feedback":
		t.printf("feedback> ")
	case "edit":
	default:
		t.printf("%s> ", t.itr.Kind)
	}
}

// line handles one line typed at the prompt.
func (t *terminal) line(line string) (done bool, err error) {
	switch t.mode {
	case "feedback":
		t.mode = ""
		if strings.TrimSpace(line) == "" {
			t.printf("not rejected: a rejection needs feedback\n")
			t.prompt()
			return false, nil
		}
		return t.decide(graph.DecisionInput{Action: graph.ActionReject, Feedback: line})
	case "edit":
		if line != "." {
			t.editBuf = append(t.editBuf, line)
			return false, nil
		}
		t.mode = ""
		return t.decideEdit(strings.Join(t.editBuf, "\n") + "\n")
	}
	trimmed := strings.TrimSpace(line)
	cmd, rest, _ := strings.Cut(trimmed, " ")
	rest = strings.TrimSpace(rest)
	acts := t.itr.Payload.Actions
	offers := func(a string) bool { return slices.Contains(acts, a) }
	switch strings.ToLower(cmd) {
	case "":
		t.prompt()
		return false, nil
	case "q", "quit", "exit":
		return true, t.detach("")
	case "?", "h", "help":
		t.printf("%s\n", t.help())
	case "s", "show":
		t.show()
	case "c", "cancel":
		if err := t.store.Cancel(t.ctx, t.task.ID, t.as.Name); err != nil {
			t.printf("not cancelled: %v\n", err)
			break
		}
		t.itr, t.mode = nil, ""
		return false, nil // task.cancelled ends the command
	case "a", "approve", "ok", "y", "yes":
		if offers(graph.ActionApprove) {
			return t.decide(graph.DecisionInput{Action: graph.ActionApprove})
		}
		if offers(graph.ActionRespond) {
			return t.decide(graph.DecisionInput{Action: graph.ActionRespond, Value: jsonString(line)})
		}
		t.printf("this interrupt cannot be approved\n")
	case "r", "reject", "n", "no":
		if !offers(graph.ActionReject) {
			if offers(graph.ActionRespond) {
				return t.decide(graph.DecisionInput{Action: graph.ActionRespond, Value: jsonString(line)})
			}
			t.printf("this interrupt cannot be rejected\n")
			break
		}
		if rest == "" {
			t.mode = "feedback"
			t.printf("What should change? (one line)\n")
			t.prompt()
			return false, nil
		}
		return t.decide(graph.DecisionInput{Action: graph.ActionReject, Feedback: rest})
	case "e", "edit":
		if !offers(graph.ActionEdit) {
			if offers(graph.ActionRespond) {
				return t.decide(graph.DecisionInput{Action: graph.ActionRespond, Value: jsonString(line)})
			}
			t.printf("this interrupt cannot be edited\n")
			break
		}
		if rest != "" {
			b, err := os.ReadFile(rest)
			if err != nil {
				t.printf("cannot read the edit: %v\n", err)
				break
			}
			return t.decideEdit(string(b))
		}
		t.mode, t.editBuf = "edit", nil
		t.printf("Type the edited artifact; end with a line holding only \".\"\n")
		return false, nil
	case "w", "write":
		a := t.itr.Payload.Artifact
		switch {
		case a == nil && offers(graph.ActionRespond):
			return t.decide(graph.DecisionInput{Action: graph.ActionRespond, Value: jsonString(line)})
		case a == nil:
			t.printf("this interrupt has no artifact\n")
		case rest == "":
			t.printf("write needs a FILE\n")
		default:
			if err := os.WriteFile(rest, []byte(a.Content), 0o644); err != nil {
				t.printf("cannot write: %v\n", err)
			} else {
				t.printf("wrote %s (%d bytes); edit it, then: e %s\n", rest, len(a.Content), rest)
			}
		}
	default:
		if offers(graph.ActionRespond) {
			return t.decide(graph.DecisionInput{Action: graph.ActionRespond, Value: jsonString(trimmed)})
		}
		t.printf("unknown command %q; %s\n", cmd, t.help())
	}
	t.prompt()
	return false, nil
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(strings.TrimSpace(s))
	return b
}

func (t *terminal) decideEdit(content string) (bool, error) {
	if strings.TrimSpace(content) == "" {
		t.printf("not edited: the artifact is empty\n")
		t.prompt()
		return false, nil
	}
	return t.decide(graph.DecisionInput{Action: graph.ActionEdit, Value: jsonString(content)})
}

// decide records a decision on the interrupt at the prompt through the
// Decider, as the API and the desk do. A refusal (the approval policy, a
// validation) is shown and the prompt stays; a conflict means someone
// decided first; one approval of several needed leaves the task waiting
// for the others, followed here until it moves on.
func (t *terminal) decide(in graph.DecisionInput) (bool, error) {
	in.InterruptID = t.itr.ID
	out, err := t.decider.DecideOn(t.ctx, t.as, auth.Subject{Task: t.task, Interrupt: t.itr}, in)
	var fe *auth.ForbiddenError
	var ve *graph.ValidationError
	var ce *graph.ConflictError
	switch {
	case errors.As(err, &fe):
		t.printf("refused: %s\n", oneLine(fe.Reason))
		if t.separatedDuty(in.Action) {
			t.printf("%s", t.sodHint())
		}
		t.prompt()
		return false, nil
	case errors.As(err, &ve):
		t.printf("refused: %s\n", ve.Message)
		t.prompt()
		return false, nil
	case errors.As(err, &ce):
		t.printf("someone else decided first (the interrupt is %s)\n", ce.Status)
		t.itr = nil
		return false, nil
	case err != nil:
		return true, err
	}
	if out.Pending() {
		more := "another approver"
		if n := out.Required - len(out.Approvers); n > 1 {
			more = fmt.Sprintf("%d more approvers", n)
		}
		t.printf("%s recorded; waiting for %s\n", out.Progress(), more)
		// The task keeps waiting; the decision that moves it on (in the
		// browser, or another run --attach) arrives as events.
		t.awaiting, t.itr, t.mode = t.itr.ID, nil, ""
		return false, nil
	}
	// No prompt until the next interrupt: lines typed ahead wait for it.
	t.itr, t.mode = nil, ""
	return false, nil
}

// separatedDuty reports whether an action refused at the prompt was an
// approval separation of duties forbids this principal.
func (t *terminal) separatedDuty(action string) bool {
	return (action == graph.ActionApprove || action == graph.ActionEdit) &&
		t.decider.Policy().SeparateDuties(t.itr.Kind) && t.task.CreatedBy == t.as.Name
}

// sodHint says how to get past separation of duties.
func (t *terminal) sodHint() string {
	return fmt.Sprintf("  to go on, another approver approves it: in the browser (/tasks/%s),\n"+
		"  or with gatehouse run --attach %s --as NAME;\n"+
		"  or allow it with GATEHOUSE_SOD_KINDS=none. Here: r(eject) FEEDBACK, or q(uit) to leave it waiting.\n",
		t.task.ID, t.task.ID)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// detach leaves the task as it is.
func (t *terminal) detach(why string) error {
	if why != "" {
		why = " (" + why + ")"
	}
	st := "keeps running"
	if t.itr != nil || t.awaiting != "" {
		st = "waits for a decision"
	}
	t.printf("detached%s: task %s %s; follow it again with: gatehouse run --attach %s\n", why, t.task.ID, st, t.task.ID)
	return exitStatus{code: exitDetached}
}

// finish prints how the task ended and its result; failed and cancelled
// tasks exit 1.
func (t *terminal) finish(status graph.TaskStatus, detail string) error {
	task, err := t.store.Task(context.WithoutCancel(t.ctx), t.task.ID)
	if err != nil {
		return err
	}
	took := time.Duration(0)
	if task.CompletedAt != nil {
		took = task.CompletedAt.Sub(task.CreatedAt).Round(time.Millisecond)
	}
	switch status {
	case graph.StatusSucceeded:
		t.printf("\nsucceeded in %s\n", took)
		if len(task.Result) > 0 && string(task.Result) != "null" {
			t.printf("%s", renderResult(task.Result))
		}
		return nil
	case graph.StatusFailed:
		t.printf("\nfailed after %s: %s\n(retry it from its last checkpoint in the browser or with POST /api/v1/tasks/%s/retry)\n",
			took, detail, task.ID)
	default:
		t.printf("\ncancelled by %s\n", detail)
	}
	return exitStatus{code: 1}
}

// renderResult prints a result object key by key: long or multi-line
// texts as indented blocks (an analysis, a design), the rest as JSON.
func renderResult(raw json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		var v any
		_ = json.Unmarshal(raw, &v)
		b, _ := json.MarshalIndent(v, "", "  ")
		return "result: " + string(b) + "\n"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("result:\n")
	for _, k := range keys {
		var s string
		if json.Unmarshal(m[k], &s) == nil && (strings.Contains(s, "\n") || len(s) > 100) {
			fmt.Fprintf(&b, "  %s:\n%s\n", k, indent(strings.TrimRight(s, "\n"), "    "))
			continue
		}
		var v any
		_ = json.Unmarshal(m[k], &v)
		j, _ := json.Marshal(v)
		if len(j) > 100 {
			j, _ = json.MarshalIndent(v, "  ", "  ")
		}
		fmt.Fprintf(&b, "  %s: %s\n", k, j)
	}
	return b.String()
}

func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}

// exitStatus ends a command with a status; what to say was said.
type exitStatus struct{ code int }

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", e.code) }
