package langgraph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/gatehousehq/gatehouse/graph"
)

// humanInterrupt is Agent Inbox's HumanInterrupt.
type humanInterrupt struct {
	ActionRequest actionRequest   `json:"action_request"`
	Config        interruptConfig `json:"config"`
	Description   string          `json:"description"`
}

type actionRequest struct {
	Action string         `json:"action"`
	Args   map[string]any `json:"args"`
}

type interruptConfig struct {
	AllowIgnore  bool `json:"allow_ignore"`
	AllowRespond bool `json:"allow_respond"`
	AllowEdit    bool `json:"allow_edit"`
	AllowAccept  bool `json:"allow_accept"`
}

// interruptValue is one entry of a thread's interrupts: {"value", "id"}.
type interruptValue struct {
	Value humanInterrupt `json:"value"`
	ID    string         `json:"id"`
}

// configOf says which HumanResponse types an interrupt takes (SPEC §14):
// a gate accept, respond (a rejection with feedback) and edit when it
// offers edits; a question respond; slogan's review accept and respond.
// Nothing is ignorable: every interrupt waits for a decision.
func configOf(itr *graph.Interrupt) interruptConfig {
	has := func(a string) bool { return slices.Contains(itr.Payload.Actions, a) }
	if itr.Payload.Type == graph.InterruptGate {
		return interruptConfig{AllowAccept: has(graph.ActionApprove), AllowRespond: has(graph.ActionReject), AllowEdit: has(graph.ActionEdit)}
	}
	return interruptConfig{AllowAccept: has(graph.ActionApprove) && itr.Kind != "question",
		AllowRespond: has(graph.ActionRespond) || has(graph.ActionReject)}
}

// argsOf is what the interrupt asks about, as action_request.args: the
// artifact's content under its name (Agent Inbox edits each arg as text),
// and the question.
func argsOf(itr *graph.Interrupt) map[string]any {
	args := map[string]any{}
	if itr.Payload.Question != "" {
		args["question"] = itr.Payload.Question
	}
	if art := itr.Payload.Artifact; art != nil {
		args[art.Name] = art.Content
	}
	return args
}

// escapeText makes text a person or an agent wrote inert in Markdown that
// is rendered with raw HTML: no tag, no entity of its own.
func escapeText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// oneLine is s on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// describe is the Markdown description of an interrupt: a plain first line
// naming the task (Agent Inbox previews its first 65 characters), the
// feedback the previous version got, the question, and the artifact in a
// <pre> block. Every text from a person or an agent is escaped.
func describe(task *graph.Task, itr *graph.Interrupt, feedback string) string {
	var b strings.Builder
	title := task.Title
	if title == "" {
		title = task.Workflow
	}
	fmt.Fprintf(&b, "%s: %s", escapeText(oneLine(title)), escapeText(oneLine(itr.Payload.Title)))
	if itr.Iteration > 1 {
		fmt.Fprintf(&b, " (iteration %d)", itr.Iteration)
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "Task `%s` (%s), node `%s`, %s interrupt.\n\n", task.ID, escapeText(task.Workflow), escapeText(itr.Node), escapeText(itr.Kind))
	if feedback != "" {
		fmt.Fprintf(&b, "**Feedback on the previous version:** %s\n\n", escapeText(oneLine(feedback)))
	}
	if q := itr.Payload.Question; q != "" {
		fmt.Fprintf(&b, "**Question:**\n\n<pre>%s</pre>\n\n", escapeText(q))
	}
	if art := itr.Payload.Artifact; art != nil {
		fmt.Fprintf(&b, "**%s** (%s):\n\n<pre>%s</pre>\n\n", escapeText(art.Name), escapeText(art.ContentType), escapeText(art.Content))
	}
	var how []string
	cfg := configOf(itr)
	if cfg.AllowAccept {
		how = append(how, "accept to approve")
	}
	if cfg.AllowRespond {
		if itr.Payload.Type == graph.InterruptGate {
			how = append(how, "respond to reject with your feedback (the node runs again with it)")
		} else {
			how = append(how, "respond to answer")
		}
	}
	if cfg.AllowEdit {
		how = append(how, "edit to approve your changed version")
	}
	if len(how) > 0 {
		b.WriteString(strings.Join(how, "; ") + ".\n")
	}
	return b.String()
}

// humanInterruptOf is the HumanInterrupt of itr; feedback is the last
// rejection's feedback at the same node, if any.
func humanInterruptOf(task *graph.Task, itr *graph.Interrupt, feedback string) humanInterrupt {
	return humanInterrupt{ActionRequest: actionRequest{Action: itr.Kind, Args: argsOf(itr)}, Config: configOf(itr),
		Description: describe(task, itr, feedback)}
}

// humanResponse is Agent Inbox's HumanResponse.
type humanResponse struct {
	Type string          `json:"type"`
	Args json.RawMessage `json:"args"`
}

