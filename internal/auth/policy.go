package auth

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Policy is the approval policy per interrupt kind: how many distinct
// approvers a kind needs, and for which kinds the task's creator may not
// approve (separation of duties).
type Policy struct {
	approvals map[string]int
	sod       map[string]bool
}

// DefaultSoDKinds are the kinds whose creator may not approve, unless
// GATEHOUSE_SOD_KINDS says otherwise.
var DefaultSoDKinds = []string{"merge"}

// NewPolicy builds a policy: approvals maps a kind to its number of
// distinct approvers (absent or < 2: one), sodKinds lists the kinds whose
// task creator may not approve.
func NewPolicy(approvals map[string]int, sodKinds []string) Policy {
	p := Policy{approvals: map[string]int{}, sod: map[string]bool{}}
	for k, n := range approvals {
		if n > 1 {
			p.approvals[k] = n
		}
	}
	for _, k := range sodKinds {
		p.sod[k] = true
	}
	return p
}

// DefaultPolicy is one approver for every kind, and no self-approved merge.
func DefaultPolicy() Policy { return NewPolicy(nil, DefaultSoDKinds) }

// Required is the number of distinct approvers kind needs (at least 1).
func (p Policy) Required(kind string) int {
	if n := p.approvals[kind]; n > 1 {
		return n
	}
	return 1
}

// SeparateDuties reports whether the creator of a task may not approve its
// interrupts of kind.
func (p Policy) SeparateDuties(kind string) bool { return p.sod[kind] }

// String describes the policy for logs: "approvals merge=2; creator may not approve: merge".
func (p Policy) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(p.approvals)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, p.approvals[k]))
	}
	sod := slices.Sorted(maps.Keys(p.sod))
	return fmt.Sprintf("approvals %s; creator may not approve: %s", orNone(strings.Join(parts, ",")),
		orNone(strings.Join(sod, ",")))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// ParseApprovals reads GATEHOUSE_APPROVALS: "merge=2,prd=2" (a kind may
// need 1 to 10 distinct approvers).
func ParseApprovals(s string) (map[string]int, error) {
	out := map[string]int{}
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "none") {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d", &n); !ok || err != nil || n < 1 || n > 10 ||
			fmt.Sprint(n) != strings.TrimSpace(v) {
			return nil, fmt.Errorf("%q: want kind=N with N from 1 to 10", part)
		}
		if !kindRe.MatchString(k) {
			return nil, fmt.Errorf("%q is not an interrupt kind", k)
		}
		out[k] = n
	}
	return out, nil
}
