package auth

import (
	"errors"
	"strings"
	"testing"
)

func TestRolesAreCumulative(t *testing.T) {
	t.Parallel()
	for i, r := range Roles {
		for j, min := range Roles {
			if got, want := r.Allows(min), i >= j; got != want {
				t.Errorf("%s.Allows(%s) = %v, want %v", r, min, got, want)
			}
		}
		if Role("root").Allows(RoleViewer) || Role("").Allows(RoleViewer) {
			t.Error("an unknown role allows something")
		}
	}
	if _, err := ParseRole("Approver"); err != nil {
		t.Error(err)
	}
	if _, err := ParseRole("superuser"); err == nil || !strings.Contains(err.Error(), "viewer, operator, approver or admin") {
		t.Errorf("ParseRole(superuser) = %v", err)
	}
}

func TestMayDecideKinds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		p    Principal
		kind string
		want bool
	}{
		{Principal{Name: "v", Role: RoleViewer}, "merge", false},
		{Principal{Name: "o", Role: RoleOperator}, "merge", false},
		{Principal{Name: "a", Role: RoleApprover}, "merge", true},
		{Principal{Name: "a", Role: RoleApprover, Kinds: []string{"prd"}}, "merge", false},
		{Principal{Name: "a", Role: RoleApprover, Kinds: []string{"prd", "merge"}}, "merge", true},
		{Principal{Name: "root", Role: RoleAdmin, Kinds: []string{"prd"}}, "merge", true},
	}
	for _, c := range cases {
		if got := c.p.MayDecide(c.kind); got != c.want {
			t.Errorf("%+v MayDecide(%s) = %v, want %v", c.p, c.kind, got, c.want)
		}
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"Alice": "alice", " bob.smith ": "bob.smith", "a-1_b": "a-1_b"} {
		if got, err := NormalizeUsername(in); err != nil || got != want {
			t.Errorf("NormalizeUsername(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "bootstrap", "Bootstrap", "token:ci", "a b", "-x", "é", strings.Repeat("a", 64)} {
		if _, err := NormalizeUsername(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("NormalizeUsername(%q) = %v, want invalid", bad, err)
		}
	}
	if _, err := CheckTokenName("CI-bot.1"); err != nil {
		t.Error(err)
	}
	if _, err := CheckTokenName("ci bot"); err == nil {
		t.Error("a token name with a space passed")
	}
	kinds, err := ParseKinds(" merge, PRD,merge ")
	if err != nil || strings.Join(kinds, ",") != "merge,prd" {
		t.Errorf("ParseKinds = %v, %v", kinds, err)
	}
	if k, err := ParseKinds("none"); err != nil || len(k) != 0 {
		t.Errorf("ParseKinds(none) = %v, %v", k, err)
	}
	if _, err := ParseKinds("merge,1x"); err == nil {
		t.Error("ParseKinds accepted 1x")
	}
}

func TestPasswordHash(t *testing.T) {
	t.Parallel()
	h, err := HashPassword("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("hash format: %s", h)
	}
	if !VerifyPassword(h, "correct horse battery") {
		t.Error("the right password does not verify")
	}
	if VerifyPassword(h, "correct horse battery ") || VerifyPassword(h, "") {
		t.Error("a wrong password verifies")
	}
	h2, _ := HashPassword("correct horse battery")
	if h2 == h {
		t.Error("two hashes of one password are equal: no salt")
	}
	for _, bad := range []string{"", "plain", "$argon2id$v=19$m=99999999,t=1,p=1$c2FsdHNhbHQ$" + strings.Repeat("A", 43),
		"$argon2i$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$" + strings.Repeat("A", 43), h[:len(h)-5]} {
		if VerifyPassword(bad, "correct horse battery") {
			t.Errorf("VerifyPassword(%q) matched", bad)
		}
	}
	if err := CheckPassword("short"); !errors.Is(err, ErrInvalid) {
		t.Errorf("CheckPassword(short) = %v", err)
	}
	if err := CheckPassword(strings.Repeat("x", MaxPassword+1)); !errors.Is(err, ErrInvalid) {
		t.Errorf("CheckPassword(long) = %v", err)
	}
}

func TestCSRFToken(t *testing.T) {
	t.Parallel()
	k1, k2 := newSecretKey(), newSecretKey()
	tok := CSRFToken(k1)
	if !CheckCSRF(k1, tok) {
		t.Error("the session's own token is refused")
	}
	if CheckCSRF(k2, tok) || CheckCSRF(k1, "") || CheckCSRF(nil, tok) || CheckCSRF(k1, tok[:len(tok)-1]) {
		t.Error("a wrong token passes")
	}
	if CSRFToken(k1) != tok {
		t.Error("the token of a session changes")
	}
}

func TestSecretsShape(t *testing.T) {
	t.Parallel()
	s := tokenPrefix + randomSecret()
	if !looksLikeToken(s) || looksLikeSession(s) {
		t.Errorf("token %q", s)
	}
	if ss := sessionPrefix + randomSecret(); !looksLikeSession(ss) || looksLikeToken(ss) {
		t.Errorf("session %q", ss)
	}
	if len(RandomPassword()) != 24 {
		t.Error("RandomPassword length")
	}
}

func TestPolicy(t *testing.T) {
	t.Parallel()
	a, err := ParseApprovals("merge=2, PRD=1")
	if err != nil {
		t.Fatal(err)
	}
	p := NewPolicy(a, []string{"merge"})
	if p.Required("merge") != 2 || p.Required("prd") != 1 || p.Required("plan") != 1 {
		t.Errorf("Required: %v", p)
	}
	if !p.SeparateDuties("merge") || p.SeparateDuties("prd") {
		t.Errorf("SeparateDuties: %v", p)
	}
	if got := p.String(); got != "approvals merge=2; creator may not approve: merge" {
		t.Errorf("String() = %q", got)
	}
	for _, bad := range []string{"merge", "merge=0", "merge=11", "merge=two", "1x=2", "merge=2x"} {
		if _, err := ParseApprovals(bad); err == nil {
			t.Errorf("ParseApprovals(%q) passed", bad)
		}
	}
	if d := DefaultPolicy(); !d.SeparateDuties("merge") || d.Required("merge") != 1 {
		t.Errorf("DefaultPolicy: %v", d)
	}
	if Progress(1, 2) != "1 of 2 approvals" {
		t.Error(Progress(1, 2))
	}
}

// TestRoleArticle: messages name a role with its article — "an operator",
// never "a operator" (issue 27, item 11).
func TestRoleArticle(t *testing.T) {
	for role, want := range map[Role]string{RoleViewer: "a viewer", RoleOperator: "an operator",
		RoleApprover: "an approver", RoleAdmin: "an admin", "": "without a role"} {
		if got := role.Article(); got != want {
			t.Errorf("%q.Article() = %q, want %q", role, got, want)
		}
	}
}
