// Package analyze is the `analyze` workflow of seed 003 and SPEC §9: a
// conversational analysis in which the analyst asks and the human answers
// until the human approves the solution.
//
//	prepare → ask (question interrupt) → prepare → … → prepare → END
//
// prepare (seed 003's AnalysisPrepareNode) adds the human's latest message
// to the history; when that message contains "SOLUTION APPROVED" (in any
// letter case) it asks the analyst for the final analysis, which becomes
// the result, and the graph ends; otherwise it asks the analyst for the
// next message (a clarifying question or a proposed solution) with the
// whole history and the attached files in the prompt. ask (seed 003's
// AnalysisInterruptNode) puts that message to the human as a `question`
// interrupt and stores the answer for the next prepare. The human may
// also choose the approve action, which counts as "SOLUTION APPROVED".
//
// The input is a query and attached text files (name and content, as
// uploaded in the form); the files' contents are in every analyst prompt,
// the first one included.
//
// It imports graph, llm and agent only: no storage, no HTTP.
package analyze

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
)

// Name is the workflow's name.
const Name = "analyze"

// StateVersion is the version of State's shape, part of the workflow's
// definition version: bump it when a change of State would make a stored
// checkpoint mean something else.
const StateVersion = 1

// Node names.
const (
	NodePrepare = "prepare"
	NodeAsk     = "ask"
)

// Nodes lists the node names in graph order.
func Nodes() []string { return []string{NodePrepare, NodeAsk} }

// RoleAnalyst is the workflow's one agent role (SPEC §9).
const RoleAnalyst = "analyze.analyst"

// Roles lists the agent roles.
func Roles() []string { return []string{RoleAnalyst} }

// InterruptQuestion is the kind of the analyst's questions.
const InterruptQuestion = "question"

// ArtifactAnalysis is the final analysis.
const ArtifactAnalysis = "analysis.md"

// ApprovalPhrase ends the conversation when a human message contains it.
const ApprovalPhrase = "SOLUTION APPROVED"

// Message authors in the history.
const (
	FromUser  = "user"
	FromAgent = "agent"
)

// Input limits: the API refuses bodies over 1 MiB.
const (
	MaxQuery        = 16 << 10
	MaxFiles        = 20
	MaxFileName     = 255
	MaxFileContent  = 256 << 10
	MaxFilesContent = 768 << 10
)

// DefaultRetry is prepare's retry policy: a failed analyst call is tried
// again twice, after 500ms then 1s (±20%).
var DefaultRetry = graph.RetryPolicy{Attempts: 3, Backoff: 500 * time.Millisecond, MaxBackoff: 4 * time.Second, Jitter: 0.2}

// DefaultTimeout bounds each try of prepare.
const DefaultTimeout = 5 * time.Minute

// File is an attached text file.
type File struct {
	Name    string `json:"name"`
	Content string `json:"content"`
}

// Message is one entry of the conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// State is the analyze workflow's state (seed 003's AppState).
type State struct {
	Query        string `json:"query"`
	FileContents []File `json:"file_contents"`
	// AnalysisHistory is the conversation: the query, then the analyst's
	// and the human's messages in turn.
	AnalysisHistory []Message `json:"analysis_history"`
	// UserInput is the human's message prepare has not taken in yet.
	UserInput string `json:"user_input,omitempty"`
	// CurrentAnalysisQuery is the analyst message ask puts to the human.
	CurrentAnalysisQuery string `json:"current_analysis_query,omitempty"`
	// AnalysisOutput is the final analysis, set when the human approved.
	AnalysisOutput string `json:"analysis_output,omitempty"`
	// Turns counts the analyst messages put to the human.
	Turns int `json:"turns"`
}

// Input is the workflow's input.
type Input struct {
	Query string `json:"query"`
	Files []File `json:"files,omitempty"`
}

