package views

import "time"

// --- sign in ---

// LoginPage is the sign-in form.
type LoginPage struct {
	Page
	// CSRF is the login form's own token (there is no session yet).
	CSRF     string
	Next     string
	Username string
	Error    string
	// Message is a notice: signed out, password changed.
	Message string
	// SSOName is what "Sign in with …" names ("": no single sign-on);
	// SSOReady is false while the identity provider cannot be reached.
	SSOName  string
	SSOReady bool
	// Password says whether the password form is offered to everyone;
	// BreakGlass, whether it is offered (folded) to the break-glass user
	// only.
	Password   bool
	BreakGlass bool
}

// --- administration ---

// UsersPage lists the users with their forms.
type UsersPage struct {
	Page
	Users []UserRow
	Roles []string
	// Message reports the last change; Error a refused one.
	Message string
	Error   string
	// Kept input of a refused add.
	NewName, NewRole, NewKinds, NewEmail string
}

// UserRow is one user.
type UserRow struct {
	Name     string
	Role     string
	Kinds    string // comma-separated; "" for every kind
	Disabled bool
	Created  time.Time
	Self     bool
	// Email and SlackID say where notifications reach the user.
	Email, SlackID string
	// Issuer and Subject bind a user who signs in with SSO ("": a local
	// user); Groups are the IdP's groups at the last sign-in.
	Issuer, Subject string
	Groups          string
	LastLogin       *time.Time
}

// TokensPage lists the API tokens.
type TokensPage struct {
	Page
	Tokens []TokenRow
	Roles  []string
	// Secret is a token just created: shown this once.
	Secret, SecretName string
	Message, Error     string
	// BaseURL is where this server is reached, for the example curl.
	BaseURL string
}

// AccountPage is the signed-in user's own page: change the password.
type AccountPage struct {
	Page
	Error   string
	Message string
}

// TokenRow is one API token.
type TokenRow struct {
	ID        string
	Name      string
	Role      string
	CreatedBy string
	Created   time.Time
	LastUsed  *time.Time
	Revoked   *time.Time
}

// AuditPage is the audit trail with its filter.
type AuditPage struct {
	Page
	Actor, Kind, Since, Until string
	Error                     string
	Events                    []AuditRow
	// MoreURL pages on (older events), when the page is full.
	MoreURL string
}

// AuditRow is one audit event.
type AuditRow struct {
	At      time.Time
	Actor   string
	Kind    string
	Subject string
	// TaskURL links a task's event to its page.
	TaskURL string
	Details string
	// What is Kind in words ("Decision recorded"); SubjectLabel the
	// subject as a person reads it (a task's title, a user's name) and
	// SubjectURL where it lives; ActorURL the actor's user row.
	What         string
	SubjectLabel string
	SubjectURL   string
	ActorURL     string
	// Fields are the event's details, labelled.
	Fields []AuditField
}

// AuditField is one labelled detail of an audit event.
type AuditField struct {
	Label, Value string
}

// PolicyPage is the effective approval policy.
type PolicyPage struct {
	Page
	Source string
	YAML   string
	Kinds  []PolicyKind
	Groups []PolicyGroup
}

// PolicyKind is one kind's row.
type PolicyKind struct {
	Kind, CreatorMay, Deciders, Deadline, OnTimeout, Reminders, Escalate string
	Approvals                                                            int
	// Rules are the kind's rules (SPEC §18), one line each, in order.
	Rules []string
}

// PolicyGroup is a group and its members.
type PolicyGroup struct {
	Name    string
	Members []string
}
