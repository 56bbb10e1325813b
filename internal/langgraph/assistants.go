package langgraph

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
)

// assistantNamespace is the UUID namespace of assistant ids (SPEC §14): the
// id of a workflow's assistant is UUIDv5(namespace, name), as LangGraph's
// server derives the default assistant of a graph.
var assistantNamespace = uuid.MustParse("6ba7b821-9dad-11d1-80b4-00c04fd430c8")

// AssistantID is the assistant id of a workflow.
func AssistantID(workflow string) string {
	return uuid.NewSHA1(assistantNamespace, []byte(workflow)).String()
}

// assistant is a workflow as LangGraph's Assistant.
type assistant struct {
	AssistantID string         `json:"assistant_id"`
	GraphID     string         `json:"graph_id"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Config      map[string]any `json:"config"`
	Context     map[string]any `json:"context"`
	Metadata    map[string]any `json:"metadata"`
	Version     int            `json:"version"`
	CreatedAt   string         `json:"created_at"`
	UpdatedAt   string         `json:"updated_at"`
}

func assistantsOf(e *graph.Engine, at time.Time) ([]assistant, []byte) {
	if e == nil {
		return nil, []byte(`{}`)
	}
	var out []assistant
	ids := map[string]string{}
	for _, w := range e.Workflows() {
		d := w.Describe()
		if d.Unlisted { // a request is asked through /api/v1/requests, not run as an assistant
			continue
		}
		stamp := at.Format(time.RFC3339Nano)
		out = append(out, assistant{AssistantID: AssistantID(d.Name), GraphID: d.Name, Name: d.Name, Description: d.Description,
			Config: map[string]any{"configurable": map[string]any{}}, Context: map[string]any{},
			Metadata: map[string]any{"created_by": "system", "title": d.Title}, Version: 1, CreatedAt: stamp, UpdatedAt: stamp})
		ids[d.Name] = AssistantID(d.Name)
	}
	b, _ := json.Marshal(ids)
	return out, b
}

// assistantFor resolves an assistant id or a graph name (accepted wherever
// an id is). Errors: 404 naming it; 422 when empty.
func (a *API) assistantFor(ref string) (*assistant, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return nil, unprocessable("assistant_id is required: an assistant id or a graph name (%s)", a.graphNames())
	}
	for i := range a.assistants {
		if strings.EqualFold(a.assistants[i].AssistantID, ref) || a.assistants[i].GraphID == ref {
			return &a.assistants[i], nil
		}
	}
	return nil, &apiError{Status: http.StatusNotFound,
		Detail: "assistant not found: " + quote(ref) + " is neither an assistant id nor a graph name (" + a.graphNames() + ")"}
}

func (a *API) assistantOfWorkflow(name string) *assistant {
	for i := range a.assistants {
		if a.assistants[i].GraphID == name {
			return &a.assistants[i]
		}
	}
	return nil
}

func (a *API) graphNames() string {
	names := make([]string, 0, len(a.assistants))
	for _, as := range a.assistants {
		names = append(names, as.GraphID)
	}
	return strings.Join(names, ", ")
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

type assistantSearch struct {
	GraphID   string          `json:"graph_id"`
	Name      string          `json:"name"`
	Metadata  json.RawMessage `json:"metadata"`
	Limit     *int            `json:"limit"`
	Offset    *int            `json:"offset"`
	SortBy    string          `json:"sort_by"`
	SortOrder string          `json:"sort_order"`
}

// searchAssistants: POST /assistants/search → [Assistant].
func (a *API) searchAssistants(c echo.Context) error {
	var q assistantSearch
	if err := decodeBody(c, &q); err != nil {
		return err
	}
	limit, offset, err := page(q.Limit, q.Offset, 10, 1000)
	if err != nil {
		return err
	}
	var md map[string]any
	if len(q.Metadata) > 0 && string(q.Metadata) != "null" {
		if err := json.Unmarshal(q.Metadata, &md); err != nil {
			return unprocessable("metadata: must be an object")
		}
	}
	out := []assistant{}
	for _, as := range a.assistants {
		if q.GraphID != "" && as.GraphID != q.GraphID {
			continue
		}
		if q.Name != "" && !strings.Contains(strings.ToLower(as.Name), strings.ToLower(q.Name)) {
			continue
		}
		if !contains(as.Metadata, md) {
			continue
		}
		out = append(out, as)
	}
	c.Response().Header().Set("X-Pagination-Total", itoa(len(out)))
	if offset >= len(out) {
		out = out[:0]
	} else {
		out = out[offset:]
	}
	if len(out) > limit {
		out = out[:limit]
		c.Response().Header().Set("X-Pagination-Next", itoa(offset+limit))
	}
	return writeJSON(c, http.StatusOK, out)
}

// getAssistant: GET /assistants/{id} (an id or a graph name).
func (a *API) getAssistant(c echo.Context) error {
	as, err := a.assistantFor(c.Param("assistant_id"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, as)
}

// contains is JSON containment of want in have (metadata filters).
func contains(have, want map[string]any) bool {
	hb, _ := json.Marshal(have)
	wb, _ := json.Marshal(want)
	var h, w any
	_ = json.Unmarshal(hb, &h)
	_ = json.Unmarshal(wb, &w)
	return containsValue(h, w)
}

func containsValue(have, want any) bool {
	switch w := want.(type) {
	case nil:
		return true
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			hv, ok := h[k]
			if !ok || !containsValue(hv, v) {
				return false
			}
		}
		return true
	default:
		hb, _ := json.Marshal(have)
		wb, _ := json.Marshal(want)
		return string(hb) == string(wb)
	}
}

// page checks limit and offset.
func page(limit, offset *int, def, max int) (int, int, error) {
	l, o := def, 0
	if limit != nil {
		l = *limit
	}
	if offset != nil {
		o = *offset
	}
	switch {
	case l < 1 || l > max:
		return 0, 0, unprocessable("limit: must be between 1 and %d", max)
	case o < 0:
		return 0, 0, unprocessable("offset: must not be negative")
	}
	return l, o, nil
}
