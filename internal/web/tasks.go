package web

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
	maxTitle          = 200
	defaultTaskLimit  = 50
	maxTaskLimit      = 200
	defaultEventLimit = 1000
	maxEventLimit     = 1000
)

type createTaskRequest struct {
	Workflow string          `json:"workflow"`
	Title    string          `json:"title"`
	Input    json.RawMessage `json:"input"`
	Options  json.RawMessage `json:"options"`
}

// createTask: POST /api/v1/tasks → 201 Task.
func (s *Server) createTask(c echo.Context) error {
	var req createTaskRequest
	if err := request.DecodeJSON(c, &req); err != nil {
		return err
	}
	t, err := s.startTask(c.Request().Context(), request.Principal(c), req, "")
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/api/v1/tasks/"+t.ID)
	return s.renderTask(c, http.StatusCreated, t.ID)
}

// startTask checks and creates a task as p, and wakes the runner: POST
// /api/v1/tasks and MCP's start_task (via "mcp": task.created carries it).
func (s *Server) startTask(ctx context.Context, p auth.Principal, req createTaskRequest, via string) (*graph.Task, error) {
	req.Workflow = strings.TrimSpace(req.Workflow)
	if req.Workflow == "" {
		return nil, response.BadRequest("workflow", "workflow is required")
	}
	if _, err := s.engine.Workflow(req.Workflow); err != nil {
		return nil, err
	}
	if request.IsNull(req.Input) {
		req.Input = nil
	}
	if request.IsNull(req.Options) {
		req.Options = nil
	}
	title := strings.Join(strings.Fields(req.Title), " ")
	switch {
	case utf8.RuneCountInString(title) > maxTitle:
		return nil, response.BadRequest("title", "title is longer than %d characters", maxTitle)
	case !utf8.ValidString(title):
		return nil, response.BadRequest("title", "title is not valid UTF-8")
	}
	t, err := s.engine.Create(ctx, graph.NewTask{Workflow: req.Workflow, Title: title, Input: req.Input,
		Options: req.Options, CreatedBy: p.Name, Via: via})
	if err != nil {
		return nil, err
	}
	s.wakeRunner()
	return t, nil
}

// renderTask writes the task as stored now, with its pending interrupt
// (both read in one statement).
func (s *Server) renderTask(c echo.Context, status int, id string) error {
	out, err := s.taskView(c.Request().Context(), request.Principal(c), id)
	if err != nil {
		return err
	}
	return response.JSON(c, status, out)
}

// taskView is the Task JSON of a task p may read, as stored now: the API's
// and MCP's get_task.
func (s *Server) taskView(ctx context.Context, p auth.Principal, id string) (Task, error) {
	t, pending, err := s.store.TaskWithPending(ctx, id)
	if err != nil {
		return Task{}, err
	}
	if err := request.MayRead(p, t); err != nil {
		return Task{}, err
	}
	out := s.taskJSON(t, pending)
	if out.PendingInterrupt != nil {
		if out.PendingInterrupt.Approvals, err = s.approvalsOf(ctx, pending); err != nil {
			return Task{}, err
		}
	}
	return out, nil
}

// approvalsOf is the approval progress of a pending interrupt whose kind
// needs several approvers (nil for the others).
func (s *Server) approvalsOf(ctx context.Context, itr *graph.Interrupt) (*Approvals, error) {
	n := s.decider.Policy().Required(itr.Kind)
	if n < 2 {
		return nil, nil
	}
	who, err := s.store.Approvals(ctx, itr.ID)
	if err != nil {
		return nil, err
	}
	return &Approvals{Required: n, Approvers: who, Progress: auth.Progress(len(who), n)}, nil
}

// getTask: GET /api/v1/tasks/:id → Task.
func (s *Server) getTask(c echo.Context) error {
	id, err := request.PathID(c)
	if err != nil {
		return err
	}
	return s.renderTask(c, http.StatusOK, id)
}

type taskList struct {
	Tasks      []Task  `json:"tasks"`
	NextCursor *string `json:"next_cursor"`
}

