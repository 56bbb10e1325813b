package main

// gatehouse users … and gatehouse tokens …: administration from the
// terminal of a machine that can reach the database. The actor in the audit
// trail is cli:$USER.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres"
)

const usersSynopsis = `users add NAME --role ROLE [--kinds KINDS] [--email EMAIL]   (the password is read from standard input)
       gatehouse users list
       gatehouse users disable NAME | enable NAME
       gatehouse users passwd NAME                      (the password is read from standard input)
       gatehouse users role NAME --role ROLE [--kinds KINDS]
       gatehouse users email NAME EMAIL                 ("" clears it)
       gatehouse users slack NAME SLACK_ID              (e.g. U024BE7LH; "" clears it)

Roles are cumulative: viewer reads; operator also starts, cancels and retries
tasks; approver also decides interrupts; admin also manages users and tokens.
--kinds limits an approver to interrupt kinds (e.g. merge,prd).
A user with an email address is mailed the interrupts they may decide (with
a one-click action link) and the end of the tasks they started, when serve
has GATEHOUSE_SMTP_URL. A Slack id lets the user decide from Slack buttons.

Flags:`

const tokensSynopsis = `tokens create NAME --role ROLE   (prints the token once: store it)
       gatehouse tokens list
       gatehouse tokens revoke ID

API tokens authenticate /api/v1 requests as Authorization: Bearer TOKEN, with
the token's role. Only a hash of a token is stored.

Flags:`

// adminFlags are the flags of users and tokens; positional arguments may
// come before and after them.
type adminFlags struct {
	role  string
	kinds string
	email string
	pos   []string
}

