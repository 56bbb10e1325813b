package langgraph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

// Stream modes: the ones Gatehouse produces, and the others LangGraph
// clients ask for (taken, never produced: a task has no chat messages).
var (
	producedModes = []string{"values", "updates", "events"}
	silentModes   = []string{"messages", "messages-tuple", "debug", "custom", "tasks", "checkpoints"}
)

type runCommand struct {
	Resume json.RawMessage `json:"resume"`
	Goto   json.RawMessage `json:"goto"`
	Update json.RawMessage `json:"update"`
}

// runRequest is RunCreate; fields LangGraph has and Gatehouse does not use
// (webhook, interrupt_before, feedback_keys, durability, …) are ignored.
type runRequest struct {
	AssistantID       string          `json:"assistant_id"`
	Input             json.RawMessage `json:"input"`
	Command           *runCommand     `json:"command"`
	Config            json.RawMessage `json:"config"`
	Context           json.RawMessage `json:"context"`
	Metadata          json.RawMessage `json:"metadata"`
	StreamMode        json.RawMessage `json:"stream_mode"`
	StreamResumable   *bool           `json:"stream_resumable"`
	MultitaskStrategy string          `json:"multitask_strategy"`
	IfNotExists       string          `json:"if_not_exists"`
	OnDisconnect      string          `json:"on_disconnect"`
	CheckpointID      *string         `json:"checkpoint_id"`
}

// runJSON is LangGraph's Run.
type runJSON struct {
	RunID             string          `json:"run_id"`
	ThreadID          string          `json:"thread_id"`
	AssistantID       string          `json:"assistant_id"`
	CreatedAt         string          `json:"created_at"`
	UpdatedAt         string          `json:"updated_at"`
	Status            string          `json:"status"`
	Metadata          json.RawMessage `json:"metadata"`
	MultitaskStrategy string          `json:"multitask_strategy"`
	Kwargs            json.RawMessage `json:"kwargs"`
}

func runOf(r *postgres.LGRun) runJSON {
	return runJSON{RunID: r.ID, ThreadID: r.ThreadID, AssistantID: r.AssistantID, CreatedAt: stamp(r.CreatedAt),
		UpdatedAt: stamp(r.UpdatedAt), Status: r.Status, Metadata: r.Metadata, MultitaskStrategy: r.MultitaskStrategy, Kwargs: r.Kwargs}
}

func isNull(b json.RawMessage) bool {
	s := strings.TrimSpace(string(b))
	return s == "" || s == "null"
}

// streamModes reads stream_mode: one mode or a list (default values).
func streamModes(raw json.RawMessage) ([]string, error) {
	if isNull(raw) {
		return []string{"values"}, nil
	}
	var modes []string
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		modes = []string{one}
	} else if err := json.Unmarshal(raw, &modes); err != nil {
		return nil, unprocessable("stream_mode: want a mode or a list of modes (values, updates, events)")
	}
	if len(modes) == 0 {
		return []string{"values"}, nil
	}
	for _, m := range modes {
		if !slices.Contains(producedModes, m) && !slices.Contains(silentModes, m) {
			return nil, unprocessable("stream_mode: unknown mode %s (values, updates, events)", quote(m))
		}
	}
	return modes, nil
}

// reservedConfig are configurable keys LangGraph itself sets; they are no
// task options.
func reservedConfig(k string) bool {
	switch k {
	case "thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map", "run_id", "assistant_id", "graph_id", "user_id":
		return true
	}
	return strings.HasPrefix(k, "__") || strings.HasPrefix(k, "langgraph_") || strings.HasPrefix(k, "x-")
}

// optionsOf makes task options from config.configurable and context
// (SPEC §14: e.g. {"gates": {}}); nil when both hold none.
func optionsOf(config, ctxRaw json.RawMessage) (json.RawMessage, error) {
	opts := map[string]json.RawMessage{}
	if !isNull(config) {
		var cfg struct {
			Configurable map[string]json.RawMessage `json:"configurable"`
		}
		if err := json.Unmarshal(config, &cfg); err != nil {
			return nil, unprocessable("config: must be an object, with configurable an object of task options")
		}
		for k, v := range cfg.Configurable {
			if !reservedConfig(k) {
				opts[k] = v
			}
		}
	}
	if !isNull(ctxRaw) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(ctxRaw, &m); err != nil {
			return nil, unprocessable("context: must be an object of task options")
		}
		for k, v := range m {
			if !reservedConfig(k) {
				opts[k] = v
			}
		}
	}
	if len(opts) == 0 {
		return nil, nil
	}
	b, _ := json.Marshal(opts)
	if _, err := graph.ParseOptions(b); err != nil {
		return nil, unprocessable("config.configurable: %v", err)
	}
	return b, nil
}

