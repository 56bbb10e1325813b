package pm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
)

// Plan is the planner's step plan (seed 001's plan: steps, assumptions),
// kept in plan.yaml.
type Plan struct {
	Steps       []Step   `json:"steps" yaml:"steps"`
	Assumptions []string `json:"assumptions" yaml:"assumptions"`
}

// Step is one executable step with explicit expected outputs and the
// evidence that shows it was done (seed 001's Plan Steps).
type Step struct {
	ID              string   `json:"id" yaml:"id"`
	Title           string   `json:"title" yaml:"title"`
	Description     string   `json:"description,omitempty" yaml:"description,omitempty"`
	ExpectedOutputs []string `json:"expected_outputs" yaml:"expected_outputs"`
	Evidence        []string `json:"evidence" yaml:"evidence"`
	// Capabilities are what the execution target needs (e.g. "go",
	// "postgres", "network"); a Worker may route by them.
	Capabilities []string `json:"capabilities,omitempty" yaml:"capabilities,omitempty"`
}

var stepID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ParsePlan reads a plan.yaml: a mapping with a steps list (empty when
// nothing needs doing) and optional assumptions. Steps without an id get
// step-N; every step needs a title and at least one expected output; ids
// are unique and short (letters, digits, . _ -). Errors name plan.yaml and
// the step.
func ParsePlan(text string) (Plan, error) {
	var p Plan
	body := strings.TrimSpace(agent.StripFences(text))
	if body == "" {
		return p, errors.New("plan.yaml is empty")
	}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(body), &root); err != nil {
		return p, fmt.Errorf("plan.yaml does not parse: %w", err)
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return p, fmt.Errorf("plan.yaml must be a mapping with a steps list, got: %q", agent.Excerpt(body, 80))
	}
	hasSteps := false
	for i := 0; i+1 < len(root.Content[0].Content); i += 2 {
		if root.Content[0].Content[i].Value == "steps" {
			hasSteps = true
		}
	}
	if !hasSteps {
		return p, errors.New("plan.yaml has no steps list (give steps: [] when nothing needs doing)")
	}
	if err := root.Decode(&p); err != nil {
		return p, fmt.Errorf("plan.yaml does not match the plan format: %w", err)
	}
	seen := map[string]bool{}
	for i := range p.Steps {
		s := &p.Steps[i]
		s.ID, s.Title, s.Description = strings.TrimSpace(s.ID), strings.TrimSpace(s.Title), strings.TrimSpace(s.Description)
		if s.ID == "" {
			s.ID = fmt.Sprintf("step-%d", i+1)
		}
		s.ExpectedOutputs, s.Evidence = nonEmpty(s.ExpectedOutputs), nonEmpty(s.Evidence)
		where := fmt.Sprintf("plan.yaml: steps[%d] (%s)", i, s.ID)
		switch {
		case !stepID.MatchString(s.ID):
			return p, fmt.Errorf("%s: id must be 1–64 letters, digits, '.', '_' or '-'", where)
		case seen[s.ID]:
			return p, fmt.Errorf("%s: id is used twice", where)
		case s.Title == "":
			return p, fmt.Errorf("%s: title is required", where)
		case len(s.ExpectedOutputs) == 0:
			return p, fmt.Errorf("%s: expected_outputs is required (at least one)", where)
		}
		seen[s.ID] = true
	}
	if p.Steps == nil {
		p.Steps = []Step{}
	}
	p.Assumptions = nonEmpty(p.Assumptions)
	return p, nil
}

func nonEmpty(list []string) []string {
	out := []string{}
	for _, s := range list {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// YAML renders the plan as plan.yaml.
func (p Plan) YAML() string {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	_ = enc.Encode(p)
	_ = enc.Close()
	return b.String()
}

// Verification statuses.
const (
	VerifyPass = "pass"
	VerifyFail = "fail"
)

// Verification is the verifier's finding on one step attempt (seed 001's
// verification: status pass|fail, findings, recommended_actions).
type Verification struct {
	StepID             string   `json:"step_id"`
	Attempt            int      `json:"attempt"`
	Status             string   `json:"status"`
	Findings           []string `json:"findings"`
	RecommendedActions []string `json:"recommended_actions"`
}

// ParseVerification reads a verifier's JSON reply: {"status": "pass" or
// "fail", "findings": [...], "recommended_actions": [...]}. "passed",
// "failed", and "passed": true/false are understood too.
func ParseVerification(reply string) (Verification, error) {
	var v Verification
	obj, err := agent.JSONObject(reply)
	if err != nil {
		return v, fmt.Errorf("the verifier's reply is not the JSON verification asked for: %w (reply: %q)", err, agent.Excerpt(reply, 120))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(obj), &m); err != nil {
		return v, fmt.Errorf("the verifier's reply is not the JSON verification asked for: %v (reply: %q)", err, agent.Excerpt(reply, 120))
	}
	var status string
	var passed bool
	switch {
	case json.Unmarshal(m["status"], &status) == nil && status != "":
		switch strings.ToLower(strings.TrimSpace(status)) {
		case "pass", "passed", "ok", "success":
			v.Status = VerifyPass
		case "fail", "failed", "failure":
			v.Status = VerifyFail
		default:
			return v, fmt.Errorf("the verifier's status %q is neither pass nor fail", status)
		}
	case json.Unmarshal(m["passed"], &passed) == nil && m["passed"] != nil:
		v.Status = map[bool]string{true: VerifyPass, false: VerifyFail}[passed]
	default:
		return v, fmt.Errorf("the verifier's reply has no status (pass or fail): %q", agent.Excerpt(obj, 120))
	}
	v.Findings = stringList(m["findings"])
	v.RecommendedActions = stringList(m["recommended_actions"])
	return v, nil
}

func stringList(raw json.RawMessage) []string {
	out := []string{}
	if len(raw) == 0 {
		return out
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return nonEmpty([]string{one})
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return out
	}
	for _, item := range list {
		var s string
		if json.Unmarshal(item, &s) != nil {
			s = string(item)
		}
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Remediation is what a failed verification asks of the next attempt.
func (v Verification) Remediation() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Attempt %d failed verification.\n", v.Attempt)
	if len(v.Findings) > 0 {
		sb.WriteString("Findings:\n")
		for _, f := range v.Findings {
			fmt.Fprintf(&sb, "- %s\n", f)
		}
	}
	if len(v.RecommendedActions) > 0 {
		sb.WriteString("Recommended actions:\n")
		for _, a := range v.RecommendedActions {
			fmt.Fprintf(&sb, "- %s\n", a)
		}
	}
	return strings.TrimRight(sb.String(), "\n")
}