func parseAdminFlags(name, synopsis string, args []string, stdout io.Writer, withKinds bool) (adminFlags, error) {
	var f adminFlags
	fs := newFlags(name, synopsis, stdout)
	fs.StringVar(&f.role, "role", "", "`ROLE`: viewer, operator, approver or admin")
	if withKinds {
		fs.StringVar(&f.kinds, "kinds", "", "interrupt `KINDS` an approver may decide, comma-separated (default: all)")
		fs.StringVar(&f.email, "email", "", "`EMAIL` address for notifications (users add)")
	}
	for {
		if err := parseFlags(fs, args); err != nil {
			return f, err
		}
		if fs.NArg() == 0 {
			return f, nil
		}
		f.pos = append(f.pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// cliActor is who acts from the command line, in the audit trail.
func cliActor(getenv func(string) string) string {
	if u := getenv("USER"); u != "" {
		return "cli:" + u
	}
	return "cli"
}

// authService opens the database and returns the auth service over it.
func authService(ctx context.Context, getenv func(string) string) (*auth.Service, func(), error) {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return nil, nil, err
	}
	pool, err := postgres.OpenMigrated(ctx, cfg.DatabaseURL, 2, "run")
	if err != nil {
		return nil, nil, err
	}
	svc := auth.NewService(auth.Config{Store: postgres.NewStore(pool, postgres.Options{}), SessionIdle: cfg.Auth.SessionIdle,
		SessionMax: cfg.Auth.SessionMax})
	return svc, pool.Close, nil
}

// adminError turns the auth package's refusals into one-line usage errors.
func adminError(err error) error {
	var inv *auth.InvalidError
	switch {
	case errors.As(err, &inv):
		return usageError{inv.Error()}
	case errors.Is(err, auth.ErrExists), errors.Is(err, auth.ErrNotFound):
		return usageError{err.Error()}
	}
	return err
}

// readPassword reads a password from the first line of stdin.
func readPassword(stdin io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(stdin, auth.MaxPassword+2)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		return "", usageError{"no password on standard input (e.g. printf '%s\\n' \"$PASSWORD\" | gatehouse users add …)"}
	}
	return pw, nil
}

func cmdUsers(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout io.Writer) error {
	f, err := parseAdminFlags("users", usersSynopsis, args, stdout, true)
	if err != nil {
		return err
	}
	if len(f.pos) == 0 {
		return usageError{"users needs one of: add, list, disable, enable, passwd, role, email, slack (try gatehouse users --help)"}
	}
	sub, rest := f.pos[0], f.pos[1:]
	needName := func() (string, error) {
		if len(rest) != 1 {
			return "", usageError{fmt.Sprintf("users %s takes one NAME", sub)}
		}
		return rest[0], nil
	}
	roleKinds := func() (auth.Role, []string, error) {
		if f.role == "" {
			return "", nil, usageError{fmt.Sprintf("users %s needs --role ROLE (viewer, operator, approver or admin)", sub)}
		}
		role, err := auth.ParseRole(f.role)
		if err != nil {
			return "", nil, usageError{"--role: " + err.Error()}
		}
		kinds, err := auth.ParseKinds(f.kinds)
		if err != nil {
			return "", nil, usageError{"--kinds: " + err.Error()}
		}
		return role, kinds, nil
	}
	var name, value string
	var role auth.Role
	var kinds []string
	if f.email != "" && sub != "add" {
		return usageError{fmt.Sprintf("users %s takes no --email (users email NAME EMAIL sets it)", sub)}
	}
	switch sub {
	case "list":
		if len(rest) > 0 || f.role != "" || f.kinds != "" {
			return usageError{"users list takes no arguments"}
		}
	case "add", "role":
		if name, err = needName(); err != nil {
			return err
		}
		if role, kinds, err = roleKinds(); err != nil {
			return err
		}
	case "disable", "enable", "passwd":
		if name, err = needName(); err != nil {
			return err
		}
		if f.role != "" || f.kinds != "" {
			return usageError{fmt.Sprintf("users %s takes no --role or --kinds", sub)}
		}
	case "email", "slack":
		if len(rest) != 2 {
			return usageError{fmt.Sprintf("users %s takes NAME and a value (\"\" clears it)", sub)}
		}
		if f.role != "" || f.kinds != "" {
			return usageError{fmt.Sprintf("users %s takes no --role or --kinds", sub)}
		}
		name, value = rest[0], rest[1]
	default:
		return usageError{fmt.Sprintf("users %q: want add, list, disable, enable, passwd, role, email or slack", sub)}
	}
	if sub == "add" {
		if _, err := auth.NormalizeEmail(f.email); err != nil {
			return usageError{"--email: " + err.Error()}
		}
	}
	if sub == "email" {
		if _, err := auth.NormalizeEmail(value); err != nil {
			return adminError(err)
		}
	}
	svc, closeDB, err := authService(ctx, getenv)
	if err != nil {
		return err
	}
	defer closeDB()
	actor := cliActor(getenv)
	switch sub {
	case "add":
		pw, err := readPassword(stdin)
		if err != nil {
			return err
		}
		u, err := svc.AddUserWithEmail(ctx, actor, name, pw, role, kinds, f.email)
		if err != nil {
			return adminError(err)
		}
		fmt.Fprintf(stdout, "user %s added (%s)\n", u.Username, describeRole(u.Role, u.Kinds))
	case "list":
		users, err := svc.Users(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tROLE\tKINDS\tSTATUS\tEMAIL\tSLACK\tCREATED")
		for _, u := range users {
			status := "active"
			if u.Disabled {
				status = "disabled"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", u.Username, u.Role, orAll(u.Kinds), status,
				orDash(u.Email), orDash(u.SlackID), u.CreatedAt.UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	case "disable":
		if err := svc.DisableUser(ctx, actor, name); err != nil {
			return adminError(err)
		}
		fmt.Fprintf(stdout, "user %s disabled; its sessions are ended\n", strings.ToLower(name))
	case "enable":
		if err := svc.EnableUser(ctx, actor, name); err != nil {
			return adminError(err)
		}
		fmt.Fprintf(stdout, "user %s enabled\n", strings.ToLower(name))
	case "passwd":
		pw, err := readPassword(stdin)
		if err != nil {
			return err
		}
		if err := svc.SetPassword(ctx, actor, name, pw); err != nil {
			return adminError(err)
		}
		fmt.Fprintf(stdout, "password of %s changed; its sessions are ended\n", strings.ToLower(name))
	case "email":
		if err := svc.SetEmail(ctx, actor, name, value); err != nil {
			return adminError(err)
		}
		if value == "" {
			fmt.Fprintf(stdout, "user %s has no email address now\n", strings.ToLower(name))
		} else {
			fmt.Fprintf(stdout, "user %s's email is %s\n", strings.ToLower(name), strings.TrimSpace(value))
		}
	case "slack":
		if err := svc.SetSlack(ctx, actor, name, value); err != nil {
			return adminError(err)
		}
		if value == "" {
			fmt.Fprintf(stdout, "user %s has no Slack id now\n", strings.ToLower(name))
		} else {
			fmt.Fprintf(stdout, "Slack user %s is %s\n", strings.TrimSpace(value), strings.ToLower(name))
		}
	case "role":
		if err := svc.SetRole(ctx, actor, name, role, kinds); err != nil {
			return adminError(err)
		}
		fmt.Fprintf(stdout, "user %s is now %s\n", strings.ToLower(name), describeRole(role, kinds))
	}
	return nil
}

func describeRole(r auth.Role, kinds []string) string {
	if r == auth.RoleApprover && len(kinds) > 0 {
		return fmt.Sprintf("%s of %s", r, strings.Join(kinds, ", "))
	}
	return string(r)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orAll(kinds []string) string {
	if len(kinds) == 0 {
		return "all"
	}
	return strings.Join(kinds, ",")
}

func cmdTokens(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f, err := parseAdminFlags("tokens", tokensSynopsis, args, stdout, false)
	if err != nil {
		return err
	}
	if len(f.pos) == 0 {
		return usageError{"tokens needs one of: create, list, revoke (try gatehouse tokens --help)"}
	}
	sub, rest := f.pos[0], f.pos[1:]
	var role auth.Role
	switch sub {
	case "create":
		if len(rest) != 1 {
			return usageError{"tokens create takes one NAME"}
		}
		if f.role == "" {
			return usageError{"tokens create needs --role ROLE (viewer, operator, approver or admin)"}
		}
		if role, err = auth.ParseRole(f.role); err != nil {
			return usageError{"--role: " + err.Error()}
		}
		if _, err := auth.CheckTokenName(rest[0]); err != nil {
			return adminError(err)
		}
	case "list":
		if len(rest) > 0 || f.role != "" {
			return usageError{"tokens list takes no arguments"}
		}
	case "revoke":
		if len(rest) != 1 || f.role != "" {
			return usageError{"tokens revoke takes one ID (see gatehouse tokens list)"}
		}
	default:
		return usageError{fmt.Sprintf("tokens %q: want create, list or revoke", sub)}
	}
	svc, closeDB, err := authService(ctx, getenv)
	if err != nil {
		return err
	}
	defer closeDB()
	actor := cliActor(getenv)
	switch sub {
	case "create":
		secret, t, err := svc.CreateToken(ctx, actor, rest[0], role)
		if err != nil {
			return adminError(err)
		}
		// The secret alone on stdout, so that TOKEN=$(gatehouse tokens
		// create …) works; the note on stderr.
		fmt.Fprintln(stdout, secret)
		fmt.Fprintf(stderr, "token %s (%s, id %s) created: it is shown this once, only its hash is stored\n",
			t.Name, t.Role, t.ID)
	case "list":
		toks, err := svc.Tokens(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tROLE\tCREATED BY\tCREATED\tLAST USED\tSTATUS")
		for _, t := range toks {
			status := "active"
			if t.RevokedAt != nil {
				status = "revoked " + t.RevokedAt.UTC().Format(time.RFC3339)
			}
			used := "never"
			if t.LastUsedAt != nil {
				used = t.LastUsedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Role, t.CreatedBy,
				t.CreatedAt.UTC().Format(time.RFC3339), used, status)
		}
		return tw.Flush()
	case "revoke":
		t, err := svc.RevokeToken(ctx, actor, rest[0])
		if err != nil {
			return adminError(err)
		}
		fmt.Fprintf(stdout, "token %s (%s) revoked\n", t.Name, t.ID)
	}
	return nil
}
