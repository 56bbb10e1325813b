package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"gopkg.in/yaml.v3"

	"github.com/gatehousehq/gatehouse/graph"
)

// Rule is one of a kind's rules (SPEC §18): when its CEL expression holds
// for an interrupt as it is raised, it decides it at once as the principal
// "policy:<name>" (Action approve or reject, with Feedback), or sets the
// approvals it needs (Approvals).
type Rule struct {
	Name      string
	When      string
	Action    string // graph.ActionApprove, graph.ActionReject, or "" with Approvals
	Feedback  string
	Approvals int
	prg       cel.Program
}

// Principal is the name a rule decides as: policy:<name>.
func (r Rule) Principal() string { return RulePrincipalPrefix + r.Name }

// RulePrincipalPrefix begins the principal name of every rule's decisions.
const RulePrincipalPrefix = "policy:"

// Describe is the rule in one line, for policy show and /admin/policy.
func (r Rule) Describe() string {
	switch {
	case r.Action == graph.ActionReject:
		return fmt.Sprintf("%s: when %s → reject (%q)", r.Name, r.When, r.Feedback)
	case r.Action != "":
		return fmt.Sprintf("%s: when %s → %s", r.Name, r.When, r.Action)
	default:
		return fmt.Sprintf("%s: when %s → %d approvals", r.Name, r.When, r.Approvals)
	}
}

// ruleEnv is the CEL environment of every rule: the variables SPEC §18
// names.
var ruleEnv = func() *cel.Env {
	env, err := cel.NewEnv(
		cel.Variable("payload", cel.DynType),
		cel.Variable("kind", cel.StringType),
		cel.Variable("title", cel.StringType),
		cel.Variable("metadata", cel.DynType),
		cel.Variable("requested_by", cel.StringType),
		cel.Variable("task", cel.MapType(cel.StringType, cel.DynType)),
	)
	if err != nil {
		panic("auth: the rule environment: " + err.Error())
	}
	return env
}()

