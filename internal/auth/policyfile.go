package auth

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gatehousehq/gatehouse/graph"
)

// PolicyError is one problem of a policy file, reported as
// "<file>:<line>: <dotted key>: <problem>".
type PolicyError struct {
	File    string
	Line    int
	Key     string
	Problem string
}

func (e *PolicyError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Problem)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Key, e.Problem)
}

// PolicySources is everything the effective policy is built from.
type PolicySources struct {
	// File is GATEHOUSE_POLICY_FILE ("" for none).
	File string
	// Approvals and SoDKinds are GATEHOUSE_APPROVALS and
	// GATEHOUSE_SOD_KINDS; the …Set flags say whether the variable was set
	// explicitly (a default never conflicts with the file).
	Approvals    map[string]int
	ApprovalsSet bool
	SoDKinds     []string
	SoDKindsSet  bool
}

// MinPolicyDuration is the shortest deadline, reminder or escalation step.
const MinPolicyDuration = time.Second

// LoadPolicy builds the effective policy: the file's, with the shorthands
// for what the file leaves unset. A kind set both in the file and in an
// explicitly set shorthand is an error naming both. Errors are
// *PolicyError (joined when there are several) or a read error.
func LoadPolicy(src PolicySources) (Policy, error) {
	p := NewPolicy(src.Approvals, src.SoDKinds)
	if src.File == "" {
		return p, nil
	}
	data, err := os.ReadFile(src.File)
	if err != nil {
		return Policy{}, fmt.Errorf("GATEHOUSE_POLICY_FILE: %w", err)
	}
	fp, err := ParsePolicy(src.File, data)
	if err != nil {
		return Policy{}, err
	}
	var errs []error
	for _, kp := range fp.Kinds() {
		fk := fp.set[kp.Kind]
		if n, ok := src.Approvals[kp.Kind]; ok && src.ApprovalsSet && fk.approvals > 0 {
			errs = append(errs, &PolicyError{File: src.File, Line: fk.approvals, Key: "kinds." + kp.Kind + ".approvals",
				Problem: fmt.Sprintf("%s is also set by GATEHOUSE_APPROVALS (%s=%d); set it in one place", kp.Kind, kp.Kind, n)})
		}
		if src.SoDKindsSet && fk.sod > 0 && slices.Contains(src.SoDKinds, kp.Kind) {
			errs = append(errs, &PolicyError{File: src.File, Line: fk.sod, Key: "kinds." + kp.Kind + ".separation_of_duties",
				Problem: fmt.Sprintf("%s is also set by GATEHOUSE_SOD_KINDS; set it in one place", kp.Kind)})
		}
	}
	if len(errs) > 0 {
		return Policy{}, errors.Join(errs...)
	}
	// The shorthands fill in what the file leaves unset.
	for k, n := range src.Approvals {
		kp := fp.Kind(k)
		if fp.set[k].approvals == 0 && n > 1 {
			kp.Approvals = n
			fp.kinds[k] = kp
		}
	}
	for k := range fp.kinds {
		kp := fp.kinds[k]
		if fp.set[k].sod == 0 {
			kp.SeparationOfDuties = slices.Contains(src.SoDKinds, k)
		}
		fp.kinds[k] = kp
	}
	for _, k := range src.SoDKinds {
		if _, ok := fp.kinds[k]; !ok {
			kp := fp.Kind(k)
			kp.SeparationOfDuties = true
			fp.kinds[k] = kp
		}
	}
	out := fp.Policy
	out.source = "GATEHOUSE_POLICY_FILE=" + src.File
	return out, nil
}

// filePolicy is a parsed file with the lines of the keys that may
// conflict with the shorthands.
type filePolicy struct {
	Policy
	set map[string]keyLines
}

type keyLines struct{ approvals, sod int }

var (
	groupNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
)

// ParsePolicy reads a policy file (SPEC §11) named name. Every problem is a
// *PolicyError with the line and the dotted key; all of them are
// returned, joined.
func ParsePolicy(name string, data []byte) (*filePolicy, error) {
	base := name
	pp := &policyParser{file: base}
	fp := &filePolicy{Policy: Policy{kinds: map[string]KindPolicy{}, groups: map[string][]string{}}, set: map[string]keyLines{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line := 1
		if m := regexp.MustCompile(`line (\d+)`).FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
		}
		msg := regexp.MustCompile(`^yaml: (line \d+: )?`).ReplaceAllString(err.Error(), "")
		return nil, &PolicyError{File: base, Line: line, Problem: msg}
	}
	if len(doc.Content) == 0 {
		return fp, nil // an empty file: the shorthands alone
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		pp.fail(root, "", "want a mapping with groups and kinds")
		return nil, pp.err()
	}
	var kindsNode *yaml.Node
	pp.each(root, "", func(key string, k, v *yaml.Node) {
		switch key {
		case "groups":
			pp.groups(v, fp.groups)
		case "kinds":
			kindsNode = v
		default:
			pp.fail(k, key, "unknown key (want groups or kinds)")
		}
	})
	if kindsNode != nil {
		pp.each(kindsNode, "kinds", func(kind string, k, v *yaml.Node) {
			if !ValidKind(kind) {
				pp.fail(k, "kinds."+kind, KindProblem)
				return
			}
			kp, lines := pp.kind(kind, v, fp.groups)
			fp.kinds[kind] = kp
			fp.set[kind] = lines
		})
	}
	if err := pp.err(); err != nil {
		return nil, err
	}
	return fp, nil
}

