package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// Limits of the task API.
const (
	defaultTaskLimit  = 50
	maxTaskLimit      = 200
	defaultEventLimit = 1000
	maxEventLimit     = 1000
)

// CreateTaskRequest is the body of POST /api/v1/tasks (and MCP's
// start_task).
type CreateTaskRequest struct {
	Workflow string          `json:"workflow"`
	Title    string          `json:"title"`
	Input    json.RawMessage `json:"input"`
	Options  json.RawMessage `json:"options"`
}

// createTask: POST /api/v1/tasks → 201 Task.
func (h *Handler) createTask(c echo.Context) error {
	var req CreateTaskRequest
	if err := request.DecodeJSON(c, &req); err != nil {
		return err
	}
	t, err := h.StartTask(c.Request().Context(), request.Principal(c), req, "")
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/api/v1/tasks/"+t.ID)
	return h.renderTask(c, http.StatusCreated, t.ID)
}

// StartTask checks and creates a task as p, and wakes the runner: POST
// /api/v1/tasks and MCP's start_task (via "mcp": task.created carries it).
func (h *Handler) StartTask(ctx context.Context, p auth.Principal, req CreateTaskRequest, via string) (*graph.Task, error) {
	req.Workflow = strings.TrimSpace(req.Workflow)
	if req.Workflow == "" {
		return nil, response.BadRequest("workflow", "workflow is required")
	}
	w, err := h.engine.Workflow(req.Workflow)
	if err != nil {
		return nil, err
	}
	if w.Describe().Unlisted {
		return nil, response.BadRequest("workflow", "workflow %q is not started as a task: it has its own door "+
			"(approval requests: POST /api/v1/requests)", req.Workflow)
	}
	if request.IsNull(req.Input) {
		req.Input = nil
	}
	if request.IsNull(req.Options) {
		req.Options = nil
	}
	title := strings.Join(strings.Fields(req.Title), " ")
	switch {
	case utf8.RuneCountInString(title) > request.MaxTitle:
		return nil, response.BadRequest("title", "title is longer than %d characters", request.MaxTitle)
	case !utf8.ValidString(title):
		return nil, response.BadRequest("title", "title is not valid UTF-8")
	}
	t, err := h.engine.Create(ctx, graph.NewTask{Workflow: req.Workflow, Title: title, Input: req.Input,
		Options: req.Options, CreatedBy: p.Name, Via: via})
	if err != nil {
		return nil, err
	}
	h.wakeRunner()
	return t, nil
}

// renderTask writes the task as stored now, with its pending interrupt
// (both read in one statement).
func (h *Handler) renderTask(c echo.Context, status int, id string) error {
	out, err := h.TaskView(c.Request().Context(), request.Principal(c), id)
	if err != nil {
		return err
	}
	return response.JSON(c, status, out)
}

// TaskView is the Task JSON of a task p may read, as stored now: the API's
// and MCP's get_task.
func (h *Handler) TaskView(ctx context.Context, p auth.Principal, id string) (Task, error) {
	t, pending, err := h.store.TaskWithPending(ctx, id)
	if err != nil {
		return Task{}, err
	}
	if err := request.MayRead(p, t); err != nil {
		return Task{}, err
	}
	out := h.taskJSON(t, pending)
	if out.PendingInterrupt != nil {
		if out.PendingInterrupt.Approvals, err = h.approvalsOf(ctx, t, pending); err != nil {
			return Task{}, err
		}
	}
	return out, nil
}

// approvalsOf is the approval progress of a pending interrupt that needs
// several approvers (nil for the others): its kind's count, or the count of
// the kind's rule that holds for it (SPEC §18), which needs its task (read
// when task is nil and the kind has rules).
func (h *Handler) approvalsOf(ctx context.Context, task *graph.Task, itr *graph.Interrupt) (*Approvals, error) {
	policy := h.decider.Policy()
	if task == nil && len(policy.Kind(itr.Kind).Rules) > 0 {
		t, err := h.store.Task(ctx, itr.TaskID)
		if err != nil {
			return nil, err
		}
		task = t
	}
	n := policy.RequiredFor(task, itr)
	if n < 2 {
		return nil, nil
	}
	who, err := h.store.Approvals(ctx, itr.ID)
	if err != nil {
		return nil, err
	}
	return &Approvals{Required: n, Approvers: who, Progress: auth.Progress(len(who), n)}, nil
}

