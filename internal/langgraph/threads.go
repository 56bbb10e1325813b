package langgraph

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

func itoa(n int) string { return strconv.Itoa(n) }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// threadStatus is LangGraph's status of a thread whose task has status s
// ("" before its first run).
func threadStatus(s graph.TaskStatus) string {
	switch s {
	case graph.StatusQueued, graph.StatusRunning:
		return "busy"
	case graph.StatusWaiting:
		return "interrupted"
	case graph.StatusFailed:
		return "error"
	default:
		return "idle"
	}
}

// thread is LangGraph's Thread.
type thread struct {
	ThreadID   string                      `json:"thread_id"`
	CreatedAt  string                      `json:"created_at"`
	UpdatedAt  string                      `json:"updated_at"`
	Metadata   json.RawMessage             `json:"metadata"`
	Status     string                      `json:"status"`
	Values     json.RawMessage             `json:"values"`
	Interrupts map[string][]interruptValue `json:"interrupts"`
	Config     map[string]any              `json:"config"`
	Error      any                         `json:"error"`
}

// view is what a thread's JSON and state are made of: the thread, its
// task with the pending interrupt and the current checkpoint (nil before
// the first run).
type view struct {
	th       *postgres.LGThread
	task     *graph.Task
	pending  *graph.Interrupt
	cp       *graph.Checkpoint
	feedback string
}