// start creates the run a request asks for and does what it means: the
// first run's input starts the thread's task (its id is the thread's); a
// command.resume decides the pending interrupt through the Decider; a run
// with neither resumes a failed task from its last checkpoint. Nothing is
// written when the request is refused.
func (a *API) start(c echo.Context) (*postgres.LGRun, []string, *graph.Task, error) {
	var req runRequest
	if err := decodeBody(c, &req); err != nil {
		return nil, nil, nil, err
	}
	threadID := c.Param("thread_id")
	if _, err := uuid.Parse(threadID); err != nil {
		return nil, nil, nil, unprocessable("thread_id: %s is not a UUID", quote(threadID))
	}
	as, err := a.assistantFor(req.AssistantID)
	if err != nil {
		return nil, nil, nil, err
	}
	modes, err := streamModes(req.StreamMode)
	if err != nil {
		return nil, nil, nil, err
	}
	strategy := req.MultitaskStrategy
	switch strategy {
	case "":
		strategy = "reject"
	case "reject", "interrupt", "rollback", "enqueue":
	default:
		return nil, nil, nil, unprocessable("multitask_strategy: want reject, interrupt, rollback or enqueue, not %s", quote(strategy))
	}
	switch req.IfNotExists {
	case "", "reject", "create":
	default:
		return nil, nil, nil, unprocessable("if_not_exists: want reject or create, not %s", quote(req.IfNotExists))
	}
	if req.CheckpointID != nil && *req.CheckpointID != "" {
		return nil, nil, nil, unprocessable("checkpoint_id: runs from an earlier checkpoint are not supported; fork the task instead")
	}
	hasInput := !isNull(req.Input)
	hasResume := req.Command != nil && !isNull(req.Command.Resume)
	switch {
	case req.Command != nil && (!isNull(req.Command.Goto) || !isNull(req.Command.Update)):
		return nil, nil, nil, unprocessable("command: only resume is supported (goto and update would move a task outside its graph)")
	case req.Command != nil && !hasResume:
		return nil, nil, nil, unprocessable("command.resume is required: a HumanResponse such as [{\"type\": \"accept\"}]")
	case hasInput && hasResume:
		return nil, nil, nil, unprocessable("input and command: send one; input starts the thread's task, command.resume answers its interrupt")
	}
	if hasInput {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(req.Input, &obj); err != nil {
			return nil, nil, nil, unprocessable("input: must be an object (the %s workflow's input)", as.GraphID)
		}
	}
	md, err := objectOrEmpty(req.Metadata, "metadata")
	if err != nil {
		return nil, nil, nil, err
	}
	if hasResume {
		err = need(c, auth.RoleApprover, "resuming a thread")
	} else {
		err = need(c, auth.RoleOperator, "starting a run")
	}
	if err != nil {
		return nil, nil, nil, err
	}
	opts, err := optionsOf(req.Config, req.Context)
	if err != nil {
		return nil, nil, nil, err
	}
	kwargs, _ := json.Marshal(map[string]any{"input": req.Input, "command": req.Command, "config": req.Config,
		"context": req.Context, "stream_mode": modes, "stream_resumable": req.StreamResumable != nil && *req.StreamResumable})

	ctx := c.Request().Context()
	who := principalOf(c)
	run := &postgres.LGRun{ID: graph.NewID(), ThreadID: strings.ToLower(threadID), AssistantID: as.AssistantID, Metadata: md,
		Kwargs: kwargs, MultitaskStrategy: strategy, CreatedBy: who.Name}
	// A refused start leaves no run behind.
	undo := func(cause error) error {
		if derr := a.store.LGDeleteRun(context.WithoutCancel(ctx), run.ID); derr != nil {
			a.log.Error("langgraph: delete refused run", "run", run.ID, "error", derr)
		}
		return cause
	}
	var v *view
	// started: a resume's run was written with the read of its task.
	started := false
	if hasResume {
		v, started, err = a.loadResumable(ctx, threadID, as, run)
	} else {
		v, err = a.loadTask(ctx, threadID)
	}
	if errors.Is(err, postgres.ErrThreadNotFound) && req.IfNotExists == "create" {
		if _, err = a.store.LGCreateThread(ctx, threadID, json.RawMessage(`{}`), who.Name); err == nil {
			v, err = a.loadTask(ctx, threadID)
		}
	}
	if err != nil {
		return nil, nil, nil, err
	}
	refuse := func(cause error) error {
		if started {
			return undo(cause)
		}
		return cause
	}
	if err := mayRead(c, v); err != nil {
		return nil, nil, nil, refuse(err)
	}
	run.ThreadID = v.th.ID
	switch {
	case hasInput:
		if v.task != nil {
			return nil, nil, nil, conflict("thread %s already holds a task (%s, %s): a thread holds one task; start another thread",
				v.th.ID, v.task.Workflow, v.status())
		}
		if err := a.store.LGCreateRun(ctx, run, nil); err != nil {
			return nil, nil, nil, err
		}
		if _, err := a.engine.Create(ctx, graph.NewTask{ID: v.th.ID, Workflow: as.GraphID,
			Input: req.Input, Options: opts, CreatedBy: who.Name}); err != nil {
			return nil, nil, nil, undo(err)
		}
		patch, _ := json.Marshal(map[string]string{"graph_id": as.GraphID, "assistant_id": as.AssistantID})
		if err := a.store.LGMergeThreadMetadata(ctx, v.th.ID, patch); err != nil {
			return nil, nil, nil, err
		}
		a.wakeRunner()
	case hasResume:
		if v.task == nil || v.task.Status != graph.StatusWaiting || v.pending == nil {
			return nil, nil, nil, refuse(conflict("thread %s is %s, not interrupted: there is nothing to resume", v.th.ID, v.status()))
		}
		if v.task.Workflow != as.GraphID {
			return nil, nil, nil, refuse(unprocessable("assistant_id: the thread's task runs %s, not %s", v.task.Workflow, as.GraphID))
		}
		in, err := decisionOf(req.Command.Resume, v.pending)
		if err != nil {
			return nil, nil, nil, refuse(err)
		}
		if err := a.decider.MayDecide(who, v.task, v.pending); err != nil {
			// Refused before the decision; the Decider audits its own
			// refusals, so ask it to refuse (and record) this one.
			_, derr := a.decider.DecideOn(ctx, who, auth.Subject{Task: v.task, Interrupt: v.pending}, in)
			if derr == nil {
				derr = err
			}
			return nil, nil, nil, refuse(derr)
		}
		if !started {
			if err := a.store.LGCreateRun(ctx, run, adoption(v)); err != nil {
				return nil, nil, nil, err
			}
		}
		out, err := a.decider.DecideOn(ctx, who, auth.Subject{Task: v.task, Interrupt: v.pending}, in)
		if err != nil {
			return nil, nil, nil, undo(err)
		}
		if out.Pending() {
			// One approval of several: the interrupt waits on for the
			// others, and this run ends where it began.
			if err := a.store.LGSettleRun(ctx, run.ID, "success", run.AfterSeq); err != nil {
				return nil, nil, nil, err
			}
			if r, err := a.store.LGRun(ctx, run.ThreadID, run.ID); err == nil {
				run = r
			}
		}
	default:
		switch {
		case v.task == nil:
			return nil, nil, nil, unprocessable("input is required: the thread's first run starts its task")
		case v.task.Status == graph.StatusFailed:
			if err := a.store.LGCreateRun(ctx, run, adoption(v)); err != nil {
				return nil, nil, nil, err
			}
			if err := a.store.Retry(ctx, v.task.ID, who.Name); err != nil {
				return nil, nil, nil, undo(err)
			}
			a.wakeRunner()
		case v.task.Status == graph.StatusWaiting:
			return nil, nil, nil, conflict("thread %s is interrupted: resume it with command.resume", v.th.ID)
		case v.task.Status.Terminal():
			return nil, nil, nil, conflict("thread %s's task has %s: a thread holds one task; start another thread", v.th.ID, v.task.Status)
		default:
			return nil, nil, nil, postgres.ErrThreadBusy
		}
	}
	return run, modes, v.task, nil
}

