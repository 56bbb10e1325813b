package web

import (
	"context"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/mcp"
	"github.com/gatehousehq/gatehouse/internal/web/api"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// mountMCP serves SPEC §19's MCP server at /mcp. It authenticates its own
// calls (bearer tokens; each tool checks its role) and reads and writes
// through the API's code and wire types (mcpTasks, errorOf).
func (s *Server) mountMCP() {
	h := echo.WrapHandler(mcp.New(mcp.Deps{Auth: s.auth, Tasks: mcpTasks{s}, Requests: s.requests,
		TaskSchema: taskSchema(), Explain: explainProblem, Closing: s.sockets.Closing(),
		Logger: s.log.With("component", "mcp"), Version: s.version}))
	s.e.Any(mcp.Path, h)
}

// taskSchema is the JSON Schema of §7's Task.
func taskSchema() *jsonschema.Schema {
	obj := &jsonschema.Schema{Type: "object"}
	return mcp.SchemaFor[api.Task](map[string]*jsonschema.Schema{"input": obj, "options": obj})
}

// explainProblem is the API's answer to err, for an MCP tool error.
func explainProblem(err error) mcp.Problem {
	e := response.Of(err)
	return mcp.Problem{Status: e.Status, Code: e.Code, Field: e.Field, Message: e.Message}
}

// mcpTasks is mcp.Tasks over the API's own handlers' code.
type mcpTasks struct{ s *Server }

var _ mcp.Tasks = mcpTasks{}

// Workflows are the workflows an agent may start: all but the unlisted
// ones (request, whose tasks request_approval and ask_human make).
func (m mcpTasks) Workflows() []graph.Description {
	wfs := m.s.engine.Workflows()
	out := make([]graph.Description, 0, len(wfs))
	for _, w := range wfs {
		if d := w.Describe(); !d.Unlisted {
			out = append(out, d)
		}
	}
	return out
}

func (m mcpTasks) StartTask(ctx context.Context, p auth.Principal, in mcp.StartTaskInput) (any, error) {
	if w, err := m.s.engine.Workflow(strings.TrimSpace(in.Workflow)); err == nil && w.Describe().Unlisted {
		return nil, response.BadRequest("workflow", "workflow %q is not started as a task: "+
			"requests are made with request_approval or ask_human", w.Name())
	}
	t, err := m.s.api.StartTask(ctx, p, api.CreateTaskRequest{Workflow: in.Workflow, Title: in.Title, Input: in.Input, Options: in.Options}, mcp.Via)
	if err != nil {
		return nil, err
	}
	return m.s.api.TaskView(ctx, p, t.ID)
}

func (m mcpTasks) Task(ctx context.Context, p auth.Principal, id string) (any, error) {
	return m.s.api.TaskView(ctx, p, id)
}