// load reads a thread with its task, its current checkpoint and the
// feedback its interrupt shows. Errors: 404.
func (a *API) load(ctx context.Context, threadID string) (*view, error) {
	v, err := a.loadTask(ctx, threadID)
	if err != nil || v.task == nil {
		return v, err
	}
	if v.cp, err = a.store.CurrentCheckpoint(ctx, v.th.ID); err != nil {
		return nil, err
	}
	if v.pending != nil {
		if v.feedback, err = a.lastFeedback(ctx, v.task.ID, v.pending); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// loadTask reads a thread with its task and pending interrupt only (what
// starting a run needs).
func (a *API) loadTask(ctx context.Context, threadID string) (*view, error) {
	if _, err := uuid.Parse(threadID); err != nil {
		return nil, unprocessable("thread_id: %s is not a UUID", quote(threadID))
	}
	th, err := a.store.LGThread(ctx, threadID, a.assistantsJSON)
	if err != nil {
		return nil, err
	}
	v := &view{th: th}
	if th.TaskStatus == "" {
		return v, nil
	}
	if v.task, v.pending, err = a.store.TaskWithPending(ctx, th.ID); err != nil {
		return nil, err
	}
	return v, nil
}

// lastFeedback is the feedback of the last rejection at itr's node: the
// reviewer sees why this version was made.
func (a *API) lastFeedback(ctx context.Context, taskID string, itr *graph.Interrupt) (string, error) {
	if itr.Iteration < 2 {
		return "", nil
	}
	return a.store.LGLastRejection(ctx, taskID, itr.Node, itr.ID)
}

func (v *view) status() string { return threadStatus(v.th.TaskStatus) }

func (v *view) values() json.RawMessage {
	if v.cp == nil || len(v.cp.State) == 0 {
		return json.RawMessage(`{}`)
	}
	return v.cp.State
}

func (v *view) interrupts() map[string][]interruptValue {
	out := map[string][]interruptValue{}
	if v.pending != nil && v.task.Status == graph.StatusWaiting {
		out[v.pending.Node] = []interruptValue{{Value: humanInterruptOf(v.task, v.pending, v.feedback), ID: v.pending.ID}}
	}
	return out
}

func (v *view) json() thread {
	t := thread{ThreadID: v.th.ID, CreatedAt: stamp(v.th.CreatedAt), UpdatedAt: stamp(v.th.UpdatedAt), Metadata: v.th.Metadata,
		Status: v.status(), Values: v.values(), Interrupts: v.interrupts(), Config: map[string]any{}}
	if len(t.Metadata) == 0 {
		t.Metadata = json.RawMessage(`{}`)
	}
	if v.task != nil && v.task.Status == graph.StatusFailed {
		t.Error = v.task.Error
	}
	return t
}

// mayRead hides a task the principal may not see, as the native API does.
func mayRead(c echo.Context, v *view) error {
	if v.task != nil && !auth.MaySee(principalOf(c), v.task) {
		return notFound("thread")
	}
	return nil
}

type createThreadRequest struct {
	ThreadID string          `json:"thread_id"`
	Metadata json.RawMessage `json:"metadata"`
	IfExists string          `json:"if_exists"`
}

// createThread: POST /threads → Thread. A thread holds no task until its
// first run.
func (a *API) createThread(c echo.Context) error {
	if err := need(c, auth.RoleOperator, "creating a thread"); err != nil {
		return err
	}
	var req createThreadRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	md, err := objectOrEmpty(req.Metadata, "metadata")
	if err != nil {
		return err
	}
	switch req.IfExists {
	case "", "raise", "do_nothing":
	default:
		return unprocessable("if_exists: want raise or do_nothing, not %s", quote(req.IfExists))
	}
	id := strings.TrimSpace(req.ThreadID)
	if id == "" {
		id = graph.NewID()
	} else if u, err := uuid.Parse(id); err != nil {
		return unprocessable("thread_id: %s is not a UUID", quote(id))
	} else {
		id = u.String()
	}
	ctx := c.Request().Context()
	created, err := a.store.LGCreateThread(ctx, id, md, principalOf(c).Name)
	if err != nil {
		return err
	}
	if !created && req.IfExists != "do_nothing" {
		return conflict("thread %s already exists", id)
	}
	v, err := a.load(ctx, id)
	if err != nil {
		return err
	}
	if err := mayRead(c, v); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, v.json())
}

// objectOrEmpty checks that raw is a JSON object (or absent: {}).
func objectOrEmpty(raw json.RawMessage, field string) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`), nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, unprocessable("%s: must be an object", field)
	}
	// Drop null members: the SDK sends {"graph_id": undefined} as {}.
	for k, v := range m {
		if v == nil {
			delete(m, k)
		}
	}
	b, _ := json.Marshal(m)
	return b, nil
}

// getThread: GET /threads/{id} → Thread with values and interrupts.
func (a *API) getThread(c echo.Context) error {
	v, err := a.load(c.Request().Context(), c.Param("thread_id"))
	if err != nil {
		return err
	}
	if err := mayRead(c, v); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, v.json())
}

type threadSearch struct {
	Metadata  json.RawMessage `json:"metadata"`
	Values    json.RawMessage `json:"values"`
	IDs       []string        `json:"ids"`
	Status    string          `json:"status"`
	Limit     *int            `json:"limit"`
	Offset    *int            `json:"offset"`
	SortBy    string          `json:"sort_by"`
	SortOrder string          `json:"sort_order"`
}

// searchThreads: POST /threads/search → [Thread], newest first unless
// sort_by says otherwise.
func (a *API) searchThreads(c echo.Context) error {
	var q threadSearch
	if err := decodeBody(c, &q); err != nil {
		return err
	}
	limit, offset, err := page(q.Limit, q.Offset, 10, 1000)
	if err != nil {
		return err
	}
	md, err := objectOrEmpty(q.Metadata, "metadata")
	if err != nil {
		return err
	}
	if len(q.Values) > 0 && string(q.Values) != "null" && string(q.Values) != "{}" {
		return unprocessable("values: filtering threads by values is not supported; filter by metadata or status")
	}
	switch q.Status {
	case "", "idle", "busy", "interrupted", "error":
	default:
		return unprocessable("status: want idle, busy, interrupted or error, not %s", quote(q.Status))
	}
	sortBy := q.SortBy
	switch sortBy {
	case "":
		sortBy = "created_at"
	case "thread_id", "status", "created_at", "updated_at":
	default:
		return unprocessable("sort_by: want thread_id, status, created_at or updated_at, not %s", quote(q.SortBy))
	}
	desc := true
	switch strings.ToLower(q.SortOrder) {
	case "", "desc":
	case "asc":
		desc = false
	default:
		return unprocessable("sort_order: want asc or desc, not %s", quote(q.SortOrder))
	}
	for _, id := range q.IDs {
		if _, err := uuid.Parse(id); err != nil {
			return unprocessable("ids: %s is not a UUID", quote(id))
		}
	}
	ctx := c.Request().Context()
	ths, total, err := a.store.LGSearchThreads(ctx, postgres.LGThreadQuery{Status: q.Status, Metadata: md, IDs: q.IDs,
		SortBy: sortBy, Descending: desc, Limit: limit, Offset: offset, Assistants: a.assistantsJSON})
	if err != nil {
		return err
	}
	out := make([]thread, 0, len(ths))
	for i := range ths {
		v, err := a.load(ctx, ths[i].ID)
		if errors.Is(err, postgres.ErrThreadNotFound) {
			continue // gone since
		}
		if err != nil {
			return err
		}
		if mayRead(c, v) != nil {
			continue
		}
		out = append(out, v.json())
	}
	c.Response().Header().Set("X-Pagination-Total", strconv.FormatInt(total, 10))
	if int64(offset+limit) < total {
		c.Response().Header().Set("X-Pagination-Next", itoa(offset+limit))
	}
	return writeJSON(c, http.StatusOK, out)
}

// threadState is LangGraph's ThreadState.
type threadState struct {
	Values           json.RawMessage  `json:"values"`
	Next             []string         `json:"next"`
	Tasks            []stateTask      `json:"tasks"`
	Checkpoint       checkpointRef    `json:"checkpoint"`
	Metadata         map[string]any   `json:"metadata"`
	CreatedAt        *string          `json:"created_at"`
	ParentCheckpoint *checkpointRef   `json:"parent_checkpoint"`
	Interrupts       []interruptValue `json:"interrupts"`
}

type stateTask struct {
	ID         string           `json:"id"`
	Name       string           `json:"name"`
	Path       []string         `json:"path"`
	Error      *string          `json:"error"`
	Interrupts []interruptValue `json:"interrupts"`
	Checkpoint any              `json:"checkpoint"`
	State      any              `json:"state"`
	Result     any              `json:"result"`
}

type checkpointRef struct {
	ThreadID     string  `json:"thread_id"`
	CheckpointNS string  `json:"checkpoint_ns"`
	CheckpointID *string `json:"checkpoint_id"`
	// CheckpointMap is LangGraph's, always null here (no subgraphs).
	CheckpointMap any `json:"checkpoint_map"`
}

// checkpointID names step n of a thread's checkpoints, stably.
func checkpointID(threadID string, step int) string {
	ns, _ := uuid.Parse(threadID)
	return uuid.NewSHA1(ns, []byte("checkpoint:"+strconv.Itoa(step))).String()
}

func taskID(threadID, node string, iteration int) string {
	ns, _ := uuid.Parse(threadID)
	return uuid.NewSHA1(ns, []byte("task:"+node+":"+strconv.Itoa(iteration))).String()
}

func ref(threadID string, step int) checkpointRef {
	id := checkpointID(threadID, step)
	return checkpointRef{ThreadID: threadID, CheckpointID: &id}
}

// state is the thread's current ThreadState.
func (v *view) state() threadState {
	st := threadState{Values: v.values(), Next: []string{}, Tasks: []stateTask{}, Interrupts: []interruptValue{},
		Checkpoint: checkpointRef{ThreadID: v.th.ID}, Metadata: map[string]any{}}
	if v.task == nil || v.cp == nil {
		return st
	}
	st.Checkpoint = ref(v.th.ID, v.cp.Step)
	at := stamp(v.cp.UpdatedAt)
	st.CreatedAt = &at
	if v.cp.Step > 0 {
		p := ref(v.th.ID, v.cp.Step-1)
		st.ParentCheckpoint = &p
	}
	st.Metadata = map[string]any{"step": v.cp.Step, "source": "loop", "graph_id": v.task.Workflow,
		"assistant_id": AssistantID(v.task.Workflow), "thread_id": v.th.ID, "task_status": string(v.task.Status),
		"last_node": v.cp.LastNode}
	node := v.cp.NextNode
	switch v.task.Status {
	case graph.StatusWaiting:
		if v.pending != nil {
			node = v.pending.Node
			iv := v.interrupts()[node]
			st.Interrupts = iv
			st.Next = []string{node}
			st.Tasks = []stateTask{{ID: taskID(v.th.ID, node, v.pending.Iteration), Name: node, Path: []string{"__pregel_pull", node},
				Interrupts: iv}}
		}
	case graph.StatusFailed:
		msg := v.task.Error
		st.Next = []string{node}
		st.Tasks = []stateTask{{ID: taskID(v.th.ID, node, 0), Name: node, Path: []string{"__pregel_pull", node}, Error: &msg,
			Interrupts: []interruptValue{}}}
	case graph.StatusQueued, graph.StatusRunning:
		if node != "" && node != graph.END {
			st.Next = []string{node}
			st.Tasks = []stateTask{{ID: taskID(v.th.ID, node, 0), Name: node, Path: []string{"__pregel_pull", node},
				Interrupts: []interruptValue{}}}
		}
	}
	return st
}

// getState: GET /threads/{id}/state → ThreadState.
func (a *API) getState(c echo.Context) error {
	v, err := a.load(c.Request().Context(), c.Param("thread_id"))
	if err != nil {
		return err
	}
	if err := mayRead(c, v); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, v.state())
}

type updateStateRequest struct {
	Values       json.RawMessage `json:"values"`
	AsNode       *string         `json:"as_node"`
	Checkpoint   json.RawMessage `json:"checkpoint"`
	CheckpointID *string         `json:"checkpoint_id"`
}

// updateState: POST /threads/{id}/state. Only as_node "__end__" (Agent
// Inbox's "mark as resolved") is taken: it cancels the pending interrupt
// and the task, saying "resolved by <actor>". Gatehouse changes a task's
// state only through its nodes and decisions.
func (a *API) updateState(c echo.Context) error {
	var req updateStateRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := need(c, auth.RoleOperator, "resolving a thread"); err != nil {
		return err
	}
	if req.AsNode == nil || *req.AsNode != graph.END {
		return unprocessable("as_node: only \"__end__\" (mark as resolved: cancel the pending interrupt and the task) is supported; " +
			"a task's state changes only through its nodes and decisions (resume with command.resume)")
	}
	if len(req.Values) > 0 && string(req.Values) != "null" && string(req.Values) != "{}" {
		return unprocessable("values: must be null with as_node \"__end__\"; a task's state changes only through its nodes and decisions")
	}
	ctx := c.Request().Context()
	v, err := a.load(ctx, c.Param("thread_id"))
	if err != nil {
		return err
	}
	if err := mayRead(c, v); err != nil {
		return err
	}
	if v.task == nil || v.task.Status != graph.StatusWaiting {
		return conflict("thread %s is %s, not interrupted: there is nothing to resolve", v.th.ID, v.status())
	}
	who := principalOf(c).Name
	if err := a.store.CancelBecause(ctx, v.task.ID, who, "resolved by "+who); err != nil {
		return err
	}
	if v, err = a.load(ctx, v.th.ID); err != nil {
		return err
	}
	st := v.state()
	return writeJSON(c, http.StatusOK, map[string]any{"checkpoint": st.Checkpoint})
}

type historyRequest struct {
	Limit *int `json:"limit"`
}

// history: POST /threads/{id}/history → [ThreadState], newest first.
func (a *API) history(c echo.Context) error {
	var req historyRequest
	if c.Request().Method == http.MethodPost {
		if err := decodeBody(c, &req); err != nil {
			return err
		}
	} else if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			return unprocessable("limit: must be a number")
		}
		req.Limit = &n
	}
	limit, _, err := page(req.Limit, nil, 10, 1000)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	v, err := a.load(ctx, c.Param("thread_id"))
	if err != nil {
		return err
	}
	if err := mayRead(c, v); err != nil {
		return err
	}
	out := []threadState{}
	if v.task == nil {
		return writeJSON(c, http.StatusOK, out)
	}
	hist, err := a.store.History(ctx, v.task.ID)
	if err != nil {
		return err
	}
	for i := len(hist) - 1; i >= 0 && len(out) < limit; i-- {
		h := hist[i]
		if i == len(hist)-1 && h.Step == v.cp.Step {
			out = append(out, v.state())
			continue
		}
		cp, err := a.store.CheckpointAt(ctx, v.task.ID, h.Step)
		if errors.Is(err, postgres.ErrCheckpointNotFound) {
			continue // pruned meanwhile
		}
		if err != nil {
			return err
		}
		st := threadState{Values: cp.State, Next: []string{}, Tasks: []stateTask{}, Interrupts: []interruptValue{},
			Checkpoint: ref(v.th.ID, h.Step), Metadata: map[string]any{"step": h.Step, "source": h.Reason,
				"graph_id": v.task.Workflow, "thread_id": v.th.ID, "last_node": h.LastNode}}
		at := stamp(h.CreatedAt)
		st.CreatedAt = &at
		if h.Step > 0 {
			p := ref(v.th.ID, h.Step-1)
			st.ParentCheckpoint = &p
		}
		if h.NextNode != "" && h.NextNode != graph.END {
			st.Next = []string{h.NextNode}
			st.Tasks = []stateTask{{ID: taskID(v.th.ID, h.NextNode, 0), Name: h.NextNode, Path: []string{"__pregel_pull", h.NextNode},
				Interrupts: []interruptValue{}}}
		}
		out = append(out, st)
	}
	return writeJSON(c, http.StatusOK, out)
}