// getTask: GET /api/v1/tasks/:id → Task.
func (h *Handler) getTask(c echo.Context) error {
	id, err := request.PathID(c)
	if err != nil {
		return err
	}
	return h.renderTask(c, http.StatusOK, id)
}

// TaskList is a page of tasks, and the cursor of the next (null: none).
type TaskList struct {
	Tasks      []Task  `json:"tasks"`
	NextCursor *string `json:"next_cursor"`
}

// listTasks: GET /api/v1/tasks?status=&workflow=&limit=&cursor= → newest
// first, keyset-paged.
func (h *Handler) listTasks(c echo.Context) error {
	status, err := request.TaskStatus(c.QueryParam("status"))
	if err != nil {
		return err
	}
	limit, err := request.QueryInt(c, "limit", defaultTaskLimit, 1, maxTaskLimit)
	if err != nil {
		return err
	}
	cursor, err := request.DecodeCursor(c.QueryParam("cursor"))
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	tasks, next, err := h.store.ListTasks(ctx, postgres.TaskFilter{Status: status,
		Workflow: strings.TrimSpace(c.QueryParam("workflow")), Limit: int(limit), After: cursor})
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(tasks))
	for _, t := range tasks {
		if t.Status == graph.StatusWaiting {
			ids = append(ids, t.ID)
		}
	}
	pending, err := h.store.PendingInterrupts(ctx, ids...)
	if err != nil {
		return err
	}
	out := TaskList{Tasks: make([]Task, 0, len(tasks)), NextCursor: request.EncodeCursor(next)}
	who := request.Principal(c)
	for i := range tasks {
		if !auth.MaySee(who, &tasks[i]) {
			continue
		}
		var p *graph.Interrupt
		if itr, ok := pending[tasks[i].ID]; ok {
			p = &itr
		}
		t := h.taskJSON(&tasks[i], p)
		if p != nil {
			if t.PendingInterrupt.Approvals, err = h.approvalsOf(ctx, &tasks[i], p); err != nil {
				return err
			}
		}
		out.Tasks = append(out.Tasks, t)
	}
	return response.JSON(c, http.StatusOK, out)
}

// taskOf reads the :id parameter and checks the task exists and the
// principal may see it.
func (h *Handler) taskOf(c echo.Context) (*graph.Task, error) {
	id, err := request.PathID(c)
	if err != nil {
		return nil, err
	}
	t, err := h.store.Task(c.Request().Context(), id)
	if err != nil {
		return nil, err
	}
	return t, request.MayRead(request.Principal(c), t)
}

// getState: GET /api/v1/tasks/:id/state → the current checkpoint.
func (h *Handler) getState(c echo.Context) error {
	t, err := h.taskOf(c)
	if err != nil {
		return err
	}
	cp, err := h.store.CurrentCheckpoint(c.Request().Context(), t.ID)
	if err != nil {
		return err
	}
	return response.JSON(c, http.StatusOK, State{State: orObject(cp.State), LastNodeID: cp.LastNode, Step: cp.Step,
		UpdatedAt: stamp(cp.UpdatedAt)})
}

// listCheckpoints: GET /api/v1/tasks/:id/checkpoints → the history, in
// step order, without state.
func (h *Handler) listCheckpoints(c echo.Context) error {
	return taskItems(h, c, "checkpoints", h.store.History, checkpointJSON)
}

// getCheckpoint: GET /api/v1/tasks/:id/checkpoints/:step → one checkpoint
// with its state.
func (h *Handler) getCheckpoint(c echo.Context) error {
	if _, err := request.PathID(c); err != nil {
		return err
	}
	step, err := paramInt(c, "step")
	if err != nil {
		return err
	}
	t, err := h.taskOf(c)
	if err != nil {
		return err
	}
	cp, err := h.store.CheckpointAt(c.Request().Context(), t.ID, step)
	if err != nil {
		return err
	}
	out := checkpointJSON(&cp.HistoryEntry)
	out.State = orObject(cp.State)
	return response.JSON(c, http.StatusOK, out)
}