type policyParser struct {
	file string
	errs []error
}

func (pp *policyParser) fail(n *yaml.Node, key, problem string) {
	pp.errs = append(pp.errs, &PolicyError{File: pp.file, Line: n.Line, Key: key, Problem: problem})
}

func (pp *policyParser) err() error { return errors.Join(pp.errs...) }

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// each walks a mapping, refusing duplicate keys.
func (pp *policyParser) each(n *yaml.Node, prefix string, f func(key string, k, v *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return
		}
		pp.fail(n, prefix, "want a mapping")
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		if seen[key] {
			pp.fail(k, join(prefix, key), "set twice")
			continue
		}
		seen[key] = true
		f(key, k, v)
	}
}

func (pp *policyParser) groups(n *yaml.Node, into map[string][]string) {
	pp.each(n, "groups", func(name string, k, v *yaml.Node) {
		key := "groups." + name
		if !groupNameRe.MatchString(name) {
			pp.fail(k, key, "a group name is lower-case letters, digits, '.', '_' or '-'")
			return
		}
		members := pp.strings(v, key)
		var out []string
		for i, m := range members {
			u, err := NormalizeUsername(m)
			if err != nil {
				pp.fail(v.Content[i], key, fmt.Sprintf("%q is not a user name", m))
				continue
			}
			if !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
		into[name] = out
	})
}

// strings reads a sequence of scalars.
func (pp *policyParser) strings(n *yaml.Node, key string) []string {
	if n.Kind != yaml.SequenceNode {
		pp.fail(n, key, "want a list")
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode {
			pp.fail(c, key, "want a list of plain values")
			out = append(out, "")
			continue
		}
		out = append(out, strings.TrimSpace(c.Value))
	}
	return out
}

func (pp *policyParser) duration(n *yaml.Node, key string) (time.Duration, bool) {
	if n.Kind != yaml.ScalarNode {
		pp.fail(n, key, "want a duration such as 90m or 72h")
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(n.Value))
	switch {
	case err != nil:
		pp.fail(n, key, fmt.Sprintf("%q is not a duration (want e.g. 2s, 90m, 72h)", n.Value))
		return 0, false
	case d < MinPolicyDuration:
		pp.fail(n, key, fmt.Sprintf("%s is shorter than the minimum of 1s", n.Value))
		return 0, false
	}
	return d, true
}

func (pp *policyParser) refs(n *yaml.Node, key string, groups map[string][]string) []DeciderRef {
	if n.Kind != yaml.SequenceNode {
		pp.fail(n, key, "want a list such as [role:approver, group:leads, user:carol, idp:payments-leads]")
		return nil
	}
	var out []DeciderRef
	for _, c := range n.Content {
		typ, name, ok := strings.Cut(strings.TrimSpace(c.Value), ":")
		name = strings.TrimSpace(name)
		switch {
		case c.Kind != yaml.ScalarNode || !ok:
			pp.fail(c, key, fmt.Sprintf("%q: want role:NAME, group:NAME, user:NAME or idp:GROUP", c.Value))
			continue
		case typ == RefRole:
			if r := Role(name); r != RoleApprover && r != RoleAdmin {
				pp.fail(c, key, fmt.Sprintf("role:%s: only approver and admin decide", name))
				continue
			}
		case typ == RefGroup:
			if _, defined := groups[name]; !defined {
				pp.fail(c, key, fmt.Sprintf("group:%s is not defined under groups", name))
				continue
			}
		case typ == RefIdP:
			if err := CheckIdPGroup(name); err != nil {
				pp.fail(c, key, fmt.Sprintf("idp:%s: %s", name, err))
				continue
			}
		case typ == RefUser:
			u, err := NormalizeUsername(name)
			if err != nil && !strings.HasPrefix(name, "token:") {
				pp.fail(c, key, fmt.Sprintf("user:%s is not a user name", name))
				continue
			}
			if err == nil {
				name = u
			}
		default:
			pp.fail(c, key, fmt.Sprintf("%q: want role:NAME, group:NAME, user:NAME or idp:GROUP", c.Value))
			continue
		}
		r := DeciderRef{Type: typ, Name: name}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

func (pp *policyParser) kind(kind string, n *yaml.Node, groups map[string][]string) (KindPolicy, keyLines) {
	kp := KindPolicy{Kind: kind, Approvals: 1, OnTimeout: OnTimeoutNone}
	var lines keyLines
	prefix := "kinds." + kind
	var remNode *yaml.Node
	pp.each(n, prefix, func(key string, k, v *yaml.Node) {
		dk := prefix + "." + key
		switch key {
		case "approvals":
			a, err := strconv.Atoi(strings.TrimSpace(v.Value))
			if v.Kind != yaml.ScalarNode || err != nil || a < 1 || a > 10 {
				pp.fail(v, dk, fmt.Sprintf("%q: want a number from 1 to 10", v.Value))
				return
			}
			kp.Approvals, lines.approvals = a, k.Line
		case "separation_of_duties":
			var b bool
			if v.Kind != yaml.ScalarNode || v.Decode(&b) != nil {
				pp.fail(v, dk, fmt.Sprintf("%q: want true or false", v.Value))
				return
			}
			kp.SeparationOfDuties, lines.sod = b, k.Line
		case "deciders":
			kp.Deciders = pp.refs(v, dk, groups)
		case "deadline":
			kp.Deadline, _ = pp.duration(v, dk)
		case "on_timeout":
			switch s := strings.TrimSpace(v.Value); s {
			case OnTimeoutApprove:
				if kind == graph.InterruptQuestion {
					// A question waits for an answer: no one can
					// approve it on the asker's behalf.
					pp.fail(v, dk, "approve cannot answer a question: want fail, cancel or none")
					return
				}
				kp.OnTimeout = s
			case OnTimeoutFail, OnTimeoutCancel, OnTimeoutNone:
				kp.OnTimeout = s
			default:
				pp.fail(v, dk, "want fail, approve, cancel or none")
			}
		case "reminders":
			remNode = v
			for i, s := range pp.strings(v, dk) {
				if s == "" {
					continue
				}
				d, ok := pp.duration(v.Content[i], dk)
				if ok {
					kp.Reminders = append(kp.Reminders, d)
				}
			}
		case "escalate":
			kp.Escalate = pp.ladder(v, dk, groups)
		case "rules":
			kp.Rules = pp.rules(v, dk)
		default:
			pp.fail(k, dk, "unknown key (want approvals, separation_of_duties, deciders, deadline, on_timeout, reminders, escalate or rules)")
		}
	})
	if remNode != nil {
		dk := prefix + ".reminders"
		switch {
		case kp.Deadline == 0 && len(kp.Reminders) > 0:
			pp.fail(remNode, dk, "reminders count back from the deadline: set kinds."+kind+".deadline")
		default:
			for i, r := range kp.Reminders {
				if r >= kp.Deadline {
					pp.fail(remNode, dk, fmt.Sprintf("%s before a deadline of %s would be before the interrupt is raised",
						r, kp.Deadline))
				}
				if i > 0 && slices.Contains(kp.Reminders[:i], r) {
					pp.fail(remNode, dk, fmt.Sprintf("%s is listed twice", r))
				}
			}
		}
		slices.SortFunc(kp.Reminders, func(a, b time.Duration) int { return int(b - a) })
		kp.Reminders = slices.Compact(kp.Reminders)
	}
	return kp, lines
}

func (pp *policyParser) ladder(n *yaml.Node, key string, groups map[string][]string) []Step {
	if n.Kind != yaml.SequenceNode {
		pp.fail(n, key, "want a list of {after: DURATION, to: [deciders]}")
		return nil
	}
	var out []Step
	for i, c := range n.Content {
		sk := fmt.Sprintf("%s[%d]", key, i)
		var st Step
		var hasAfter, hasTo, bad bool
		pp.each(c, sk, func(k string, kn, v *yaml.Node) {
			switch k {
			case "after":
				var ok bool
				st.After, ok = pp.duration(v, sk+".after")
				hasAfter, bad = true, bad || !ok
			case "to":
				st.To, hasTo = pp.refs(v, sk+".to", groups), true
			default:
				pp.fail(kn, sk+"."+k, "unknown key (want after and to)")
			}
		})
		if c.Kind != yaml.MappingNode || bad {
			continue
		}
		if !hasAfter {
			pp.fail(c, sk+".after", "is required")
			continue
		}
		if !hasTo || len(st.To) == 0 {
			pp.fail(c, sk+".to", "is required: whom the step adds")
			continue
		}
		if len(out) > 0 && st.After <= out[len(out)-1].After {
			pp.fail(c, sk+".after", fmt.Sprintf("%s is not after the previous step's %s", st.After, out[len(out)-1].After))
			continue
		}
		out = append(out, st)
	}
	return out
}
