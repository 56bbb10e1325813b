package web

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// taskJSON is the package's taskJSON with definition_changed filled in
// against the running definition of the task's workflow.
func (s *Server) taskJSON(t *graph.Task, pending *graph.Interrupt) Task {
	out := taskJSON(t, pending)
	out.DefinitionChanged = s.definitionChanged(t)
	return out
}

// definitionChanged: the task was stored under another definition of its
// workflow than the one this binary runs.
func (s *Server) definitionChanged(t *graph.Task) bool {
	w, err := s.engine.Workflow(t.Workflow)
	return err == nil && graph.DefinitionChanged(t, w)
}

// resumable refuses (409, naming the node) to make a task runnable that
// stands at a node the running definition no longer has. Only a task
// stored under another definition can: the check reads nothing for the
// others.
func (s *Server) resumable(ctx context.Context, t *graph.Task) error {
	if t.DefinitionVersion != "" && !s.definitionChanged(t) {
		return nil
	}
	return s.engine.Resumable(ctx, t.ID)
}

type forkRequest struct {
	Step  *int            `json:"step"`
	State json.RawMessage `json:"state"`
	Title string          `json:"title"`
}

// forkTask: POST /api/v1/tasks/:id/fork {"step", "state"?, "title"?} →
// 201 with the new task: the source's workflow, input and options, its
// first checkpoint the source's checkpoint at step with the state patched
// (JSON merge patch, checked against the state's schema: 422 naming the
// field). 404 for a step the history does not hold; 409 when the source
// is running, or its checkpoint stands at a node this binary no longer has.
func (s *Server) forkTask(c echo.Context) error {
	src, err := s.taskOf(c)
	if err != nil {
		return err
	}
	var req forkRequest
	if err := request.DecodeJSON(c, &req); err != nil {
		return err
	}
	if req.Step == nil {
		return response.BadRequest("step", "step is required: the checkpoint to fork from (GET …/checkpoints lists them)")
	}
	if *req.Step < 0 {
		return response.BadRequest("step", "step must be a non-negative integer")
	}
	t, err := s.engine.Fork(c.Request().Context(), graph.ForkRequest{TaskID: src.ID, Step: *req.Step, Patch: req.State,
		Title: req.Title, CreatedBy: request.Principal(c).Name})
	if err != nil {
		return err
	}
	if t.Status == graph.StatusQueued {
		s.wakeRunner()
	}
	c.Response().Header().Set(echo.HeaderLocation, apiPrefix+"/tasks/"+t.ID)
	return s.renderTask(c, http.StatusCreated, t.ID)
}

// listForks: GET /api/v1/tasks/:id/forks → {"tasks": [Task]}, the tasks
// forked from this one, oldest first.
func (s *Server) listForks(c echo.Context) error {
	t, err := s.taskOf(c)
	if err != nil {
		return err
	}
	forks, err := s.store.Forks(c.Request().Context(), t.ID)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(forks))
	for _, f := range forks {
		if f.Status == graph.StatusWaiting {
			ids = append(ids, f.ID)
		}
	}
	pending, err := s.store.PendingInterrupts(c.Request().Context(), ids...)
	if err != nil {
		return err
	}
	out := taskList{Tasks: make([]Task, 0, len(forks))}
	who := request.Principal(c)
	for i := range forks {
		if !auth.MaySee(who, &forks[i]) {
			continue
		}
		var p *graph.Interrupt
		if itr, ok := pending[forks[i].ID]; ok {
			p = &itr
		}
		out.Tasks = append(out.Tasks, s.taskJSON(&forks[i], p))
	}
	return response.JSON(c, http.StatusOK, out)
}
