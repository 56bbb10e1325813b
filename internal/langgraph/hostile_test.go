package langgraph_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestHostileTextChangesNothing: a NUL (the JSON escape \u0000) or invalid
// UTF-8 anywhere in a body — a thread's metadata, a run's input, config or
// metadata, a command's resume, a state update, a search — or in a query
// parameter is 400 naming the field in {"detail"}, and nothing is created,
// run or decided. PostgreSQL stores neither: before the check these were
// 500s, or (invalid UTF-8) silently stored as U+FFFD.
func TestHostileTextChangesNothing(t *testing.T) {
	t.Parallel()
	s := setup(t)
	sc := s.scene(t, "Hostile text")
	idle, waiting, run := sc.idle, sc.waiting, sc.run
	const nul, bad = `\u0000`, "\xff\xfe"
	resume := func(args string) string {
		return `{"assistant_id":"feature","command":{"resume":[{"type":"response","args":"` + args + `"}]}}`
	}
	for _, c := range []struct {
		name, method, path, body, field string
	}{
		{"ThreadMetadataNUL", http.MethodPost, "/threads", `{"metadata":{"owner":"a` + nul + `b"}}`, "metadata.owner"},
		{"ThreadMetadataUTF8", http.MethodPost, "/threads", `{"metadata":{"owner":"a` + bad + `b"}}`, "metadata.owner"},
		{"ThreadMetadataKey", http.MethodPost, "/threads", `{"metadata":{"own` + nul + `er":"x"}}`, "metadata"},
		{"ThreadID", http.MethodPost, "/threads", `{"thread_id":"` + bad + `"}`, "thread_id"},
		{"RunInputNUL", http.MethodPost, "/threads/" + idle + "/runs", `{"assistant_id":"feature","input":{"description":"CSV` + nul + `"}}`, "input.description"},
		{"RunInputUTF8", http.MethodPost, "/threads/" + idle + "/runs", `{"assistant_id":"feature","input":{"description":"CSV` + bad + `"}}`, "input.description"},
		{"RunStreamInput", http.MethodPost, "/threads/" + idle + "/runs/stream", `{"assistant_id":"feature","input":{"description":"` + nul + `"}}`, "input.description"},
		{"RunWaitInput", http.MethodPost, "/threads/" + idle + "/runs/wait", `{"assistant_id":"feature","input":{"description":"` + bad + `"}}`, "input.description"},
		{"RunMetadata", http.MethodPost, "/threads/" + idle + "/runs", `{"assistant_id":"feature","input":{"description":"ok"},"metadata":{"k":"` + nul + `"}}`, "metadata.k"},
		{"RunConfig", http.MethodPost, "/threads/" + idle + "/runs", `{"assistant_id":"feature","input":{"description":"ok"},"config":{"tags":["x","` + bad + `"]}}`, "config.tags[1]"},
		{"AssistantID", http.MethodPost, "/threads/" + idle + "/runs", `{"assistant_id":"feat` + nul + `ure","input":{"description":"ok"}}`, "assistant_id"},
		{"ResumeNUL", http.MethodPost, "/threads/" + waiting + "/runs", resume("no" + nul + "pe"), "command.resume[0].args"},
		{"ResumeUTF8", http.MethodPost, "/threads/" + waiting + "/runs/wait", resume("no" + bad + "pe"), "command.resume[0].args"},
		{"StateUpdate", http.MethodPost, "/threads/" + waiting + "/state", `{"values":{"feedback":"` + nul + `"},"as_node":"__end__"}`, "values.feedback"},
		{"ThreadSearch", http.MethodPost, "/threads/search", `{"metadata":{"owner":"` + nul + `"}}`, "metadata.owner"},
		{"ThreadSearchStatus", http.MethodPost, "/threads/search", `{"status":"` + bad + `"}`, "status"},
		{"AssistantSearch", http.MethodPost, "/assistants/search", `{"graph_id":"` + nul + `"}`, "graph_id"},
		{"History", http.MethodPost, "/threads/" + waiting + "/history", `{"metadata":{"x":"` + bad + `"}}`, "metadata.x"},
		{"QueryRunsStatus", http.MethodGet, "/threads/" + waiting + "/runs?status=%00", "", "status"},
		{"QueryHistoryLimit", http.MethodGet, "/threads/" + waiting + "/history?limit=%FF", "", "limit"},
		{"QueryCancelAction", http.MethodPost, "/threads/" + waiting + "/runs/" + run + "/cancel?action=%00", "", "action"},
		{"QueryStreamMode", http.MethodGet, "/threads/" + waiting + "/runs/" + run + "/stream?stream_mode=%FF", "", "stream_mode"},
		{"QueryName", http.MethodGet, "/threads/" + waiting + "/runs?%00=1", "", "parameter name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var body any
			if c.body != "" {
				body = c.body
			}
			problem := "UTF-8"
			if strings.Contains(c.body+c.path, nul) || strings.Contains(c.path, "%00") {
				problem = "NUL"
			}
			s.refused(t, sc, s.do(t, c.method, c.path, body), http.StatusBadRequest, c.field, problem)
		})
	}
}
