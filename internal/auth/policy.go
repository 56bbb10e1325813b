package auth

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
)

// TimerPolicy is what firing timers asks the approval policy: who a
// reminder names and mails, whom an escalation step adds and mails. The
// timekeeper adapts a Policy to it; the store that fires the timers reads
// it.
type TimerPolicy interface {
	// Added names whom escalation step level of kind adds.
	Added(kind string, level int) []string
	// Recipients is who of candidates may decide an interrupt of kind at
	// escalation level, less the task's creator where separation of
	// duties bars them: whom a reminder names and mails (less who
	// decided).
	Recipients(kind string, level int, creator string, candidates []Principal) []Principal
	// EscalationRecipients is who of candidates escalation step level of
	// kind lets decide and who could not before it: whom its notice
	// mails.
	EscalationRecipients(kind string, level int, creator string, candidates []Principal) []Principal
}

// Policy is the approval policy per interrupt kind (SPEC §11): how many
// distinct approvers a kind needs, whether the task's creator may not
// approve (separation of duties), who may decide it, its deadline and what
// happens then, the reminders before it and the escalation ladder. It comes
// from GATEHOUSE_POLICY_FILE and the shorthands GATEHOUSE_APPROVALS and
// GATEHOUSE_SOD_KINDS. Every channel that decides (the API, the desk, the
// terminal, email links, chat) asks this one object through the Decider;
// notifications ask it who to tell (Recipients, EscalationRecipients).
//
// A Policy is immutable once built and safe for concurrent use.
type Policy struct {
	kinds  map[string]KindPolicy
	groups map[string][]string
	// source names where the policy came from ("GATEHOUSE_POLICY_FILE=…"),
	// for policy show and the admin page.
	source string
}

// KnownKinds are the interrupt kinds of SPEC §7 that the built-in
// workflows raise. A policy file may name any other kind of KindName's
// form too (SPEC §16): approval requests and embedded workflows' gates
// raise kinds of their own.
var KnownKinds = []string{"merge", "plan", "prd", "question", "review", "sdd"}

// kindNameRe is the form of an interrupt kind (SPEC §16).
var kindNameRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)

// ValidKind reports whether kind has the form of an interrupt kind:
// a lower-case letter, then up to 39 lower-case letters, digits or '_'.
func ValidKind(kind string) bool { return kindNameRe.MatchString(kind) }

// KindProblem says what is wrong with a kind name, for error messages.
const KindProblem = "a kind is a lower-case letter, then up to 39 lower-case letters, digits or '_'"

// On-timeout actions of SPEC §11.
const (
	OnTimeoutNone    = "none"    // the interrupt stays pending, marked overdue
	OnTimeoutFail    = "fail"    // the interrupt expires and the task fails
	OnTimeoutApprove = "approve" // the interrupt expires and system approves
	OnTimeoutCancel  = "cancel"  // the interrupt expires and the task is cancelled
)

// SystemActor is the principal name of what the clock does: expiries,
// approvals on timeout, reminders, escalations.
const SystemActor = "system"

// Decider reference types.
const (
	RefRole  = "role"
	RefGroup = "group"
	RefUser  = "user"
	// RefIdP names a group of the identity provider, as the user held it
	// at their last SSO sign-in (SPEC §21).
	RefIdP = "idp"
)

// DeciderRef is one entry of a kind's deciders: role:approver, group:leads,
// user:carol or idp:payments-leads.
type DeciderRef struct {
	Type string // RefRole, RefGroup, RefUser or RefIdP
	Name string
}

func (r DeciderRef) String() string { return r.Type + ":" + r.Name }

// Step is one rung of an escalation ladder: After the interrupt was raised,
// To join its deciders.
type Step struct {
	After time.Duration
	To    []DeciderRef
}

// KindPolicy is the policy of one interrupt kind.
type KindPolicy struct {
	Kind string
	// Approvals is the number of distinct approvers needed (at least 1).
	Approvals int
	// SeparationOfDuties: the task's creator may not approve.
	SeparationOfDuties bool
	// Deciders narrows who of the approvers may decide; empty: every
	// approver allowed the kind.
	Deciders []DeciderRef
	// Deadline counts from the raise; 0: none (a task may still set one).
	Deadline time.Duration
	// OnTimeout is one of the OnTimeout constants (default none).
	OnTimeout string
	// Reminders are offsets before the deadline, longest first.
	Reminders []time.Duration
	// Escalate is the ladder, by increasing After.
	Escalate []Step
	// Rules are tried in order when an interrupt of the kind is raised
	// (SPEC §18).
	Rules []Rule
}