// adoption is the metadata a task started elsewhere gets with its thread
// row when its first run here starts (nil: the thread has its row).
func adoption(v *view) json.RawMessage {
	if v.th.Stored {
		return nil
	}
	return v.th.Metadata
}

// loadResumable reads what a resume by run of assistant as needs in one
// round trip: the task and its pending interrupt, and with them the run's
// row (with its thread's row, if missing), written when the task waits and
// runs as's graph (started). A thread without a task is read as such (to
// refuse it).
func (a *API) loadResumable(ctx context.Context, threadID string, as *assistant, run *postgres.LGRun) (*view, bool, error) {
	if _, err := uuid.Parse(threadID); err != nil {
		return nil, false, unprocessable("thread_id: %s is not a UUID", quote(threadID))
	}
	adopt, _ := json.Marshal(map[string]string{"graph_id": as.GraphID, "assistant_id": AssistantID(as.GraphID)})
	t, pending, started, err := a.store.TaskWithPendingResuming(ctx, as.GraphID, run, adopt)
	if errors.Is(err, graph.ErrTaskNotFound) {
		v, err := a.loadTask(ctx, threadID)
		return v, false, err
	}
	if err != nil {
		return nil, false, err
	}
	md, _ := json.Marshal(map[string]string{"graph_id": t.Workflow, "assistant_id": AssistantID(t.Workflow)})
	return &view{th: &postgres.LGThread{ID: t.ID, Metadata: md, TaskStatus: t.Status, Workflow: t.Workflow,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}, task: t, pending: pending}, started, nil
}