// CompileRule checks and compiles a rule's expression: a syntax error, an
// unknown variable or a result that is not boolean is an error.
func CompileRule(when string) (cel.Program, error) {
	ast, iss := ruleEnv.Compile(when)
	if iss != nil && iss.Err() != nil {
		// "column 1: undeclared reference to 'amount'", without CEL's
		// source excerpt and its (empty) container.
		var msgs []string
		for _, e := range iss.Errors() {
			m := strings.TrimSuffix(e.Message, " (in container '')")
			msgs = append(msgs, fmt.Sprintf("column %d: %s", e.Location.Column()+1, m))
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) {
		return nil, fmt.Errorf("must be boolean, is %s", t)
	}
	return ruleEnv.Program(ast)
}

var ruleNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// rules reads a kind's rules, compiling each expression.
func (pp *policyParser) rules(n *yaml.Node, key string) []Rule {
	if n.Kind != yaml.SequenceNode {
		pp.fail(n, key, "want a list of {name, when, action or approvals}")
		return nil
	}
	var out []Rule
	for i, c := range n.Content {
		rk := fmt.Sprintf("%s[%d]", key, i)
		var r Rule
		var whenNode *yaml.Node
		bad := false
		pp.each(c, rk, func(k string, kn, v *yaml.Node) {
			str := func() string {
				if v.Kind != yaml.ScalarNode {
					pp.fail(v, rk+"."+k, "want a string")
					bad = true
				}
				return strings.TrimSpace(v.Value)
			}
			switch k {
			case "name":
				r.Name = str()
			case "when":
				r.When, whenNode = str(), v
			case "action":
				r.Action = str()
				if r.Action != graph.ActionApprove && r.Action != graph.ActionReject {
					pp.fail(v, rk+".action", "want approve or reject")
					bad = true
				}
			case "feedback":
				r.Feedback = str()
			case "approvals":
				a, err := strconv.Atoi(str())
				if err != nil || a < 1 || a > 10 {
					pp.fail(v, rk+".approvals", fmt.Sprintf("%q: want a number from 1 to 10", v.Value))
					bad = true
				}
				r.Approvals = a
			default:
				pp.fail(kn, rk+"."+k, "unknown key (want name, when, action, feedback or approvals)")
				bad = true
			}
		})
		if c.Kind != yaml.MappingNode || bad {
			continue
		}
		switch {
		case r.Name == "":
			pp.fail(c, rk+".name", "is required")
		case !ruleNameRe.MatchString(r.Name):
			pp.fail(c, rk+".name", "a rule name is lower-case letters, digits, '_' or '-'")
		case containsRule(out, r.Name):
			pp.fail(c, rk+".name", fmt.Sprintf("%q names an earlier rule too", r.Name))
		case whenNode == nil || r.When == "":
			pp.fail(c, rk+".when", "is required: a CEL expression over payload, kind, title, metadata, requested_by and task")
		case r.Action == "" && r.Approvals == 0:
			pp.fail(c, rk, "says neither action (approve or reject) nor approvals")
		case r.Action != "" && r.Approvals != 0:
			pp.fail(c, rk, "says both action and approvals; a rule does one")
		case r.Feedback != "" && r.Action != graph.ActionReject:
			pp.fail(c, rk+".feedback", "goes with action: reject")
		default:
			prg, err := CompileRule(r.When)
			if err != nil {
				pp.fail(whenNode, rk+".when", err.Error())
				continue
			}
			r.prg = prg
			if r.Action == graph.ActionReject && r.Feedback == "" {
				r.Feedback = "rejected by the policy's rule " + r.Name
			}
			out = append(out, r)
		}
	}
	return out
}

func containsRule(rs []Rule, name string) bool {
	for _, r := range rs {
		if r.Name == name {
			return true
		}
	}
	return false
}

// RuleInput is what a kind's rules see of an interrupt being raised.
type RuleInput struct {
	Payload     any
	Kind        string
	Title       string
	Metadata    any
	RequestedBy string
	// Task is {"workflow","title","input"}.
	Task map[string]any
}

// RuleError is a rule that failed to evaluate (counted as not holding).
type RuleError struct {
	Rule  string
	Error string
}

// Ruling is what a kind's rules made of an interrupt: the rule that held
// (none: Rule ""), with its action or approvals, and the rules that failed
// to evaluate before it.
type Ruling struct {
	Rule      string
	Action    string
	Feedback  string
	Approvals int
	Errors    []RuleError
}

// Evaluate tries kind's rules in order; the first that holds applies.
func (p Policy) Evaluate(kind string, in RuleInput) Ruling {
	var out Ruling
	rules := p.Kind(kind).Rules
	if len(rules) == 0 {
		return out
	}
	vars := map[string]any{"payload": orEmpty(in.Payload), "kind": in.Kind, "title": in.Title,
		"metadata": orEmpty(in.Metadata), "requested_by": in.RequestedBy, "task": in.Task}
	if in.Task == nil {
		vars["task"] = map[string]any{}
	}
	for _, r := range rules {
		v, _, err := r.prg.Eval(vars)
		if err == nil {
			if b, ok := v.Value().(bool); ok {
				if b {
					out.Rule, out.Action, out.Feedback, out.Approvals = r.Name, r.Action, r.Feedback, r.Approvals
					return out
				}
				continue
			}
			err = fmt.Errorf("the result is %v, not a boolean", v.Value())
		}
		out.Errors = append(out.Errors, RuleError{Rule: r.Name, Error: err.Error()})
	}
	return out
}

func orEmpty(v any) any {
	if v == nil {
		return map[string]any{}
	}
	return v
}

// RuleInputOf is what rules see of itr, raised by task: for an approval
// request (input with kind, payload, metadata) its payload and metadata;
// for a gate, its artifact when that is a JSON object.
func RuleInputOf(task *graph.Task, itr *graph.Interrupt) RuleInput {
	in := RuleInput{Kind: itr.Kind, Title: itr.Payload.Title}
	var input map[string]any
	if task != nil {
		in.RequestedBy = task.CreatedBy
		_ = json.Unmarshal(task.Input, &input)
		in.Task = map[string]any{"workflow": task.Workflow, "title": task.Title, "input": orEmpty(mapOrNil(input))}
	}
	if task != nil && task.Workflow == "request" && input != nil {
		in.Payload, in.Metadata = input["payload"], input["metadata"]
		return in
	}
	if a := itr.Payload.Artifact; a != nil {
		var m map[string]any
		if json.Unmarshal([]byte(a.Content), &m) == nil {
			in.Payload = m
		}
	}
	return in
}

func mapOrNil(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}

// RequiredFor is the number of distinct approvers itr of task needs: a
// rule's approvals when one holds for it, else its kind's.
func (p Policy) RequiredFor(task *graph.Task, itr *graph.Interrupt) int {
	if len(p.Kind(itr.Kind).Rules) > 0 {
		if r := p.Evaluate(itr.Kind, RuleInputOf(task, itr)); r.Approvals > 0 {
			return r.Approvals
		}
	}
	return p.Required(itr.Kind)
}

// Raise is the engine's raise hook (graph.WithRaiseHook): the deadline
// and timers (Schedule), then the kind's rules — a rule that decides marks
// the interrupt decided as it is raised, failed evaluations are noted for
// interrupt.rule_error events.
func (p Policy) Raise(task *graph.Task, itr *graph.Interrupt) {
	p.Schedule(task, itr)
	if len(p.Kind(itr.Kind).Rules) == 0 {
		return
	}
	r := p.Evaluate(itr.Kind, RuleInputOf(task, itr))
	for _, e := range r.Errors {
		itr.RuleErrors = append(itr.RuleErrors, graph.RuleError{Rule: e.Rule, Error: e.Error})
	}
	if r.Action != "" {
		itr.Ruled = &graph.Ruled{Rule: r.Rule, By: RulePrincipalPrefix + r.Rule, Action: r.Action, Feedback: r.Feedback}
	}
}