// decisionOf turns command.resume into the decision on itr: a list of one
// HumanResponse (as Agent Inbox sends), the bare object, a map from the
// interrupt's id to either, or a plain string (an answer, or a rejection's
// feedback). Bad shapes are 422 naming the part; a type the interrupt
// does not allow is 409.
func decisionOf(resume json.RawMessage, itr *graph.Interrupt) (graph.DecisionInput, error) {
	in := graph.DecisionInput{InterruptID: itr.ID}
	resume = bytes.TrimSpace(resume)
	field := "command.resume"
	// A map keyed by interrupt id (LangGraph's resume of several interrupts).
	if len(resume) > 0 && resume[0] == '{' {
		var byID map[string]json.RawMessage
		if err := json.Unmarshal(resume, &byID); err == nil {
			if _, typed := byID["type"]; !typed && len(byID) > 0 {
				v, ok := byID[itr.ID]
				if !ok {
					for k := range byID {
						if _, err := uuid.Parse(k); err != nil {
							return in, unprocessable("%s: want a HumanResponse {\"type\", \"args\"}, a list of one, or a map from the pending interrupt's id", field)
						}
					}
					return in, conflict("%s names no pending interrupt: the thread waits on interrupt %s", field, itr.ID)
				}
				if len(byID) > 1 {
					return in, unprocessable("%s: one interrupt is pending (%s); resume only that one", field, itr.ID)
				}
				resume, field = bytes.TrimSpace(v), field+"."+itr.ID
			}
		}
	}
	var hr humanResponse
	switch {
	case len(resume) == 0 || string(resume) == "null":
		return in, unprocessable("%s is required: a HumanResponse such as [{\"type\": \"accept\"}]", field)
	case resume[0] == '[':
		var list []json.RawMessage
		if err := json.Unmarshal(resume, &list); err != nil {
			return in, unprocessable("%s: not a valid list: %v", field, err)
		}
		if len(list) != 1 {
			return in, unprocessable("%s: want a list of exactly one HumanResponse (one interrupt is pending), got %d", field, len(list))
		}
		field += "[0]"
		if err := strictObject(list[0], &hr); err != nil {
			return in, unprocessable("%s: want a HumanResponse {\"type\", \"args\"}: %v", field, err)
		}
	case resume[0] == '{':
		if err := strictObject(resume, &hr); err != nil {
			return in, unprocessable("%s: want a HumanResponse {\"type\", \"args\"}: %v", field, err)
		}
	case resume[0] == '"':
		var s string
		if err := json.Unmarshal(resume, &s); err != nil {
			return in, unprocessable("%s: not a valid string", field)
		}
		hr = humanResponse{Type: "response", Args: resume}
	default:
		return in, unprocessable("%s: want a HumanResponse {\"type\", \"args\"} or a list of one", field)
	}
	cfg := configOf(itr)
	switch hr.Type {
	case "accept":
		if !cfg.AllowAccept {
			return in, conflict("%s.type: accept is not allowed on this %s interrupt (allow_accept is false)", field, itr.Kind)
		}
		// Agent Inbox sends the action request back as args: a plain
		// approval, never an edit.
		in.Action = graph.ActionApprove
	case "response":
		if !cfg.AllowRespond {
			return in, conflict("%s.type: response is not allowed on this %s interrupt", field, itr.Kind)
		}
		var text string
		if err := json.Unmarshal(hr.Args, &text); err != nil || strings.TrimSpace(text) == "" {
			return in, unprocessable("%s.args: a response needs a non-empty string (the feedback or the answer)", field)
		}
		switch {
		case itr.Payload.Type == graph.InterruptGate:
			in.Action, in.Feedback = graph.ActionReject, text
		case slices.Contains(itr.Payload.Actions, graph.ActionRespond):
			in.Action = graph.ActionRespond
			in.Value, _ = json.Marshal(text)
		default:
			in.Action, in.Feedback = graph.ActionReject, text
		}
	case "edit":
		if !cfg.AllowEdit {
			return in, conflict("%s.type: edit is not allowed on this %s interrupt (allow_edit is false)", field, itr.Kind)
		}
		content, err := editedContent(hr.Args, itr)
		if err != nil {
			return in, unprocessable("%s.args: %v", field, err)
		}
		in.Action = graph.ActionEdit
		in.Value, _ = json.Marshal(content)
	case "ignore":
		return in, conflict("%s.type: ignore is not allowed: this %s interrupt waits for a decision (allow_ignore is false)", field, itr.Kind)
	case "":
		return in, unprocessable("%s.type is required: accept, response, edit or ignore", field)
	default:
		return in, unprocessable("%s.type: unknown type %s (accept, response, edit, ignore)", field, quote(hr.Type))
	}
	return in, nil
}

// strictObject decodes one JSON object with no unknown fields.
func strictObject(b json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// editedContent reads an edit's args, {"action", "args": {<name>: text}},
// back into the artifact's content. Agent Inbox sends every edited value as
// a string; a value that was not one is turned back into JSON text.
func editedContent(raw json.RawMessage, itr *graph.Interrupt) (string, error) {
	var req struct {
		Action string                     `json:"action"`
		Args   map[string]json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal(raw, &req); err != nil || req.Args == nil {
		return "", fmt.Errorf("an edit needs {\"action\", \"args\": {%s: <the edited document>}}", quote(artifactName(itr)))
	}
	keys := []string{artifactName(itr), "content"}
	var v json.RawMessage
	for _, k := range keys {
		if x, ok := req.Args[k]; ok {
			v = x
			break
		}
	}
	if v == nil {
		if len(req.Args) != 1 {
			return "", fmt.Errorf("args.args needs %s with the edited document", quote(artifactName(itr)))
		}
		for _, x := range req.Args {
			v = x
		}
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		// Not a string: the value itself, as JSON text.
		s = string(v)
	}
	if strings.TrimSpace(s) == "" {
		return "", fmt.Errorf("the edited document %s is empty", quote(artifactName(itr)))
	}
	return s, nil
}

func artifactName(itr *graph.Interrupt) string {
	if itr.Payload.Artifact != nil {
		return itr.Payload.Artifact.Name
	}
	return "content"
}