func runLocation(r *postgres.LGRun) string {
	return "/threads/" + r.ThreadID + "/runs/" + r.ID
}

// createRun: POST /threads/{id}/runs → Run (a background run).
func (a *API) createRun(c echo.Context) error {
	run, _, _, err := a.start(c)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Content-Location", runLocation(run))
	return writeJSON(c, http.StatusOK, runOf(run))
}

// streamRun: POST /threads/{id}/runs/stream → SSE until the run ends.
func (a *API) streamRun(c echo.Context) error {
	run, modes, task, err := a.start(c)
	if err != nil {
		return err
	}
	return a.serveStream(c, run, modes, position{seq: -1}, task)
}

// waitRun: POST /threads/{id}/runs/wait → the thread's values once the run ends.
func (a *API) waitRun(c echo.Context) error {
	run, _, _, err := a.start(c)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Content-Location", runLocation(run))
	return a.answerWhenDone(c, run)
}

// runOfRequest reads the run the path names, on a thread the principal may read.
func (a *API) runOfRequest(c echo.Context) (*postgres.LGRun, error) {
	ctx := c.Request().Context()
	v, err := a.load(ctx, c.Param("thread_id"))
	if err != nil {
		return nil, err
	}
	if err := mayRead(c, v); err != nil {
		return nil, err
	}
	id := c.Param("run_id")
	if _, err := uuid.Parse(id); err != nil {
		return nil, unprocessable("run_id: %s is not a UUID", quote(id))
	}
	return a.store.LGRun(ctx, v.th.ID, id)
}

// getRun: GET /threads/{id}/runs/{run_id} → Run.
func (a *API) getRun(c echo.Context) error {
	run, err := a.runOfRequest(c)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, runOf(run))
}

// listRuns: GET /threads/{id}/runs?limit=&offset=&status= → [Run], newest first.
func (a *API) listRuns(c echo.Context) error {
	ctx := c.Request().Context()
	v, err := a.load(ctx, c.Param("thread_id"))
	if err != nil {
		return err
	}
	if err := mayRead(c, v); err != nil {
		return err
	}
	limit, offset := 10, 0
	if s := c.QueryParam("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > 1000 {
			return unprocessable("limit: must be a number between 1 and 1000")
		}
	}
	if s := c.QueryParam("offset"); s != "" {
		if offset, err = strconv.Atoi(s); err != nil || offset < 0 {
			return unprocessable("offset: must be a non-negative number")
		}
	}
	status := c.QueryParam("status")
	switch status {
	case "", "pending", "running", "success", "error", "timeout", "interrupted":
	default:
		return unprocessable("status: want pending, running, success, error, timeout or interrupted")
	}
	runs, err := a.store.LGRuns(ctx, v.th.ID, status, limit, offset)
	if err != nil {
		return err
	}
	out := make([]runJSON, 0, len(runs))
	for i := range runs {
		out = append(out, runOf(&runs[i]))
	}
	return writeJSON(c, http.StatusOK, out)
}

// joinRun: GET …/runs/{run_id}/join → the thread's values once the run ends.
func (a *API) joinRun(c echo.Context) error {
	run, err := a.runOfRequest(c)
	if err != nil {
		return err
	}
	return a.answerWhenDone(c, run)
}

