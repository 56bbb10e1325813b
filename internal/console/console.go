// Package console is the terminal client of `gatehouse run`: it follows
// one task's events, prints a line per node run, and at each interrupt
// shows the artifact or the question and reads the person's decision at a
// prompt. Decisions go through the one auth.Decider (and so the approval
// policy) like every other channel; the task itself runs wherever a worker
// takes it. The package neither starts workers nor opens the database: its
// caller wires those and hands it a Store and a FollowFunc.
//
// It imports graph, auth and pgtext only: never postgres, live or the web
// packages.
package console

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
	"github.com/gatehousehq/gatehouse/internal/pgtext"
)

// Store is what the console reads and writes (postgres.Store).
type Store interface {
	// Task reads the task (its result, when it ends).
	Task(ctx context.Context, taskID string) (*graph.Task, error)
	// Interrupt reads the interrupt the task waits on.
	Interrupt(ctx context.Context, id string) (*graph.Interrupt, error)
	// Cancel cancels the task as actor (the prompt's c).
	Cancel(ctx context.Context, taskID, actor string) error
}

// FollowFunc sends a task's events after seq after to send, as they
// happen, until ctx ends or send fails (live.Hub.Follow).
type FollowFunc func(ctx context.Context, taskID string, after int64, send func(graph.Event) error) (int64, error)

// Outcome is how following a task ended.
type Outcome int

// Outcomes of Follow.
const (
	// Detached: the person left (quit, end of input, interrupt); the task
	// goes on, or keeps waiting.
	Detached Outcome = iota
	// Succeeded, Failed, Cancelled: the task ended so.
	Succeeded
	Failed
	Cancelled
)

// Config is what Follow needs.
type Config struct {
	// Task is the task to follow.
	Task *graph.Task
	// Decider records the decisions typed at the prompt.
	Decider *auth.Decider
	// Store reads the task and its interrupts, and cancels.
	Store Store
	// Follow delivers the task's events (live.Hub.Follow).
	Follow FollowFunc
	// As decides and cancels at the prompt (Principal).
	As auth.Principal
	// In is where the person types.
	In io.Reader
	// Out is where the console prints.
	Out io.Writer
}

// Principal is who decides at the prompt: name (gatehouse run --as,
// default cli:$USER), an admin — whoever runs the command has the
// database — of kind console. The approval policy still applies to it.
func Principal(name string) auth.Principal {
	return auth.Principal{Name: name, Role: auth.RoleAdmin, Kind: auth.KindConsole}
}

// Follow prints the task's events and prompts at its interrupts until the
// task ends or the person detaches (q, end of input, ctx ending), and says
// how it ended. An error is a failure to follow (the database), not the
// task's.
func Follow(ctx context.Context, c Config) (Outcome, error) {
	t := &terminal{ctx: ctx, decider: c.Decider, store: c.Store, task: c.Task, as: c.As,
		out: c.Out, lines: readLines(c.In), echo: !isTerminal(c.In)}
	return t.follow(c.Follow)
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
	store   Store
	task    *graph.Task
	// as decides and cancels at the prompt.
	as    auth.Principal
	out   io.Writer
	lines <-chan string
	// echo repeats the lines read when they do not come from a terminal
	// (a script, a pipe), so the transcript reads like a session.
	echo bool
	eof  bool

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
	// outcome is how following ended.
	outcome Outcome
}

func (t *terminal) printf(format string, args ...any) { fmt.Fprintf(t.out, format, args...) }

// follow prints the task's events and prompts at its interrupts until the
// task ends (exit 0 or 1) or the person detaches (exit 3).
func (t *terminal) follow(follow FollowFunc) (Outcome, error) {
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	events := make(chan graph.Event, 64)
	followErr := make(chan error, 1)
	go func() {
		_, err := follow(ctx, t.task.ID, 0, func(ev graph.Event) error {
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
			return Detached, t.detach("interrupted")
		case err := <-followErr:
			if t.ctx.Err() != nil {
				return Detached, t.detach("interrupted")
			}
			return Detached, fmt.Errorf("following task %s: %w", t.task.ID, err)
		case ev := <-events:
			if done, err := t.event(ev); done {
				return t.outcome, err
			}
		case line, ok := <-lines:
			if !ok {
				t.eof = true
				t.printf("\n")
				return Detached, t.detach("end of input")
			}
			if t.echo {
				t.printf("%s\n", line)
			}
			if done, err := t.line(line); done {
				return t.outcome, err
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
	if p := pgtext.Problem(line); p != "" {
		// Nothing PostgreSQL cannot store reaches a decision.
		t.printf("not recorded: the line %s; type it again\n", p)
		t.prompt()
		return false, nil
	}
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
	if p := pgtext.Problem(content); p != "" {
		t.printf("not edited: the edited artifact %s\n", p)
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
	t.outcome = Detached
	return nil
}

// finish prints how the task ended and its result, and records the
// outcome.
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
			t.printf("%s", RenderResult(task.Result))
		}
		t.outcome = Succeeded
		return nil
	case graph.StatusFailed:
		t.printf("\nfailed after %s: %s\n(retry it from its last checkpoint in the browser or with POST /api/v1/tasks/%s/retry)\n",
			took, detail, task.ID)
		t.outcome = Failed
	default:
		t.printf("\ncancelled by %s\n", detail)
		t.outcome = Cancelled
	}
	return nil
}

// RenderResult prints a result object key by key: long or multi-line
// texts as indented blocks (an analysis, a design), the rest as JSON.
func RenderResult(raw json.RawMessage) string {
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
