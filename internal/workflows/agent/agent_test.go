package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
)

type providerFunc func(context.Context, llm.Request) (llm.Response, error)

func (f providerFunc) Name() string { return "func" }
func (f providerFunc) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	return f(ctx, req)
}

type st struct {
	Replies []string `json:"replies"`
}

// runOnce runs a one-node graph whose node calls agent.Ask with p, and
// returns the outcome and the llm.call events.
func runOnce(t *testing.T, p llm.Provider, prompt string) (graph.Outcome, []map[string]any, *graph.MemoryCheckpointer, string) {
	t.Helper()
	g, err := graph.New[st]("one").
		Node("speak", func(ctx context.Context, run *graph.NodeRun, s st) (st, error) {
			resp, err := agent.Ask(ctx, p, run, "one.speaker", prompt, "the subject")
			if err != nil {
				return s, err
			}
			s.Replies = append(s.Replies, resp.Text)
			return s, nil
		}, graph.WithRetry(graph.RetryPolicy{Attempts: 2, Backoff: time.Millisecond})).
		Edge("speak", graph.END).
		Init(func(json.RawMessage, graph.Options) (st, error) { return st{}, nil }).
		Compile()
	if err != nil {
		t.Fatal(err)
	}
	cp := graph.NewMemoryCheckpointer()
	eng, err := graph.NewEngine(cp, []graph.Workflow{g})
	if err != nil {
		t.Fatal(err)
	}
	task, err := eng.Create(context.Background(), graph.NewTask{Workflow: "one"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := eng.Run(context.Background(), task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var calls []map[string]any
	for _, e := range cp.Events(task.ID) {
		if e.Type == graph.EventLLMCall {
			var m map[string]any
			if err := json.Unmarshal(e.Data, &m); err != nil {
				t.Fatal(err)
			}
			calls = append(calls, m)
		}
	}
	return out, calls, cp, task.ID
}

func TestAskRecordsTheCall(t *testing.T) {
	t.Parallel()
	var got llm.Request
	p := providerFunc(func(_ context.Context, req llm.Request) (llm.Response, error) {
		got = req
		return llm.Response{Text: "hello", Model: "m1", PromptTokens: 4, ReplyTokens: 1, Duration: 1500 * time.Millisecond}, nil
	})
	out, calls, _, id := runOnce(t, p, "say hello")
	if out.Status != graph.StatusSucceeded {
		t.Fatalf("outcome = %+v", out)
	}
	if got.Role != "one.speaker" || got.Prompt != "say hello" || got.TaskID != id || got.Iteration != 1 || got.Subject != "the subject" {
		t.Errorf("request = %+v", got)
	}
	if len(calls) != 1 {
		t.Fatalf("llm.call events = %d", len(calls))
	}
	c := calls[0]
	if c["role"] != "one.speaker" || c["provider"] != "func" || c["model"] != "m1" || c["prompt"] != "say hello" ||
		c["reply"] != "hello" || c["duration_ms"] != float64(1500) || c["prompt_tokens"] != float64(4) ||
		c["reply_tokens"] != float64(1) || c["attempt"] != float64(1) || c["error"] != nil {
		t.Errorf("llm.call = %v", c)
	}
}

func TestAskCutsLongTexts(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", agent.MaxEventText) // 2 bytes each
	p := providerFunc(func(context.Context, llm.Request) (llm.Response, error) { return llm.Response{Text: long}, nil })
	_, calls, _, _ := runOnce(t, p, long)
	c := calls[0]
	prompt, reply := c["prompt"].(string), c["reply"].(string)
	if len(prompt) != agent.MaxEventText || len(reply) != agent.MaxEventText || c["prompt_truncated"] != true || c["reply_truncated"] != true {
		t.Errorf("cut to %d/%d bytes, flags %v %v", len(prompt), len(reply), c["prompt_truncated"], c["reply_truncated"])
	}
	if s, cut := agent.Cut("aé", 2); s != "a" || !cut {
		t.Errorf("Cut split a rune: %q", s)
	}
}

func TestAskErrors(t *testing.T) {
	t.Parallel()
	t.Run("config errors are permanent", func(t *testing.T) {
		t.Parallel()
		p := providerFunc(func(context.Context, llm.Request) (llm.Response, error) {
			return llm.Response{}, &llm.ConfigError{Provider: "func", Message: "model not found"}
		})
		out, calls, _, _ := runOnce(t, p, "x")
		if out.Status != graph.StatusFailed || len(calls) != 1 || !strings.Contains(out.Error, "speak: one.speaker call failed") ||
			!strings.Contains(out.Error, "model not found") || calls[0]["error"] == nil {
			t.Errorf("outcome %+v, %d calls", out, len(calls))
		}
	})
	t.Run("other errors are retried", func(t *testing.T) {
		t.Parallel()
		n := 0
		p := providerFunc(func(context.Context, llm.Request) (llm.Response, error) {
			n++
			if n == 1 {
				return llm.Response{}, llm.Transient(errors.New("connection refused"))
			}
			return llm.Response{Text: "ok"}, nil
		})
		out, calls, _, _ := runOnce(t, p, "x")
		if out.Status != graph.StatusSucceeded || len(calls) != 2 || calls[0]["error"] == nil || calls[1]["attempt"] != float64(2) {
			t.Errorf("outcome %+v, calls %v", out, calls)
		}
	})
	t.Run("an empty reply is an error", func(t *testing.T) {
		t.Parallel()
		p := providerFunc(func(context.Context, llm.Request) (llm.Response, error) { return llm.Response{Text: "  \n"}, nil })
		out, calls, _, _ := runOnce(t, p, "x")
		if out.Status != graph.StatusFailed || len(calls) != 2 || !strings.Contains(out.Error, "empty reply") {
			t.Errorf("outcome %+v, %d calls", out, len(calls))
		}
	})
}

func TestJSONObject(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"a": 1}`:                      `{"a": 1}`,
		"```json\n{\"a\": 1}\n```":      `{"a": 1}`,
		`Sure! {"a": {"b": 2}} Enjoy.`:  `{"a": {"b": 2}}`,
		"  {\"a\": [1, 2]}\n\nThanks\n": `{"a": [1, 2]}`,
	} {
		got, err := agent.JSONObject(in)
		if err != nil || got != want {
			t.Errorf("JSONObject(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := agent.JSONObject("no json } here {"); !errors.Is(err, agent.ErrNoJSONObject) {
		t.Errorf("err = %v", err)
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	type in struct {
		Query string `json:"query"`
		N     *int   `json:"n"`
		Files []struct {
			Name string `json:"name"`
		} `json:"files"`
	}
	for raw, field := range map[string]string{
		`{"query": 1}`:             "input.query",
		`{"n": "x"}`:               "input.n",
		`{"n": 1.5}`:               "input.n",
		`{"files": [{"name": 3}]}`: "input.files.name",
		`{"other": 1}`:             "input.other",
		`"text"`:                   "input",
		`{} {}`:                    "input",
		`{`:                        "input",
	} {
		var v in
		err := agent.Decode(json.RawMessage(raw), &v, "input", "the test input", "query", "n", "files")
		var ve *graph.ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("Decode(%s) = %v, want a validation error for %s", raw, err, field)
		}
	}
	var v in
	if err := agent.Decode(nil, &v, "input", "x"); err != nil {
		t.Errorf("empty input: %v", err)
	}
}

func TestSubjectHelpers(t *testing.T) {
	t.Parallel()
	if k := agent.Keywords("Let users export their reports as CSV files, with reports filtered.", 3); strings.Join(k, ",") != "export,reports,files" {
		t.Errorf("Keywords = %v", k)
	}
	if n := agent.Name("eco-friendly water bottles", "x"); n != "Eco-friendly Water Bottles" {
		t.Errorf("Name = %q", n)
	}
	if agent.Pick("a", 5) != agent.Pick("a", 5) || agent.Pick("x", 1) != 0 {
		t.Error("Pick is not deterministic")
	}
	if s := agent.FirstSentence("One two. Three.", 100); s != "One two." {
		t.Errorf("FirstSentence = %q", s)
	}
	if s := agent.Excerpt("a  b\nc", 3); s != "a b…" {
		t.Errorf("Excerpt = %q", s)
	}
}