// joinStream: GET …/runs/{run_id}/stream → SSE of the run, replayed from
// its start, or after Last-Event-ID.
func (a *API) joinStream(c echo.Context) error {
	run, err := a.runOfRequest(c)
	if err != nil {
		return err
	}
	modes := c.QueryParams()["stream_mode"]
	if len(modes) == 0 {
		var kw struct {
			StreamMode []string `json:"stream_mode"`
		}
		_ = json.Unmarshal(run.Kwargs, &kw)
		modes = kw.StreamMode
	}
	raw, _ := json.Marshal(modes)
	if modes, err = streamModes(raw); err != nil {
		return err
	}
	from := position{seq: -1}
	if id := strings.TrimSpace(c.Request().Header.Get("Last-Event-ID")); id != "" && id != "-1" {
		if from, err = parsePosition(id); err != nil {
			return err
		}
	}
	return a.serveStream(c, run, modes, from, nil)
}

// cancelRun: POST …/runs/{run_id}/cancel?wait=&action= cancels the task
// and its pending interrupt; the run ends interrupted, the thread idle.
func (a *API) cancelRun(c echo.Context) error {
	switch c.QueryParam("action") {
	case "", "interrupt":
	case "rollback":
		return unprocessable("action: rollback is not supported: Gatehouse keeps every checkpoint of a task; cancel with action=interrupt")
	default:
		return unprocessable("action: want interrupt, not %s", quote(c.QueryParam("action")))
	}
	wait := false
	switch c.QueryParam("wait") {
	case "", "0", "false":
	case "1", "true":
		wait = true
	default:
		return unprocessable("wait: want 0 or 1")
	}
	if err := need(c, auth.RoleOperator, "cancelling a run"); err != nil {
		return err
	}
	run, err := a.runOfRequest(c)
	if err != nil {
		return err
	}
	if !run.Active() {
		return conflict("run %s has ended (%s): there is nothing to cancel", run.ID, run.Status)
	}
	ctx := c.Request().Context()
	if err := a.store.Cancel(ctx, run.ThreadID, principalOf(c).Name); err != nil {
		return err
	}
	if !wait {
		return c.NoContent(http.StatusAccepted)
	}
	if run, err = a.waitEnd(ctx, run); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, runOf(run))
}

// answerWhenDone waits for the run's end and answers the thread's values:
// with __interrupt__ when it waits, {"__error__"} when it failed.
func (a *API) answerWhenDone(c echo.Context, run *postgres.LGRun) error {
	clearWriteDeadline(c)
	ctx, cancel := a.waitCtx(c.Request().Context())
	defer cancel()
	if _, err := a.waitEnd(ctx, run); err != nil {
		return err
	}
	v, err := a.load(c.Request().Context(), run.ThreadID)
	if err != nil {
		return err
	}
	if v.task != nil && v.task.Status == graph.StatusFailed {
		return writeJSON(c, http.StatusOK, map[string]any{"__error__": map[string]string{"error": "TaskFailed", "message": v.task.Error}})
	}
	out := map[string]json.RawMessage{}
	_ = json.Unmarshal(v.values(), &out)
	if out == nil {
		out = map[string]json.RawMessage{}
	}
	if iv := v.interrupts(); len(iv) > 0 {
		var list []interruptValue
		for _, l := range iv {
			list = append(list, l...)
		}
		out["__interrupt__"], _ = json.Marshal(list)
	}
	return writeJSON(c, http.StatusOK, out)
}

// errRunEnded stops following a task: the run's end was seen.
var errRunEnded = errors.New("run ended")

// endsRun reports the task events that end a run.
func endsRun(typ string) bool {
	switch typ {
	case graph.EventTaskWaiting, graph.EventTaskCompleted, graph.EventTaskFailed, graph.EventTaskCancelled:
		return true
	}
	return false
}

// waitEnd follows the task until the run's end, settles it and returns it
// as stored then.
func (a *API) waitEnd(ctx context.Context, run *postgres.LGRun) (*postgres.LGRun, error) {
	if run.Active() {
		if a.hub == nil {
			return nil, &apiError{Status: http.StatusServiceUnavailable, Detail: "live events are not available"}
		}
		_, err := a.hub.Follow(ctx, run.ThreadID, run.AfterSeq, func(ev graph.Event) error {
			if endsRun(ev.Type) {
				return errRunEnded
			}
			return nil
		})
		if !errors.Is(err, errRunEnded) {
			if err == nil {
				err = ctx.Err()
			}
			return nil, fmt.Errorf("wait for run %s: %w", run.ID, err)
		}
	}
	return a.store.LGRun(context.WithoutCancel(ctx), run.ThreadID, run.ID)
}