func paramInt(c echo.Context, name string) (int, error) {
	n, err := strconv.ParseUint(c.Param(name), 10, 31)
	if err != nil {
		return 0, response.BadRequest(name, "%s must be a non-negative integer", name)
	}
	return int(n), nil
}

// listEvents: GET /api/v1/tasks/:id/events?after=N&limit= → in seq order.
func (h *Handler) listEvents(c echo.Context) error {
	if _, err := request.PathID(c); err != nil {
		return err
	}
	after, err := request.QueryInt(c, "after", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	limit, err := request.QueryInt(c, "limit", defaultEventLimit, 1, maxEventLimit)
	if err != nil {
		return err
	}
	t, err := h.taskOf(c)
	if err != nil {
		return err
	}
	evs, err := h.store.Events(c.Request().Context(), t.ID, after, int(limit))
	if err != nil {
		return err
	}
	return response.JSON(c, http.StatusOK, map[string][]Event{"events": wireAll(evs, EventOf)})
}

// listArtifacts: GET /api/v1/tasks/:id/artifacts → every version.
func (h *Handler) listArtifacts(c echo.Context) error {
	return taskItems(h, c, "artifacts", h.store.Artifacts, artifactJSON)
}

// cancelTask: POST /api/v1/tasks/:id/cancel → 202 Task; 409 when it ended.
// The task.cancelled event names the principal as cancelled_by.
func (h *Handler) cancelTask(c echo.Context) error {
	t, err := h.taskOf(c)
	if err != nil {
		return err
	}
	if err := h.store.Cancel(c.Request().Context(), t.ID, request.Principal(c).Name); err != nil {
		return err
	}
	return h.renderTask(c, http.StatusAccepted, t.ID)
}

// retryTask: POST /api/v1/tasks/:id/retry → 202 Task; 409 unless failed.
// The task.retried event names the principal as retried_by.
func (h *Handler) retryTask(c echo.Context) error {
	t, err := h.taskOf(c)
	if err != nil {
		return err
	}
	if err := h.engine.ResumableTask(c.Request().Context(), t); err != nil {
		return err
	}
	if err := h.store.Retry(c.Request().Context(), t.ID, request.Principal(c).Name); err != nil {
		return err
	}
	h.wakeRunner()
	return h.renderTask(c, http.StatusAccepted, t.ID)
}

// listWorkflows: GET /api/v1/workflows, those started as tasks (an
// unlisted one, as request, has its own door).
func (h *Handler) listWorkflows(c echo.Context) error {
	wfs := h.engine.Workflows()
	out := struct {
		Workflows []graph.Description `json:"workflows"`
	}{Workflows: make([]graph.Description, 0, len(wfs))}
	for _, w := range wfs {
		if d := w.Describe(); !d.Unlisted {
			out.Workflows = append(out.Workflows, d)
		}
	}
	return response.JSON(c, http.StatusOK, out)
}

// taskItems answers GET /api/v1/tasks/:id/<key>: the task as the
// principal may read it (404 otherwise), then load's items of it, each as
// its wire type, under key (an empty list, never null).
func taskItems[S, W any](h *Handler, c echo.Context, key string, load func(ctx context.Context, taskID string) ([]S, error),
	wire func(*S) W) error {
	t, err := h.taskOf(c)
	if err != nil {
		return err
	}
	items, err := load(c.Request().Context(), t.ID)
	if err != nil {
		return err
	}
	return response.JSON(c, http.StatusOK, map[string][]W{key: wireAll(items, wire)})
}

// wireAll is items, each as its wire type (empty, never nil).
func wireAll[S, W any](items []S, wire func(*S) W) []W {
	out := make([]W, 0, len(items))
	for i := range items {
		out = append(out, wire(&items[i]))
	}
	return out
}
