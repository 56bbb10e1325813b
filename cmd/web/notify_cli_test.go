package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

func TestUsersEmailAndSlack(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	ok := func(stdin string, args ...string) string {
		t.Helper()
		code, out, errOut := cli(t, url, stdin, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}
	ok("s3cret-password\n", "users", "add", "alice", "--role", "approver", "--email", "alice@example.com")
	ok("s3cret-password\n", "users", "add", "bob", "--role", "approver")
	if out := ok("", "users", "email", "Bob", "bob@example.org"); !strings.Contains(out, "bob's email is bob@example.org") {
		t.Errorf("email: %q", out)
	}
	if out := ok("", "users", "slack", "bob", "U024BE7LH"); !strings.Contains(out, "Slack user U024BE7LH is bob") {
		t.Errorf("slack: %q", out)
	}
	out := ok("", "users", "list")
	if !regexp.MustCompile(`alice\s+approver\s+all\s+active\s+alice@example.com\s+-`).MatchString(out) ||
		!regexp.MustCompile(`bob\s+approver\s+all\s+active\s+bob@example.org\s+U024BE7LH`).MatchString(out) {
		t.Errorf("list:\n%s", out)
	}
	st := postgres.NewStore(mustPool(t, url), postgres.Options{})
	u, err := st.UserBySlack(context.Background(), "U024BE7LH")
	if err != nil || u.Username != "bob" {
		t.Fatalf("by slack: %+v %v", u, err)
	}
	ok("", "users", "email", "alice", "")
	if u, _ := st.UserByName(context.Background(), "alice"); u.Email != "" {
		t.Errorf("cleared email: %q", u.Email)
	}

	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"pw-pw-pw-pw", []string{"users", "add", "carl", "--role", "viewer", "--email", "not an address"}, "email"},
		{"pw-pw-pw-pw", []string{"users", "add", "carl", "--role", "viewer", "--email", "Carl <c@example.com>"}, "email"},
		{"", []string{"users", "email", "alice", "nope"}, "not an email address"},
		{"", []string{"users", "email", "alice"}, "takes NAME and a value"},
		{"", []string{"users", "email", "nobody", "n@example.com"}, "not found"},
		{"", []string{"users", "slack", "alice", "lowercase"}, "not a Slack user id"},
		{"", []string{"users", "slack", "alice", "U024BE7LH"}, "another user"},
		{"", []string{"users", "role", "alice", "--role", "viewer", "--email", "a@example.com"}, "takes no --email"},
	} {
		code, _, errOut := cli(t, url, c.stdin, c.args...)
		if code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", c.args, code, errOut, c.want)
		}
	}
	// Nothing changed by the refusals.
	if u, _ := st.UserByName(context.Background(), "alice"); u.Email != "" || u.SlackID != "" {
		t.Errorf("alice after refusals: %+v", u)
	}
	if _, err := st.UserByName(context.Background(), "carl"); err == nil {
		t.Errorf("carl was added")
	}
}
