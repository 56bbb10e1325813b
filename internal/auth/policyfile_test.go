package auth

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
)

const goodPolicy = `groups: {leads: [alice, Bob]}
kinds:
  merge:
    approvals: 2
    separation_of_duties: true
    deciders: [role:admin, user:carol]
    deadline: 72h
    on_timeout: fail
    reminders: [1h, 24h]
    escalate: [{after: 24h, to: [group:leads]}, {after: 48h, to: [role:approver]}]
  prd:
    deadline: 2s
    on_timeout: approve
`

func writePolicy(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPolicyFileGood(t *testing.T) {
	t.Parallel()
	p, err := LoadPolicy(PolicySources{File: writePolicy(t, goodPolicy), SoDKinds: DefaultSoDKinds})
	if err != nil {
		t.Fatal(err)
	}
	m := p.Kind("merge")
	if m.Approvals != 2 || !m.SeparationOfDuties || m.Deadline != 72*time.Hour || m.OnTimeout != OnTimeoutFail {
		t.Errorf("merge: %+v", m)
	}
	if !slices.Equal(m.Reminders, []time.Duration{24 * time.Hour, time.Hour}) {
		t.Errorf("reminders longest first: %v", m.Reminders)
	}
	if len(m.Escalate) != 2 || m.Escalate[0].After != 24*time.Hour {
		t.Errorf("escalate: %+v", m.Escalate)
	}
	if got := p.Groups()["leads"]; !slices.Equal(got, []string{"alice", "bob"}) {
		t.Errorf("group members are user names, lower case: %v", got)
	}
	if pr := p.Kind("prd"); pr.Deadline != 2*time.Second || pr.OnTimeout != OnTimeoutApprove || pr.Approvals != 1 {
		t.Errorf("prd: %+v", pr)
	}
	if p.Kind("plan").OnTimeout != OnTimeoutNone || p.Required("plan") != 1 {
		t.Errorf("a kind the file does not name has the defaults: %+v", p.Kind("plan"))
	}
	if !slices.Equal(p.NamedUsers(), []string{"alice", "bob", "carol"}) {
		t.Errorf("named users: %v", p.NamedUsers())
	}

	alice := Principal{Name: "alice", Role: RoleApprover}
	carol := Principal{Name: "carol", Role: RoleApprover}
	dave := Principal{Name: "dave", Role: RoleApprover}
	root := Principal{Name: "root", Role: RoleAdmin}
	viewer := Principal{Name: "bob", Role: RoleViewer}
	cases := []struct {
		p     Principal
		level int
		want  bool
	}{
		{carol, 0, true}, {root, 0, true}, {alice, 0, false}, {dave, 0, false},
		{alice, 1, true}, {dave, 1, false}, {dave, 2, true},
		{viewer, 2, false}, // a group member without the approver role never decides
	}
	for _, c := range cases {
		if got := p.MayDecideAt(c.p, "merge", c.level); got != c.want {
			t.Errorf("MayDecideAt(%s, merge, %d) = %v, want %v", c.p.Name, c.level, got, c.want)
		}
	}
	everyone := []Principal{alice, carol, dave, root, viewer}
	names := func(ps []Principal) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	if got := names(p.Recipients("merge", 0, "carol", everyone)); !slices.Equal(got, []string{"root"}) {
		t.Errorf("recipients at level 0, carol the creator (separation of duties): %v", got)
	}
	if got := names(p.EscalationRecipients("merge", 1, "", everyone)); !slices.Equal(got, []string{"alice"}) {
		t.Errorf("escalation 1 adds: %v", got)
	}
	if got := names(p.EscalationRecipients("merge", 2, "", everyone)); !slices.Equal(got, []string{"dave"}) {
		t.Errorf("escalation 2 adds: %v", got)
	}
	if got := names(p.EscalationRecipients("merge", 3, "", everyone)); len(got) != 0 {
		t.Errorf("a level the ladder does not have adds: %v", got)
	}
	// A kind without deciders: every approver decides at every level; an
	// escalation tells the approvers it names.
	open, err := LoadPolicy(PolicySources{File: writePolicy(t, "groups: {leads: [alice, bob]}\nkinds:\n  prd:\n"+
		"    separation_of_duties: true\n    escalate: [{after: 1h, to: [group:leads]}]\n")})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(open.EscalationRecipients("prd", 1, "", everyone)); !slices.Equal(got, []string{"alice"}) {
		t.Errorf("escalation of a kind without deciders tells: %v, want the named approvers (alice)", got)
	}
	if got := names(open.EscalationRecipients("prd", 1, "alice", everyone)); len(got) != 0 {
		t.Errorf("escalation tells the creator barred by separation of duties: %v", got)
	}
	if got := p.Added("merge", 1); len(got) != 1 || got[0].String() != "group:leads" {
		t.Errorf("Added(merge, 1) = %v", got)
	}
	if got := p.Deciders("merge", 1).Users(); !slices.Equal(got, []string{"alice", "bob", "carol"}) {
		t.Errorf("Users at level 1: %v", got)
	}
	if !p.Deciders("plan", 0).Everyone {
		t.Error("a kind without deciders is open to every approver")
	}
}

// TestPolicyFileCustomKind: a kind no workflow raises (an approval
// request's, an embedded workflow's gate) is governed by name (SPEC §16).
func TestPolicyFileCustomKind(t *testing.T) {
	t.Parallel()
	text := "kinds:\n  tool_call:\n    approvals: 2\n    deadline: 1h\n    on_timeout: cancel\n  deploy_prod_2: {separation_of_duties: true}\n"
	p, err := LoadPolicy(PolicySources{File: writePolicy(t, text)})
	if err != nil {
		t.Fatal(err)
	}
	if k := p.Kind("tool_call"); k.Approvals != 2 || k.Deadline != time.Hour || k.OnTimeout != OnTimeoutCancel {
		t.Errorf("tool_call: %+v", k)
	}
	if !p.Kind("deploy_prod_2").SeparationOfDuties {
		t.Errorf("deploy_prod_2: %+v", p.Kind("deploy_prod_2"))
	}
	for _, k := range []string{"a", "tool_call", "x" + strings.Repeat("9", 39)} {
		if !ValidKind(k) {
			t.Errorf("ValidKind(%q) = false", k)
		}
	}
	for _, k := range []string{"", "9a", "_a", "A", "a-b", "a b", "x" + strings.Repeat("9", 40)} {
		if ValidKind(k) {
			t.Errorf("ValidKind(%q) = true", k)
		}
	}
}

func TestPolicyFileErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, text, want string }{
		{"BadKindName", "kinds:\n  Deploy-Prod:\n    deadline: 1h\n", "policy.yaml:2: kinds.Deploy-Prod: a kind is a lower-case letter"},
		{"KindTooLong", "kinds:\n  k" + strings.Repeat("x", 40) + ":\n    deadline: 1h\n", "policy.yaml:2: kinds.k" + strings.Repeat("x", 40) + ": a kind is"},
		{"UndefinedGroup", "groups: {leads: [a]}\nkinds:\n  merge:\n    deciders: [group:ops]\n",
			"policy.yaml:4: kinds.merge.deciders: group:ops is not defined under groups"},
		{"NegativeDuration", "kinds:\n  prd:\n    deadline: -5m\n", "policy.yaml:3: kinds.prd.deadline: -5m is shorter than the minimum of 1s"},
		{"UnparsableDuration", "kinds:\n  prd:\n    deadline: soon\n", `policy.yaml:3: kinds.prd.deadline: "soon" is not a duration`},
		{"TooShort", "kinds:\n  prd:\n    deadline: 500ms\n", "kinds.prd.deadline: 500ms is shorter than the minimum of 1s"},
		{"OnTimeoutMisspelt", "kinds:\n  prd:\n    deadline: 1h\n    on_timeout: fial\n",
			"policy.yaml:4: kinds.prd.on_timeout: want fail, approve, cancel or none"},
		{"ApproveAQuestion", "kinds:\n  question:\n    deadline: 1h\n    on_timeout: approve\n",
			"policy.yaml:4: kinds.question.on_timeout: approve cannot answer a question: want fail, cancel or none"},
		{"ReminderAfterDeadline", "kinds:\n  prd:\n    deadline: 1h\n    reminders: [2h]\n",
			"policy.yaml:4: kinds.prd.reminders: 2h0m0s before a deadline of 1h0m0s would be before the interrupt is raised"},
		{"RemindersWithoutDeadline", "kinds:\n  prd:\n    reminders: [2h]\n", "policy.yaml:3: kinds.prd.reminders: reminders count back from the deadline"},
		{"UnknownKey", "kinds:\n  prd:\n    deadlin: 1h\n", "policy.yaml:3: kinds.prd.deadlin: unknown key"},
		{"BadRole", "kinds:\n  prd:\n    deciders: [role:viewer]\n", "kinds.prd.deciders: role:viewer: only approver and admin decide"},
		{"BadRef", "kinds:\n  prd:\n    deciders: [carol]\n", `kinds.prd.deciders: "carol": want role:NAME`},
		{"Approvals", "kinds:\n  prd:\n    approvals: 0\n", "policy.yaml:3: kinds.prd.approvals"},
		{"LadderOrder", "groups: {a: [x]}\nkinds:\n  prd:\n    escalate:\n      - {after: 2h, to: [group:a]}\n      - {after: 1h, to: [group:a]}\n",
			"policy.yaml:6: kinds.prd.escalate[1].after: 1h0m0s is not after the previous step's 2h0m0s"},
		{"LadderGroup", "kinds:\n  prd:\n    escalate: [{after: 1h, to: [group:x]}]\n", "kinds.prd.escalate[0].to: group:x is not defined"},
		{"Syntax", "kinds:\n  prd: [\n", "policy.yaml:2: did not find expected node content"},
		{"TopKey", "kind:\n  prd: {}\n", "policy.yaml:1: kind: unknown key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			file := writePolicy(t, c.text)
			_, err := LoadPolicy(PolicySources{File: file})
			c.want = strings.ReplaceAll(c.want, "policy.yaml", file)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

func TestPolicyConflicts(t *testing.T) {
	t.Parallel()
	file := writePolicy(t, "kinds:\n  merge:\n    approvals: 2\n  prd:\n    separation_of_duties: true\n")
	_, err := LoadPolicy(PolicySources{File: file, Approvals: map[string]int{"merge": 3}, ApprovalsSet: true,
		SoDKinds: DefaultSoDKinds})
	if err == nil || !strings.Contains(err.Error(), file+":3: kinds.merge.approvals: merge is also set by GATEHOUSE_APPROVALS") {
		t.Errorf("approvals both ways: %v", err)
	}
	_, err = LoadPolicy(PolicySources{File: file, SoDKinds: []string{"prd"}, SoDKindsSet: true})
	if err == nil || !strings.Contains(err.Error(), "kinds.prd.separation_of_duties: prd is also set by GATEHOUSE_SOD_KINDS") {
		t.Errorf("sod both ways: %v", err)
	}
	// Defaults never conflict, and the shorthands fill what the file
	// leaves unset.
	p, err := LoadPolicy(PolicySources{File: file, Approvals: map[string]int{"plan": 2}, ApprovalsSet: true,
		SoDKinds: DefaultSoDKinds})
	if err != nil {
		t.Fatal(err)
	}
	if p.Required("merge") != 2 || p.Required("plan") != 2 || !p.SeparateDuties("merge") || !p.SeparateDuties("prd") {
		t.Errorf("merged policy: %s", p)
	}
}

func TestPolicyYAMLRoundTrip(t *testing.T) {
	t.Parallel()
	p, err := LoadPolicy(PolicySources{File: writePolicy(t, goodPolicy), SoDKinds: DefaultSoDKinds})
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadPolicy(PolicySources{File: writePolicy(t, p.YAML())})
	if err != nil {
		t.Fatalf("policy show's output does not load: %v\n%s", err, p.YAML())
	}
	if again.YAML() != p.YAML() {
		t.Errorf("round trip differs:\n%s\n---\n%s", p.YAML(), again.YAML())
	}
}

// TestDeciderAsksThePolicy: the Decider refuses who the policy's deciders
// leave out at the interrupt's escalation level, naming who may.
func TestDeciderAsksThePolicy(t *testing.T) {
	t.Parallel()
	p, err := LoadPolicy(PolicySources{File: writePolicy(t, goodPolicy), SoDKinds: DefaultSoDKinds})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecider(nil, nil, p, nil)
	alice := Principal{Name: "alice", Role: RoleApprover}
	itr := &graph.Interrupt{Kind: "merge"}
	err = d.MayDecide(alice, &graph.Task{}, itr)
	if err == nil || !strings.Contains(err.Error(), "role:admin, user:carol") {
		t.Errorf("alice before escalation: %v", err)
	}
	itr.EscalationLevel = 1
	if err := d.MayDecide(alice, &graph.Task{}, itr); err != nil {
		t.Errorf("alice after escalation step 1: %v", err)
	}
}

// TestIdPDeciders: idp:<group> admits the users who held the group at their
// last SSO sign-in (the principal's Groups), exactly as the IdP spells it,
// and never a token that happens to carry the name.
func TestIdPDeciders(t *testing.T) {
	t.Parallel()
	p, err := LoadPolicy(PolicySources{File: writePolicy(t,
		"kinds:\n  merge:\n    deciders: [\"idp:/payments/leads\", idp:Risk Team]\n")})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecider(nil, nil, p, nil)
	itr := &graph.Interrupt{Kind: "merge"}
	for _, c := range []struct {
		p    Principal
		want bool
	}{
		{Principal{Name: "ann", Role: RoleApprover, Kind: KindUser, Groups: []string{"staff", "/payments/leads"}}, true},
		{Principal{Name: "ben", Role: RoleApprover, Kind: KindUser, Groups: []string{"Risk Team"}}, true},
		{Principal{Name: "cy", Role: RoleApprover, Kind: KindUser, Groups: []string{"risk team", "/payments"}}, false},
		{Principal{Name: "dee", Role: RoleApprover, Kind: KindUser}, false},
		{Principal{Name: "token:ci", Role: RoleApprover, Kind: KindToken, Groups: []string{"/payments/leads"}}, false},
		{Principal{Name: "eve", Role: RoleViewer, Kind: KindUser, Groups: []string{"/payments/leads"}}, false},
	} {
		err := d.MayDecide(c.p, &graph.Task{}, itr)
		if (err == nil) != c.want {
			t.Errorf("%s %v: MayDecide = %v, want allowed %t", c.p.Name, c.p.Groups, err, c.want)
		}
		if err != nil && c.p.Role == RoleApprover && !strings.Contains(err.Error(), "idp:/payments/leads, idp:Risk Team") {
			t.Errorf("refusal does not name the deciders: %v", err)
		}
	}
	again, err := ParsePolicy("again.yaml", []byte(p.YAML()))
	if err != nil || again.YAML() != p.YAML() {
		t.Fatalf("round trip: %v\n%s", err, p.YAML())
	}
	for _, bad := range []string{"idp:", "idp:a,b", "idp:x=y"} {
		_, err := ParsePolicy("bad.yaml", []byte("kinds:\n  merge:\n    deciders: [\""+bad+"\"]\n"))
		if err == nil || !strings.Contains(err.Error(), "kinds.merge.deciders: "+bad) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
