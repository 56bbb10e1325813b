package api

import (
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
func (h *Handler) taskJSON(t *graph.Task, pending *graph.Interrupt) Task {
	out := taskJSON(t, pending)
	out.DefinitionChanged = h.definitionChanged(t)
	return out
}

// definitionChanged: the task was stored under another definition of its
// workflow than the one this binary runs.
func (h *Handler) definitionChanged(t *graph.Task) bool {
	w, err := h.engine.Workflow(t.Workflow)
	return err == nil && graph.DefinitionChanged(t, w)
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
func (h *Handler) forkTask(c echo.Context) error {
	src, err := h.taskOf(c)
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
	t, err := h.engine.Fork(c.Request().Context(), graph.ForkRequest{TaskID: src.ID, Step: *req.Step, Patch: req.State,
		Title: req.Title, CreatedBy: request.Principal(c).Name})
	if err != nil {
		return err
	}
	if t.Status == graph.StatusQueued {
		h.wakeRunner()
	}
	c.Response().Header().Set(echo.HeaderLocation, Prefix+"/tasks/"+t.ID)
	return h.renderTask(c, http.StatusCreated, t.ID)
}

// listForks: GET /api/v1/tasks/:id/forks → {"tasks": [Task]}, the tasks
// forked from this one, oldest first.
func (h *Handler) listForks(c echo.Context) error {
	t, err := h.taskOf(c)
	if err != nil {
		return err
	}
	forks, err := h.store.Forks(c.Request().Context(), t.ID)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(forks))
	for _, f := range forks {
		if f.Status == graph.StatusWaiting {
			ids = append(ids, f.ID)
		}
	}
	pending, err := h.store.PendingInterrupts(c.Request().Context(), ids...)
	if err != nil {
		return err
	}
	out := TaskList{Tasks: make([]Task, 0, len(forks))}
	who := request.Principal(c)
	for i := range forks {
		if !auth.MaySee(who, &forks[i]) {
			continue
		}
		var p *graph.Interrupt
		if itr, ok := pending[forks[i].ID]; ok {
			p = &itr
		}
		out.Tasks = append(out.Tasks, h.taskJSON(&forks[i], p))
	}
	return response.JSON(c, http.StatusOK, out)
}