// listTasks: GET /api/v1/tasks?status=&workflow=&limit=&cursor= → newest
// first, keyset-paged.
func (s *Server) listTasks(c echo.Context) error {
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
	tasks, next, err := s.store.ListTasks(ctx, postgres.TaskFilter{Status: status,
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
	pending, err := s.store.PendingInterrupts(ctx, ids...)
	if err != nil {
		return err
	}
	out := taskList{Tasks: make([]Task, 0, len(tasks)), NextCursor: request.EncodeCursor(next)}
	who := request.Principal(c)
	for i := range tasks {
		if !auth.MaySee(who, &tasks[i]) {
			continue
		}
		var p *graph.Interrupt
		if itr, ok := pending[tasks[i].ID]; ok {
			p = &itr
		}
		t := s.taskJSON(&tasks[i], p)
		if p != nil {
			if t.PendingInterrupt.Approvals, err = s.approvalsOf(ctx, p); err != nil {
				return err
			}
		}
		out.Tasks = append(out.Tasks, t)
	}
	return response.JSON(c, http.StatusOK, out)
}

// taskOf reads the :id parameter and checks the task exists and the
// principal may see it.
func (s *Server) taskOf(c echo.Context) (*graph.Task, error) {
	id, err := request.PathID(c)
	if err != nil {
		return nil, err
	}
	t, err := s.store.Task(c.Request().Context(), id)
	if err != nil {
		return nil, err
	}
	return t, request.MayRead(request.Principal(c), t)
}

// getState: GET /api/v1/tasks/:id/state → the current checkpoint.
func (s *Server) getState(c echo.Context) error {
	t, err := s.taskOf(c)
	if err != nil {
		return err
	}
	cp, err := s.store.CurrentCheckpoint(c.Request().Context(), t.ID)
	if err != nil {
		return err
	}
	return response.JSON(c, http.StatusOK, State{State: orObject(cp.State), LastNodeID: cp.LastNode, Step: cp.Step,
		UpdatedAt: stamp(cp.UpdatedAt)})
}

// listCheckpoints: GET /api/v1/tasks/:id/checkpoints → the history, in
// step order, without state.
func (s *Server) listCheckpoints(c echo.Context) error {
	t, err := s.taskOf(c)
	if err != nil {
		return err
	}
	hist, err := s.store.History(c.Request().Context(), t.ID)
	if err != nil {
		return err
	}
	out := struct {
		Checkpoints []Checkpoint `json:"checkpoints"`
	}{Checkpoints: make([]Checkpoint, 0, len(hist))}
	for i := range hist {
		out.Checkpoints = append(out.Checkpoints, checkpointJSON(&hist[i]))
	}
	return response.JSON(c, http.StatusOK, out)
}

// getCheckpoint: GET /api/v1/tasks/:id/checkpoints/:step → one checkpoint
// with its state.
func (s *Server) getCheckpoint(c echo.Context) error {
	if _, err := request.PathID(c); err != nil {
		return err
	}
	step, err := paramInt(c, "step")
	if err != nil {
		return err
	}
	t, err := s.taskOf(c)
	if err != nil {
		return err
	}
	cp, err := s.store.CheckpointAt(c.Request().Context(), t.ID, step)
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
func (s *Server) listEvents(c echo.Context) error {
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
	t, err := s.taskOf(c)
	if err != nil {
		return err
	}
	evs, err := s.store.Events(c.Request().Context(), t.ID, after, int(limit))
	if err != nil {
		return err
	}
	out := struct {
		Events []Event `json:"events"`
	}{Events: make([]Event, 0, len(evs))}
	for i := range evs {
		out.Events = append(out.Events, eventJSON(&evs[i]))
	}
	return response.JSON(c, http.StatusOK, out)
}

// listArtifacts: GET /api/v1/tasks/:id/artifacts → every version.
func (s *Server) listArtifacts(c echo.Context) error {
	t, err := s.taskOf(c)
	if err != nil {
		return err
	}
	arts, err := s.store.Artifacts(c.Request().Context(), t.ID)
	if err != nil {
		return err
	}
	out := struct {
		Artifacts []Artifact `json:"artifacts"`
	}{Artifacts: make([]Artifact, 0, len(arts))}
	for i := range arts {
		out.Artifacts = append(out.Artifacts, artifactJSON(&arts[i]))
	}
	return response.JSON(c, http.StatusOK, out)
}

// cancelTask: POST /api/v1/tasks/:id/cancel → 202 Task; 409 when it ended.
// The task.cancelled event names the principal as cancelled_by.
func (s *Server) cancelTask(c echo.Context) error {
	t, err := s.taskOf(c)
	if err != nil {
		return err
	}
	if err := s.store.Cancel(c.Request().Context(), t.ID, request.Principal(c).Name); err != nil {
		return err
	}
	return s.renderTask(c, http.StatusAccepted, t.ID)
}

// retryTask: POST /api/v1/tasks/:id/retry → 202 Task; 409 unless failed.
// The task.retried event names the principal as retried_by.
func (s *Server) retryTask(c echo.Context) error {
	t, err := s.taskOf(c)
	if err != nil {
		return err
	}
	if err := s.resumable(c.Request().Context(), t); err != nil {
		return err
	}
	if err := s.store.Retry(c.Request().Context(), t.ID, request.Principal(c).Name); err != nil {
		return err
	}
	s.wakeRunner()
	return s.renderTask(c, http.StatusAccepted, t.ID)
}

func (s *Server) wakeRunner() {
	if s.wake != nil {
		s.wake()
	}
}

// listWorkflows: GET /api/v1/workflows.
func (s *Server) listWorkflows(c echo.Context) error {
	wfs := s.engine.Workflows()
	out := struct {
		Workflows []graph.Description `json:"workflows"`
	}{Workflows: make([]graph.Description, 0, len(wfs))}
	for _, w := range wfs {
		out.Workflows = append(out.Workflows, w.Describe())
	}
	return response.JSON(c, http.StatusOK, out)
}

// healthz: GET /healthz — the process answers.
func (s *Server) healthz(c echo.Context) error {
	return response.JSON(c, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz: GET /readyz — the database is reachable and migrated.
func (s *Server) readyz(c echo.Context) error {
	if s.ready != nil {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readyTimeout)
		defer cancel()
		if err := s.ready(ctx); err != nil {
			s.log.Warn("not ready", "error", err)
			return response.JSON(c, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": err.Error()})
		}
	}
	return response.JSON(c, http.StatusOK, map[string]string{"status": "ok"})
}