// DefaultSoDKinds are the kinds whose creator may not approve, unless
// GATEHOUSE_SOD_KINDS or the policy file says otherwise.
var DefaultSoDKinds = []string{"merge"}

// NewPolicy builds a policy from the shorthands only: approvals maps a kind
// to its number of distinct approvers (absent or < 2: one), sodKinds lists
// the kinds whose task creator may not approve.
func NewPolicy(approvals map[string]int, sodKinds []string) Policy {
	p := Policy{kinds: map[string]KindPolicy{}, groups: map[string][]string{}, source: "environment"}
	for k, n := range approvals {
		if n > 1 {
			kp := p.Kind(k)
			kp.Approvals = n
			p.kinds[k] = kp
		}
	}
	for _, k := range sodKinds {
		kp := p.Kind(k)
		kp.SeparationOfDuties = true
		p.kinds[k] = kp
	}
	return p
}

// DefaultPolicy is one approver for every kind, and no self-approved merge.
func DefaultPolicy() Policy { return NewPolicy(nil, DefaultSoDKinds) }

// Kind returns the policy of kind, with defaults for a kind nothing names:
// one approver, no separation of duties, every approver decides, no
// deadline.
func (p Policy) Kind(kind string) KindPolicy {
	if kp, ok := p.kinds[kind]; ok {
		return kp
	}
	return KindPolicy{Kind: kind, Approvals: 1, OnTimeout: OnTimeoutNone}
}

// Kinds lists the kinds the policy says something about, by name.
func (p Policy) Kinds() []KindPolicy {
	out := make([]KindPolicy, 0, len(p.kinds))
	for _, k := range slices.Sorted(maps.Keys(p.kinds)) {
		out = append(out, p.kinds[k])
	}
	return out
}

// Groups returns the groups of the policy file: name → members.
func (p Policy) Groups() map[string][]string {
	out := make(map[string][]string, len(p.groups))
	for k, v := range p.groups {
		out[k] = slices.Clone(v)
	}
	return out
}

// Source says where the policy came from.
func (p Policy) Source() string { return p.source }

// Required is the number of distinct approvers kind needs (at least 1).
func (p Policy) Required(kind string) int { return max(p.Kind(kind).Approvals, 1) }

// SeparateDuties reports whether the creator of a task may not approve its
// interrupts of kind.
func (p Policy) SeparateDuties(kind string) bool { return p.Kind(kind).SeparationOfDuties }

// Deadline is how long an interrupt of kind may wait: override when a task
// sets one (> 0), else the policy's; 0 means none.
func (p Policy) Deadline(kind string, override time.Duration) time.Duration {
	if override > 0 {
		return override
	}
	return p.Kind(kind).Deadline
}

// Audience is who may decide an interrupt of one kind at one escalation
// level. Everyone means every approver allowed the kind (no deciders
// narrow it); otherwise the principal must match one of Refs. Users lists
// the user names the refs name, directly or through a group, so that
// notifications can look them up.
type Audience struct {
	Everyone bool
	Refs     []DeciderRef
	groups   map[string][]string
}

// Admits reports whether pr, who holds the approver role and may decide
// kind at all, is one of the audience.
func (a Audience) Admits(pr Principal) bool {
	if a.Everyone {
		return true
	}
	for _, r := range a.Refs {
		switch r.Type {
		case RefRole:
			if pr.Role.Allows(Role(r.Name)) {
				return true
			}
		case RefGroup:
			if slices.Contains(a.groups[r.Name], pr.Name) {
				return true
			}
		case RefUser:
			if pr.Name == r.Name {
				return true
			}
		case RefIdP:
			if pr.Kind == KindUser && slices.Contains(pr.Groups, r.Name) {
				return true
			}
		}
	}
	return false
}

