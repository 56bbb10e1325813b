package mcp

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
)

// StartTaskInput is the arguments of start_task: POST /api/v1/tasks's body.
type StartTaskInput struct {
	Workflow string          `json:"workflow" jsonschema:"the workflow to run (list_workflows names them)"`
	Input    json.RawMessage `json:"input" jsonschema:"the task's input, valid against the workflow's input_schema"`
	Options  json.RawMessage `json:"options,omitempty" jsonschema:"task options (SPEC §7), e.g. gates"`
	Title    string          `json:"title,omitempty" jsonschema:"a title for people (default: one made from the input)"`
}

// taskIDInput is the arguments of get_task.
type taskIDInput struct {
	ID string `json:"id" jsonschema:"the task's id (a uuid)"`
}

// Workflow is one workflow as list_workflows describes it.
type Workflow struct {
	Name        string          `json:"name"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// workflowList is the result of list_workflows.
type workflowList struct {
	Workflows []Workflow `json:"workflows"`
}

func (s *Server) addTaskTools() {
	readOnly := &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}
	sdk.AddTool(s.srv, &sdk.Tool{Name: "list_workflows", Title: "List workflows",
		Description: "The workflows Gatehouse runs, with the JSON Schema of each one's input (for start_task).",
		Annotations: readOnly,
		OutputSchema: SchemaFor[workflowList](map[string]*jsonschema.Schema{
			"workflows": {Type: "array", Items: SchemaFor[Workflow](map[string]*jsonschema.Schema{
				"input_schema": {Type: "object", Description: "JSON Schema of the workflow's input"}})}}),
	}, s.listWorkflows)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "start_task", Title: "Start a task",
		Description: "Starts a task of a workflow (POST /api/v1/tasks) and returns the Task. Needs the operator role.",
		Annotations: &sdk.ToolAnnotations{OpenWorldHint: new(false)},
		InputSchema: SchemaFor[StartTaskInput](map[string]*jsonschema.Schema{
			"input":   {Type: "object"},
			"options": {Type: "object"},
			"title":   {Type: "string", MaxLength: new(200)},
		}),
		OutputSchema: s.d.TaskSchema,
	}, s.startTask)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "get_task", Title: "Get a task",
		Description: "A task as GET /api/v1/tasks/{id} returns it: status, current node, pending interrupt, result.",
		Annotations: readOnly, OutputSchema: s.d.TaskSchema,
	}, s.getTask)
}

func (s *Server) listWorkflows(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, workflowList, error) {
	if _, err := principal(req, auth.RoleViewer); err != nil {
		return nil, workflowList{}, err
	}
	out := workflowList{Workflows: []Workflow{}}
	for _, d := range s.d.Tasks.Workflows() {
		schema := d.InputSchema
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out.Workflows = append(out.Workflows, Workflow{Name: d.Name, Title: d.Title, Description: d.Description, InputSchema: schema})
	}
	return nil, out, nil
}

func (s *Server) startTask(ctx context.Context, req *sdk.CallToolRequest, in StartTaskInput) (*sdk.CallToolResult, any, error) {
	p, err := principal(req, auth.RoleOperator)
	if err != nil {
		return nil, nil, err
	}
	if strings.TrimSpace(in.Workflow) == "" {
		return nil, nil, badArg("workflow", "is required")
	}
	t, err := s.d.Tasks.StartTask(ctx, p, in)
	if err != nil {
		return nil, nil, s.fail("start_task", err)
	}
	return nil, t, nil
}

func (s *Server) getTask(ctx context.Context, req *sdk.CallToolRequest, in taskIDInput) (*sdk.CallToolResult, any, error) {
	p, err := principal(req, auth.RoleViewer)
	if err != nil {
		return nil, nil, err
	}
	id, err := checkID(in.ID)
	if err != nil {
		return nil, nil, err
	}
	t, err := s.d.Tasks.Task(ctx, p, id)
	if err != nil {
		return nil, nil, s.fail("get_task", err)
	}
	return nil, t, nil
}

// checkID refuses an id that is not a uuid, naming the field "id".
func checkID(id string) (string, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return "", badArg("id", "is required")
	}
	if !graph.ValidID(id) {
		return "", badArg("id", "is not a uuid: %q", id)
	}
	return id, nil
}