// InputSchema is the JSON Schema of Input.
var InputSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "title": "Analysis",
  "additionalProperties": false,
  "required": ["query"],
  "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": 16384, "title": "What to analyse",
      "description": "The question or problem; the analyst asks back until you reply SOLUTION APPROVED.", "format": "textarea"},
    "files": {"type": "array", "maxItems": 20, "title": "Attached files",
      "description": "Text files the analyst reads (at most 256 KiB each, 768 KiB together).",
      "items": {"type": "object", "additionalProperties": false, "required": ["name", "content"],
        "properties": {
          "name": {"type": "string", "minLength": 1, "maxLength": 255},
          "content": {"type": "string", "maxLength": 262144, "contentMediaType": "text/plain"}}}}
  }
}`)

// ParseInput decodes and checks a task's input. Errors:
// *graph.ValidationError naming the field (input.query,
// input.files[1].name, …).
func ParseInput(raw json.RawMessage) (Input, error) {
	var in Input
	var wire struct {
		Query string            `json:"query"`
		Files []json.RawMessage `json:"files"`
	}
	if err := agent.Decode(raw, &wire, "input", "the analyze input", "query", "files"); err != nil {
		return in, err
	}
	var err error
	if in.Query, err = agent.Text("input.query", wire.Query, true, MaxQuery); err != nil {
		return in, err
	}
	if len(wire.Files) > MaxFiles {
		return in, &graph.ValidationError{Field: "input.files", Message: fmt.Sprintf("has %d files; at most %d", len(wire.Files), MaxFiles)}
	}
	total := 0
	seen := map[string]bool{}
	for i, rawFile := range wire.Files {
		field := fmt.Sprintf("input.files[%d]", i)
		var f File
		if err := agent.Decode(rawFile, &f, field, "an attached file", "name", "content"); err != nil {
			return in, err
		}
		if !hasKey(rawFile, "content") {
			return in, &graph.ValidationError{Field: field + ".content", Message: "is required (it may be empty)"}
		}
		f.Name = strings.TrimSpace(f.Name)
		switch {
		case f.Name == "":
			return in, &graph.ValidationError{Field: field + ".name", Message: "is required and must not be empty"}
		case utf8.RuneCountInString(f.Name) > MaxFileName:
			return in, &graph.ValidationError{Field: field + ".name", Message: fmt.Sprintf("is longer than %d characters", MaxFileName)}
		case strings.ContainsAny(f.Name, "\n\r\x00"):
			return in, &graph.ValidationError{Field: field + ".name", Message: "must be one line"}
		case seen[f.Name]:
			return in, &graph.ValidationError{Field: field + ".name", Message: fmt.Sprintf("%q is attached twice", f.Name)}
		case len(f.Content) > MaxFileContent:
			return in, &graph.ValidationError{Field: field + ".content", Message: fmt.Sprintf("is larger than %d KiB", MaxFileContent>>10)}
		case !utf8.ValidString(f.Content) || strings.ContainsRune(f.Content, 0):
			return in, &graph.ValidationError{Field: field + ".content", Message: "is not text (UTF-8 without NUL bytes)"}
		}
		seen[f.Name] = true
		total += len(f.Content)
		in.Files = append(in.Files, f)
	}
	if total > MaxFilesContent {
		return in, &graph.ValidationError{Field: "input.files", Message: fmt.Sprintf("hold %d KiB together; at most %d KiB", total>>10, MaxFilesContent>>10)}
	}
	return in, nil
}

// hasKey reports whether the JSON object raw has key.
func hasKey(raw json.RawMessage, key string) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return false
	}
	_, ok := obj[key]
	return ok
}

// Option configures the workflow.
type Option func(*config)

type config struct {
	retry   graph.RetryPolicy
	timeout time.Duration
}

// WithRetry sets prepare's retry policy (default DefaultRetry).
func WithRetry(p graph.RetryPolicy) Option { return func(c *config) { c.retry = p } }

// WithTimeout bounds each try of prepare (default DefaultTimeout; 0 or
// less: none).
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

type workflow struct {
	p   llm.Provider
	cfg config
}

// New compiles the analyze workflow; the analyst asks p.
func New(p llm.Provider, opts ...Option) (*graph.Graph[State], error) {
	if p == nil {
		return nil, errors.New("analyze: nil llm.Provider")
	}
	w := &workflow{p: p, cfg: config{retry: DefaultRetry, timeout: DefaultTimeout}}
	for _, o := range opts {
		o(&w.cfg)
	}
	prep := []graph.NodeOption{graph.WithRetry(w.cfg.retry),
		graph.WithDescription("The analyst reads the files and the conversation and asks its next question — or, once the solution is approved, writes the final analysis.")}
	if w.cfg.timeout > 0 {
		prep = append(prep, graph.WithTimeout(w.cfg.timeout))
	}
	return graph.New[State](Name).
		StateVersion(StateVersion).
		Describe("Analysis", "A conversational analysis of a question and attached files: the analyst asks, you answer, until you reply SOLUTION APPROVED.").
		Deliverable(ArtifactAnalysis).
		Raises(InterruptQuestion).
		Node(NodePrepare, w.prepare, prep...).
		Node(NodeAsk, ask, graph.WithDescription("The analyst's message waits for your answer (a question interrupt).")).
		Route(NodePrepare, next, NodeAsk+"=ask the human", graph.END+"=solution approved").
		Edge(NodeAsk, NodePrepare).
		Init(initState).
		Result(result).
		InputSchema(InputSchema).
		Compile()
}

func initState(raw json.RawMessage, opts graph.Options) (State, error) {
	in, err := ParseInput(raw)
	if err != nil {
		return State{}, err
	}
	if err := agent.Gates(Name, opts); err != nil {
		return State{}, err
	}
	var o struct {
		Gates json.RawMessage `json:"gates,omitempty"`
	}
	if err := agent.Decode(opts.Raw, &o, "options", "the analyze options", "gates"); err != nil {
		return State{}, err
	}
	files := in.Files
	if files == nil {
		files = []File{}
	}
	return State{Query: in.Query, FileContents: files, AnalysisHistory: []Message{}, UserInput: in.Query}, nil
}

func next(s State) string {
	if s.AnalysisOutput != "" {
		return graph.END
	}
	return NodeAsk
}

// Result is what a succeeded analyze task reports: the final analysis.
type Result struct {
	Analysis string   `json:"analysis"`
	Turns    int      `json:"turns"`
	Files    []string `json:"files"`
}

func result(s State) any {
	r := Result{Analysis: s.AnalysisOutput, Turns: s.Turns, Files: []string{}}
	for _, f := range s.FileContents {
		r.Files = append(r.Files, f.Name)
	}
	return r
}

// Approves reports whether a human message approves the solution: it
// contains "SOLUTION APPROVED", in any letter case and spacing.
func Approves(message string) bool {
	return strings.Contains(strings.ToUpper(strings.Join(strings.Fields(message), " ")), ApprovalPhrase)
}

// Subject is the Subject of an analyst call: the query, prefixed with
// "[turn N] " after the first turn and "[final] " for the final analysis,
// and with "[files [names…]] " (a JSON list) when files are attached, so
// that the scripted provider's built-in replies follow the conversation
// and speak of attached files only when there are some. Real providers
// ignore it.
func Subject(query string, turn int, final bool, files ...string) string {
	if len(files) > 0 || strings.HasPrefix(query, filesPrefix) {
		// (A query that looks like the prefix gets an empty one.)
		if files == nil {
			files = []string{}
		}
		names, _ := json.Marshal(files)
		query = filesPrefix + string(names) + "] " + query
	}
	switch {
	case final:
		return finalPrefix + query
	case turn > 1:
		return fmt.Sprintf("[turn %d] %s", turn, query)
	}
	return query
}

const finalPrefix, filesPrefix = "[final] ", "[files "

// --- nodes ---

func (w *workflow) prepare(ctx context.Context, run *graph.NodeRun, s State) (State, error) {
	if msg := strings.TrimSpace(s.UserInput); msg != "" {
		s.AnalysisHistory = append(slices.Clone(s.AnalysisHistory), Message{Role: FromUser, Content: msg})
	}
	s.UserInput = ""
	if n := len(s.AnalysisHistory); n > 1 && s.AnalysisHistory[n-1].Role == FromUser && Approves(s.AnalysisHistory[n-1].Content) {
		resp, err := agent.AskAnswering(ctx, w.p, run, RoleAnalyst, finalPrompt(s), Subject(s.Query, s.Turns, true, s.fileNames()...), s.answers())
		if err != nil {
			return s, err
		}
		s.AnalysisOutput = strings.TrimSpace(agent.StripFences(resp.Text)) + "\n"
		s.CurrentAnalysisQuery = ""
		run.Artifact(ArtifactAnalysis, "text/markdown", s.AnalysisOutput)
		return s, nil
	}
	resp, err := agent.AskAnswering(ctx, w.p, run, RoleAnalyst, turnPrompt(s), Subject(s.Query, s.Turns+1, false, s.fileNames()...), s.answers())
	if err != nil {
		return s, err
	}
	reply := strings.TrimSpace(resp.Text)
	s.AnalysisHistory = append(s.AnalysisHistory, Message{Role: FromAgent, Content: reply})
	s.CurrentAnalysisQuery = reply
	s.Turns++
	return s, nil
}

// ask puts the analyst's message to the human and keeps the answer for
// the next prepare.
func ask(_ context.Context, run *graph.NodeRun, s State) (State, error) {
	// A question has one action, answering; accepting is offered only
	// once there is something to accept (an approve before any proposal
	// would end the analysis with a solution nobody proposed).
	q := graph.Question{Kind: InterruptQuestion, Text: s.CurrentAnalysisQuery,
		Title:   fmt.Sprintf("The analyst asks (turn %d)", s.Turns),
		Actions: []string{graph.ActionRespond}}
	if Proposes(s.CurrentAnalysisQuery) {
		q.Title = fmt.Sprintf("The analyst proposes a solution (turn %d): accept it, or answer with what to change", s.Turns)
		q.Actions = append(q.Actions, graph.ActionApprove)
	}
	ans, err := run.Ask(q)
	if err != nil {
		return s, err
	}
	text := strings.TrimSpace(ans.Text)
	if ans.Action == graph.ActionApprove && !Approves(text) {
		text = strings.TrimSpace(ApprovalPhrase + " " + text)
	}
	s.UserInput = text
	s.CurrentAnalysisQuery = ""
	return s, nil
}

// --- prompts ---

func background(s State) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "The request:\n---\n%s\n---\n\n", s.Query)
	if len(s.FileContents) == 0 {
		sb.WriteString("No files are attached.\n\n")
	} else {
		fmt.Fprintf(&sb, "Attached files (%d):\n", len(s.FileContents))
		for _, f := range s.FileContents {
			fmt.Fprintf(&sb, "=== file: %s ===\n%s\n=== end of %s ===\n", f.Name, strings.TrimRight(f.Content, "\n"), f.Name)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

func history(s State) string {
	// The first message is the request itself, shown above.
	msgs := s.AnalysisHistory
	if len(msgs) > 0 && msgs[0].Role == FromUser && msgs[0].Content == strings.TrimSpace(s.Query) {
		msgs = msgs[1:]
	}
	if len(msgs) == 0 {
		return "The conversation starts now.\n\n"
	}
	var sb strings.Builder
	sb.WriteString("The conversation so far:\n")
	for _, m := range msgs {
		who := "Human"
		if m.Role == FromAgent {
			who = "Analyst"
		}
		fmt.Fprintf(&sb, "%s: %s\n", who, strings.ReplaceAll(m.Content, "\n", "\n  "))
	}
	return sb.String() + "\n"
}

func turnPrompt(s State) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "You are an analyst (role %s) working with a human on the request below.%s\n", RoleAnalyst, studyFiles(s))
	sb.WriteString("Then either ask the one clarifying question that matters most now, or, when you know enough, propose a solution\n")
	fmt.Fprintf(&sb, "and ask the human to confirm it: end a proposal with \"Reply %s to accept.\"\n\n", ApprovalPhrase)
	sb.WriteString(background(s))
	sb.WriteString(history(s))
	sb.WriteString("Reply with your next message to the human only.\n")
	return sb.String()
}

// studyFiles asks the analyst to study the attached files, when there
// are some.
func studyFiles(s State) string {
	if len(s.FileContents) == 0 {
		return ""
	}
	return " Study the attached files."
}

func finalPrompt(s State) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "You are an analyst (role %s). The human approved the solution you proposed.\n\n", RoleAnalyst)
	sb.WriteString(background(s))
	sb.WriteString(history(s))
	sb.WriteString(`Write the final analysis in Markdown: a title; Summary of the request; Findings (from the files, if any, and
the conversation); The agreed solution; Decisions and assumptions; Next steps. Reply with the document only.
`)
	return sb.String()
}

// fileNames are the names of the attached files, in order.
func (s State) fileNames() []string {
	out := make([]string, 0, len(s.FileContents))
	for _, f := range s.FileContents {
		out = append(out, f.Name)
	}
	return out
}

// answers is what the human has said so far, oldest first: the feedback
// the analyst's next message answers (the query, which opens the
// history, is not an answer).
func (s State) answers() []string {
	var out []string
	for i, m := range s.AnalysisHistory {
		if m.Role == FromUser && i > 0 { // the first is the query itself
			out = append(out, m.Content)
		}
	}
	return out
}

// Proposes reports whether an analyst's message proposes a solution the
// human could accept: it names the approval phrase (the prompt asks a
// proposal to end with it), opens with "Proposal", or says what "I
// propose".
func Proposes(msg string) bool {
	m := strings.ToLower(strings.TrimSpace(msg))
	return strings.Contains(m, strings.ToLower(ApprovalPhrase)) || strings.HasPrefix(m, "proposal") ||
		strings.Contains(m, "i propose")
}