// Users lists the user names the audience names (user: refs and group
// members), sorted, without duplicates. Roles are not expanded: a
// notifier looks up the users holding Roles itself.
func (a Audience) Users() []string {
	var out []string
	for _, r := range a.Refs {
		switch r.Type {
		case RefUser:
			out = append(out, r.Name)
		case RefGroup:
			out = append(out, a.groups[r.Name]...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Roles lists the roles the audience names (role: refs).
func (a Audience) Roles() []Role {
	var out []Role
	for _, r := range a.Refs {
		if r.Type == RefRole {
			out = append(out, Role(r.Name))
		}
	}
	return out
}

// Describe says who the audience is, for refusals and pages:
// "role:approver, group:leads (alice, bob), user:carol".
func (a Audience) Describe() string {
	if a.Everyone {
		return "every approver allowed the kind"
	}
	parts := make([]string, 0, len(a.Refs))
	for _, r := range a.Refs {
		s := r.String()
		if r.Type == RefGroup {
			s += " (" + strings.Join(a.groups[r.Name], ", ") + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// Deciders is who may decide an interrupt of kind at escalation level
// (0: as raised; n: after n escalation steps, each adding its deciders).
// With no deciders set for the kind, every approver allowed the kind
// decides at every level.
func (p Policy) Deciders(kind string, level int) Audience {
	kp := p.Kind(kind)
	if len(kp.Deciders) == 0 {
		return Audience{Everyone: true, groups: p.groups}
	}
	refs := slices.Clone(kp.Deciders)
	for i := 0; i < level && i < len(kp.Escalate); i++ {
		for _, r := range kp.Escalate[i].To {
			if !slices.Contains(refs, r) {
				refs = append(refs, r)
			}
		}
	}
	return Audience{Refs: refs, groups: p.groups}
}

// Added is what escalation step level (from 1) of kind adds to its
// deciders (nil for a level the ladder does not have).
func (p Policy) Added(kind string, level int) []DeciderRef {
	kp := p.Kind(kind)
	if level < 1 || level > len(kp.Escalate) {
		return nil
	}
	return slices.Clone(kp.Escalate[level-1].To)
}

// MayDecideAt reports whether pr may decide an interrupt of kind at
// escalation level: the approver role (or admin), the kinds the principal
// is limited to, and the policy's deciders at that level. Separation of
// duties is not part of it (it bars approving, not deciding).
func (p Policy) MayDecideAt(pr Principal, kind string, level int) bool {
	return pr.MayDecide(kind) && p.Deciders(kind, level).Admits(pr)
}

// Recipients is who of candidates (every user, say) may decide an
// interrupt of kind at level, minus the task's creator when separation of
// duties bars them: the people to tell when it is raised or reminded of.
func (p Policy) Recipients(kind string, level int, creator string, candidates []Principal) []Principal {
	var out []Principal
	sod := p.SeparateDuties(kind)
	for _, c := range candidates {
		if sod && c.Name == creator {
			continue
		}
		if p.MayDecideAt(c, kind, level) {
			out = append(out, c)
		}
	}
	return out
}

// EscalationRecipients is who of candidates escalation step level (from 1)
// of kind lets decide and who could not before it: the people an
// escalation tells. Where no deciders narrow the kind, every approver
// could decide before; the step then tells those it names who may decide
// (else an escalation to group:leads would tell nobody).
func (p Policy) EscalationRecipients(kind string, level int, creator string, candidates []Principal) []Principal {
	step := Audience{Refs: p.Added(kind, level), groups: p.groups}
	if len(step.Refs) == 0 {
		return nil
	}
	open := p.Deciders(kind, level-1).Everyone
	var out []Principal
	for _, c := range p.Recipients(kind, level, creator, candidates) {
		if open && step.Admits(c) || !open && !p.MayDecideAt(c, kind, level-1) {
			out = append(out, c)
		}
	}
	return out
}

// NamedUsers lists every user name the policy names (user: refs, group
// members), sorted: serve warns about those that do not exist yet.
func (p Policy) NamedUsers() []string {
	var out []string
	for _, members := range p.groups {
		out = append(out, members...)
	}
	for _, kp := range p.kinds {
		refs := slices.Clone(kp.Deciders)
		for _, s := range kp.Escalate {
			refs = append(refs, s.To...)
		}
		for _, r := range refs {
			if r.Type == RefUser {
				out = append(out, r.Name)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// String describes the policy for logs: "approvals merge=2; creator may
// not approve: merge; deadlines prd=4h(fail)".
func (p Policy) String() string {
	var appr, sod, dl, dec []string
	for _, kp := range p.Kinds() {
		if kp.Approvals > 1 {
			appr = append(appr, fmt.Sprintf("%s=%d", kp.Kind, kp.Approvals))
		}
		if kp.SeparationOfDuties {
			sod = append(sod, kp.Kind)
		}
		if kp.Deadline > 0 {
			dl = append(dl, fmt.Sprintf("%s=%s(%s)", kp.Kind, ShortDuration(kp.Deadline), kp.OnTimeout))
		}
		if len(kp.Deciders) > 0 {
			dec = append(dec, kp.Kind)
		}
	}
	s := fmt.Sprintf("approvals %s; creator may not approve: %s", orNone(strings.Join(appr, ",")),
		orNone(strings.Join(sod, ",")))
	if len(dl) > 0 {
		s += "; deadlines " + strings.Join(dl, ",")
	}
	if len(dec) > 0 {
		s += "; deciders narrowed: " + strings.Join(dec, ",")
	}
	return s
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

// YAML renders the effective policy in the file's own shape, every kind
// the policy names with every setting spelled out (policy show, the admin
// page). Reading it back as a policy file gives the same policy.
func (p Policy) YAML() string {
	var b strings.Builder
	if len(p.groups) == 0 {
		b.WriteString("groups: {}\n")
	} else {
		b.WriteString("groups:\n")
		for _, g := range slices.Sorted(maps.Keys(p.groups)) {
			fmt.Fprintf(&b, "  %s: [%s]\n", g, strings.Join(p.groups[g], ", "))
		}
	}
	kinds := p.Kinds()
	if len(kinds) == 0 {
		b.WriteString("kinds: {}\n")
		return b.String()
	}
	b.WriteString("kinds:\n")
	refs := func(rs []DeciderRef) string {
		s := make([]string, len(rs))
		for i, r := range rs {
			s[i] = r.String()
		}
		return "[" + strings.Join(s, ", ") + "]"
	}
	for _, kp := range kinds {
		fmt.Fprintf(&b, "  %s:\n    approvals: %d\n    separation_of_duties: %t\n", kp.Kind, max(kp.Approvals, 1), kp.SeparationOfDuties)
		if len(kp.Deciders) == 0 {
			b.WriteString("    # deciders: every approver allowed the kind (the default)\n")
		} else {
			fmt.Fprintf(&b, "    deciders: %s\n", refs(kp.Deciders))
		}
		if kp.Deadline > 0 {
			fmt.Fprintf(&b, "    deadline: %s\n", ShortDuration(kp.Deadline))
		}
		fmt.Fprintf(&b, "    on_timeout: %s\n", orNone(kp.OnTimeout))
		if len(kp.Reminders) > 0 {
			rs := make([]string, len(kp.Reminders))
			for i, r := range kp.Reminders {
				rs[i] = ShortDuration(r)
			}
			fmt.Fprintf(&b, "    reminders: [%s]\n", strings.Join(rs, ", "))
		}
		if len(kp.Escalate) > 0 {
			b.WriteString("    escalate:\n")
			for _, st := range kp.Escalate {
				fmt.Fprintf(&b, "      - {after: %s, to: %s}\n", ShortDuration(st.After), refs(st.To))
			}
		}
		if len(kp.Rules) > 0 {
			b.WriteString("    rules:\n")
			for _, r := range kp.Rules {
				fmt.Fprintf(&b, "      - {name: %s, when: %s, ", r.Name, strconv.Quote(r.When))
				if r.Action != "" {
					fmt.Fprintf(&b, "action: %s", r.Action)
					if r.Action == graph.ActionReject {
						fmt.Fprintf(&b, ", feedback: %s", strconv.Quote(r.Feedback))
					}
				} else {
					fmt.Fprintf(&b, "approvals: %d", r.Approvals)
				}
				b.WriteString("}\n")
			}
		}
	}
	return b.String()
}

// ShortDuration is a Go duration without its zero tails: 72h, 1h30m, 90s.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
