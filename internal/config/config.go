// Package config reads Gatehouse's settings from the environment once, in
// main, and validates them as a whole (SPEC §6).
//
// It imports graph and auth (the policy it reads) only: never the server
// nor the store; main hands the values on.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gatehousehq/gatehouse/internal/auth"
)

// Config is every setting of the binary.
type Config struct {
	DatabaseURL    string
	Addr           string
	Workers        int
	LeaseTTL       time.Duration
	BootstrapToken string
	AdminPassword  string
	ShutdownGrace  time.Duration
	LogLevel       string
	LogFormat      string
	// HistoryRetention: serve prunes the checkpoint history of tasks that
	// ended longer ago than this, hourly (0: keeps everything).
	HistoryRetention time.Duration
	// OutboxRetention: serve prunes finished deliveries (with their
	// attempts) and ended action links older than this, hourly (0: keeps
	// everything).
	OutboxRetention time.Duration
	// CORSOrigins are the browser origins allowed to call /langgraph
	// (GATEHOUSE_CORS_ORIGINS, comma-separated exact origins, no "*").
	CORSOrigins []string

	Auth   Auth
	LLM    LLM
	Notify Notify
	// SSO is single sign-on with OpenID Connect (SPEC §21).
	SSO SSO
}

// Notify configures the notification channels (SPEC §12).
type Notify struct {
	// PublicURL is the base of every link in a notification, without a
	// trailing slash ("": none).
	PublicURL string
	// SMTPURL is smtp://user:pass@host:port or smtps://…; "" sends no mail.
	SMTPURL  string
	SMTPFrom string
	// WebhookBackoffScale multiplies the webhook retry schedule (tests use
	// a small one).
	WebhookBackoffScale float64
	// WebhookAllowPrivate lets webhooks reach loopback, private and
	// link-local addresses.
	WebhookAllowPrivate bool
	SlackWebhookURL     string
	SlackSigningSecret  string
}

// Auth configures who may decide (issue 6).
type Auth struct {
	// Approvals maps an interrupt kind to the number of distinct approvers
	// it needs (GATEHOUSE_APPROVALS, e.g. "merge=2").
	Approvals map[string]int
	// SoDKinds are the kinds whose task creator may not approve
	// (GATEHOUSE_SOD_KINDS, default "merge"; "none" for no kind).
	SoDKinds []string
	// PolicyFile is GATEHOUSE_POLICY_FILE; Policy is the effective
	// approval policy built from it and the two shorthands above (SPEC §11).
	PolicyFile string
	Policy     auth.Policy
	// ClaimTTL is how long a claim on an interrupt lasts unless renewed.
	ClaimTTL time.Duration
	// SessionIdle and SessionMax end desk sessions: unused for so long, or
	// so long after login.
	SessionIdle time.Duration
	SessionMax  time.Duration
	// TrustProxy believes X-Forwarded-Proto and X-Forwarded-For (behind a
	// reverse proxy that sets them).
	TrustProxy bool
}

// LLM selects and configures the language-model provider.
type LLM struct {
	Provider   string
	ScriptFile string

	OllamaBaseURL   string
	OllamaModel     string
	OllamaTemp      float64
	OllamaTimeout   time.Duration
	OllamaMaxTurns  int
	OpenAIBaseURL   string
	OpenAIAPIKey    string
	OpenAIModel     string
	OpenAITimeout   time.Duration
	OpenAIMaxTokens int
}

// DefaultOutboxRetention is how long finished notification rows are kept
// unless GATEHOUSE_OUTBOX_RETENTION says otherwise: 30 days.
const DefaultOutboxRetention = 30 * 24 * time.Hour

// Var documents one environment variable (for --help).
type Var struct {
	Name, Default, Meaning string
}

// Vars lists the environment variables Load reads.
var Vars = []Var{
	{"DATABASE_URL", "(private cluster with `make run`)", "PostgreSQL connection string"},
	{"GATEHOUSE_ADDR", "127.0.0.1:8080", "listen address"},
	{"GATEHOUSE_WORKERS", "8", "concurrent task executors on this replica (0: API and desk only)"},
	{"GATEHOUSE_LEASE_TTL", "15s", "lease length; a dead replica's tasks move after this"},
	{"GATEHOUSE_SHUTDOWN_GRACE", "10s", "how long node runs in flight may finish on shutdown"},
	{"GATEHOUSE_BOOTSTRAP_TOKEN", "unset", "an admin API token with this value (principal \"bootstrap\")"},
	{"GATEHOUSE_ADMIN_PASSWORD", "unset", "password of the admin user (unset: generated and logged once on first start)"},
	{"GATEHOUSE_APPROVALS", "unset: 1 each", "distinct approvers an interrupt kind needs, e.g. merge=2,prd=2"},
	{"GATEHOUSE_SOD_KINDS", "merge", "kinds whose task creator may not approve them (none: no kind)"},
	{"GATEHOUSE_POLICY_FILE", "unset", "YAML approval policy: groups; per kind approvals, deciders, deadline, on_timeout, reminders, escalate (README)"},
	{"GATEHOUSE_CLAIM_TTL", "30m", "how long a claim on an interrupt lasts; renewed while the holder's task page is open"},
	{"GATEHOUSE_SESSION_IDLE", "12h", "a desk session unused this long ends"},
	{"GATEHOUSE_SESSION_MAX", "168h", "a desk session ends this long after login, however busy"},
	{"GATEHOUSE_CORS_ORIGINS", "none", "browser origins allowed to call /langgraph (Agent Inbox), comma-separated, e.g. https://dev.agentinbox.ai"},
	{"GATEHOUSE_TRUST_PROXY", "false", "trust X-Forwarded-Proto/-For from a reverse proxy (Secure cookies, client address)"},
	{"GATEHOUSE_HISTORY_RETENTION", "0: keep all", "serve prunes the checkpoint history of tasks ended longer ago than this, hourly (e.g. 720h)"},
	{"GATEHOUSE_OUTBOX_RETENTION", "720h", "serve prunes finished (delivered, failed) notifications with their attempts, and ended action links, older than this, hourly (0: keep all)"},
	{"GATEHOUSE_PUBLIC_URL", "unset", "base URL of the links in emails, Slack and webhooks, e.g. https://gatehouse.example.com (required with SMTP or Slack)"},
	{"GATEHOUSE_SMTP_URL", "unset: no email", "smtp://user:pass@host:587 (STARTTLS when offered) or smtps://user:pass@host:465"},
	{"GATEHOUSE_SMTP_FROM", "gatehouse@<PUBLIC_URL host>", "From address of the emails"},
	{"GATEHOUSE_WEBHOOK_BACKOFF_SCALE", "1", "multiplies the webhook retry schedule (5s, 5m, 30m, 2h, 5h, 10h, 14h, 20h, 24h)"},
	{"GATEHOUSE_WEBHOOK_ALLOW_PRIVATE", "false", "let webhooks reach loopback, private and link-local addresses"},
	{"GATEHOUSE_SLACK_WEBHOOK_URL", "unset", "Slack incoming webhook that each raised interrupt is posted to"},
	{"GATEHOUSE_SLACK_SIGNING_SECRET", "unset", "verifies Slack's button callbacks (POST /integrations/slack/actions); required with the webhook URL"},
	{"GATEHOUSE_OIDC_ISSUER", "unset: no SSO", "OpenID Connect issuer URL of the identity provider (https; http only on loopback); needs CLIENT_ID, CLIENT_SECRET, ROLE_MAP and GATEHOUSE_PUBLIC_URL"},
	{"GATEHOUSE_OIDC_CLIENT_ID", "unset", "client id registered at the identity provider (redirect URI <GATEHOUSE_PUBLIC_URL>/auth/oidc/callback)"},
	{"GATEHOUSE_OIDC_CLIENT_SECRET", "unset", "client secret (a confidential client; PKCE S256 as well)"},
	{"GATEHOUSE_OIDC_ROLE_MAP", "unset", "IdP group=role pairs, highest wins, set at every sign-in, e.g. idp-admins=admin,payments-leads=approver,staff=viewer"},
	{"GATEHOUSE_OIDC_GROUPS_CLAIM", "groups", "ID token (else userinfo) claim holding the groups; a dotted path reads into an object (realm_access.roles)"},
	{"GATEHOUSE_OIDC_SCOPES", "profile email", "scopes asked for besides openid (add groups where the provider needs it)"},
	{"GATEHOUSE_OIDC_NAME", "SSO", "the login page's button says Sign in with <name>"},
	{"GATEHOUSE_LOCAL_LOGIN", "true", "false: password sign-in is off for everyone but GATEHOUSE_BREAK_GLASS_USER (needs SSO)"},
	{"GATEHOUSE_BREAK_GLASS_USER", "unset", "the one local user who may still sign in with a password when GATEHOUSE_LOCAL_LOGIN=false"},
	{"GATEHOUSE_LOG_LEVEL", "info", "debug, info, warn or error"},
	{"GATEHOUSE_LOG_FORMAT", "text", "text or json"},
	{"LLM_PROVIDER", "scripted", "scripted (offline), ollama or openai"},
	{"LLM_SCRIPT_FILE", "unset", "JSON file of canned replies per role for the scripted provider"},
	{"OLLAMA_BASE_URL", "http://localhost:11434", "Ollama server"},
	{"OLLAMA_MODEL_NAME", "mistral:latest", "Ollama model"},
	{"OLLAMA_TEMPERATURE", "0.7", "sampling temperature"},
	{"OLLAMA_REQUEST_TIMEOUT", "30", "timeout of one Ollama request (seconds, or a duration such as 45s)"},
	{"OLLAMA_MAX_TURNS", "5", "default max turns of the slogan workflow"},
	{"OPENAI_BASE_URL", "https://api.openai.com/v1", "OpenAI-compatible server"},
	{"OPENAI_API_KEY", "unset", "API key"},
	{"OPENAI_MODEL", "gpt-4o-mini", "model"},
	{"OPENAI_REQUEST_TIMEOUT", "120", "timeout of one OpenAI request (seconds, or a duration such as 2m)"},
}

// Load reads the configuration through getenv and validates it. The error
// names every bad variable.
func Load(getenv func(string) string) (Config, error) {
	var errs []error
	str := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	integer := func(name string, def, min int) int {
		v := str(name, "")
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			errs = append(errs, fmt.Errorf("%s=%q: want an integer ≥ %d", name, v, min))
			return def
		}
		return n
	}
	duration := func(name string, def time.Duration) time.Duration {
		v := str(name, "")
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a positive duration such as 15s", name, v))
			return def
		}
		return d
	}
	// seconds reads seed 004's plain number of seconds, or a Go duration.
	seconds := func(name string, def time.Duration) time.Duration {
		v := str(name, "")
		if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 {
			return time.Duration(n * float64(time.Second))
		}
		return duration(name, def)
	}
	// retention reads a duration where 0 (or unset) turns the thing off.
	retention := func(name string, def time.Duration) time.Duration {
		v := str(name, "")
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a duration such as 720h (0: keep everything)", name, v))
			return 0
		}
		return d
	}
	float := func(name string, def float64) float64 {
		v := str(name, "")
		if v == "" {
			return def
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want a number", name, v))
			return def
		}
		return f
	}
	boolean := func(name string, def bool) bool {
		v := strings.ToLower(str(name, ""))
		switch v {
		case "":
			return def
		case "1", "true", "yes", "on":
			return true
		case "0", "false", "no", "off":
			return false
		}
		errs = append(errs, fmt.Errorf("%s=%q: want true or false", name, v))
		return def
	}
	approvals, err := auth.ParseApprovals(getenv("GATEHOUSE_APPROVALS"))
	if err != nil {
		errs = append(errs, fmt.Errorf("GATEHOUSE_APPROVALS: %w", err))
	}
	sodKinds, err := auth.ParseKinds(str("GATEHOUSE_SOD_KINDS", strings.Join(auth.DefaultSoDKinds, ",")))
	if err != nil {
		errs = append(errs, fmt.Errorf("GATEHOUSE_SOD_KINDS: %w", err))
	}
	policyFile := str("GATEHOUSE_POLICY_FILE", "")
	var policy auth.Policy
	if approvals != nil && sodKinds != nil {
		policy, err = auth.LoadPolicy(auth.PolicySources{File: policyFile,
			Approvals: approvals, ApprovalsSet: strings.TrimSpace(getenv("GATEHOUSE_APPROVALS")) != "",
			SoDKinds: sodKinds, SoDKindsSet: strings.TrimSpace(getenv("GATEHOUSE_SOD_KINDS")) != ""})
		if err != nil {
			errs = append(errs, err)
		}
	}
	c := Config{
		DatabaseURL:    str("DATABASE_URL", ""),
		Addr:           str("GATEHOUSE_ADDR", "127.0.0.1:8080"),
		Workers:        integer("GATEHOUSE_WORKERS", 8, 0),
		LeaseTTL:       duration("GATEHOUSE_LEASE_TTL", 15*time.Second),
		ShutdownGrace:  duration("GATEHOUSE_SHUTDOWN_GRACE", 10*time.Second),
		BootstrapToken: getenv("GATEHOUSE_BOOTSTRAP_TOKEN"),
		AdminPassword:  getenv("GATEHOUSE_ADMIN_PASSWORD"),
		LogLevel:       strings.ToLower(str("GATEHOUSE_LOG_LEVEL", "info")),
		LogFormat:      strings.ToLower(str("GATEHOUSE_LOG_FORMAT", "text")),
		Auth: Auth{
			Approvals:   approvals,
			SoDKinds:    sodKinds,
			PolicyFile:  policyFile,
			Policy:      policy,
			ClaimTTL:    duration("GATEHOUSE_CLAIM_TTL", 30*time.Minute),
			SessionIdle: duration("GATEHOUSE_SESSION_IDLE", auth.DefaultSessionIdle),
			SessionMax:  duration("GATEHOUSE_SESSION_MAX", auth.DefaultSessionMax),
			TrustProxy:  boolean("GATEHOUSE_TRUST_PROXY", false),
		},
		LLM: LLM{
			Provider:       strings.ToLower(str("LLM_PROVIDER", "scripted")),
			ScriptFile:     str("LLM_SCRIPT_FILE", ""),
			OllamaBaseURL:  strings.TrimRight(str("OLLAMA_BASE_URL", "http://localhost:11434"), "/"),
			OllamaModel:    str("OLLAMA_MODEL_NAME", "mistral:latest"),
			OllamaTemp:     float("OLLAMA_TEMPERATURE", 0.7),
			OllamaTimeout:  seconds("OLLAMA_REQUEST_TIMEOUT", 30*time.Second),
			OllamaMaxTurns: integer("OLLAMA_MAX_TURNS", 5, 1),
			OpenAIBaseURL:  strings.TrimRight(str("OPENAI_BASE_URL", "https://api.openai.com/v1"), "/"),
			OpenAIAPIKey:   getenv("OPENAI_API_KEY"),
			OpenAIModel:    str("OPENAI_MODEL", "gpt-4o-mini"),
			OpenAITimeout:  seconds("OPENAI_REQUEST_TIMEOUT", 120*time.Second),
		},
		HistoryRetention: retention("GATEHOUSE_HISTORY_RETENTION", 0),
		OutboxRetention:  retention("GATEHOUSE_OUTBOX_RETENTION", DefaultOutboxRetention),
		Notify: Notify{
			PublicURL:           strings.TrimRight(str("GATEHOUSE_PUBLIC_URL", ""), "/"),
			SMTPURL:             str("GATEHOUSE_SMTP_URL", ""),
			SMTPFrom:            str("GATEHOUSE_SMTP_FROM", ""),
			WebhookBackoffScale: float("GATEHOUSE_WEBHOOK_BACKOFF_SCALE", 1),
			WebhookAllowPrivate: boolean("GATEHOUSE_WEBHOOK_ALLOW_PRIVATE", false),
			SlackWebhookURL:     str("GATEHOUSE_SLACK_WEBHOOK_URL", ""),
			SlackSigningSecret:  str("GATEHOUSE_SLACK_SIGNING_SECRET", ""),
		},
	}
	errs = append(errs, c.Notify.validate()...)
	var ssoErrs []error
	c.SSO, ssoErrs = loadSSO(getenv, c.Notify.PublicURL, boolean)
	errs = append(errs, ssoErrs...)
	origins, err := ParseOrigins(getenv("GATEHOUSE_CORS_ORIGINS"))
	if err != nil {
		errs = append(errs, fmt.Errorf("GATEHOUSE_CORS_ORIGINS: %w", err))
	}
	c.CORSOrigins = origins
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("GATEHOUSE_ADDR=%q: want host:port", c.Addr))
	}
	switch c.LLM.Provider {
	case "scripted":
	case "ollama":
		errs = append(errs, checkURL("OLLAMA_BASE_URL", c.LLM.OllamaBaseURL))
	case "openai":
		errs = append(errs, checkURL("OPENAI_BASE_URL", c.LLM.OpenAIBaseURL))
	default:
		errs = append(errs, fmt.Errorf("LLM_PROVIDER=%q: want scripted, ollama or openai", c.LLM.Provider))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("GATEHOUSE_LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel))
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("GATEHOUSE_LOG_FORMAT=%q: want text or json", c.LogFormat))
	}
	if c.Auth.SessionIdle > c.Auth.SessionMax {
		errs = append(errs, fmt.Errorf("GATEHOUSE_SESSION_IDLE=%s is longer than GATEHOUSE_SESSION_MAX=%s",
			c.Auth.SessionIdle, c.Auth.SessionMax))
	}
	if c.AdminPassword != "" {
		if err := auth.CheckPassword(c.AdminPassword); err != nil {
			errs = append(errs, fmt.Errorf("GATEHOUSE_ADMIN_PASSWORD %w", err))
		}
	}
	if c.BootstrapToken != "" && len(c.BootstrapToken) < 16 {
		errs = append(errs, errors.New("GATEHOUSE_BOOTSTRAP_TOKEN: want at least 16 characters"))
	}
	return c, errors.Join(errs...)
}

// checkURL checks a server address setting: an http or https URL with a host.
func checkURL(name, v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s=%q: want an http:// or https:// URL", name, v)
	}
	return nil
}

// validate checks the notification settings as a whole.
func (n *Notify) validate() []error {
	var errs []error
	if n.PublicURL != "" {
		errs = append(errs, checkURL("GATEHOUSE_PUBLIC_URL", n.PublicURL))
		if u, err := url.Parse(n.PublicURL); err == nil && (u.RawQuery != "" || u.Fragment != "") {
			errs = append(errs, fmt.Errorf("GATEHOUSE_PUBLIC_URL=%q: want a base URL without ? or #", n.PublicURL))
		}
	}
	if n.SMTPURL != "" {
		if _, err := ParseSMTPURL(n.SMTPURL); err != nil {
			errs = append(errs, err)
		}
		if n.PublicURL == "" {
			errs = append(errs, errors.New("GATEHOUSE_SMTP_URL is set but GATEHOUSE_PUBLIC_URL is not: emails need it for their links"))
		}
		if n.SMTPFrom == "" && n.PublicURL != "" {
			if u, err := url.Parse(n.PublicURL); err == nil && u.Hostname() != "" {
				n.SMTPFrom = "Gatehouse <gatehouse@" + u.Hostname() + ">"
			}
		}
		if n.SMTPFrom != "" {
			if _, err := mail.ParseAddress(n.SMTPFrom); err != nil {
				errs = append(errs, fmt.Errorf("GATEHOUSE_SMTP_FROM=%q: want an address such as Gatehouse <gatehouse@example.com>", n.SMTPFrom))
			}
		}
	}
	if n.SlackWebhookURL != "" {
		errs = append(errs, checkURL("GATEHOUSE_SLACK_WEBHOOK_URL", n.SlackWebhookURL))
		if n.PublicURL == "" {
			errs = append(errs, errors.New("GATEHOUSE_SLACK_WEBHOOK_URL is set but GATEHOUSE_PUBLIC_URL is not: Slack messages need it for their links"))
		}
		if n.SlackSigningSecret == "" {
			errs = append(errs, errors.New("GATEHOUSE_SLACK_WEBHOOK_URL is set but GATEHOUSE_SLACK_SIGNING_SECRET is not: the Approve button's callbacks could not be verified"))
		}
	}
	if n.WebhookBackoffScale <= 0 || n.WebhookBackoffScale > 1000 {
		errs = append(errs, fmt.Errorf("GATEHOUSE_WEBHOOK_BACKOFF_SCALE=%v: want a number above 0 and at most 1000", n.WebhookBackoffScale))
	}
	return errs
}

// SMTP is a parsed GATEHOUSE_SMTP_URL.
type SMTP struct {
	Host     string
	Port     int
	Username string
	Password string
	// TLS: smtps (TLS from the first byte); otherwise STARTTLS when the
	// server offers it.
	TLS bool
}

// ParseSMTPURL reads smtp://user:pass@host:port or smtps://…; the port
// defaults to 587 (smtp) or 465 (smtps).
func ParseSMTPURL(raw string) (SMTP, error) {
	bad := func(why string) (SMTP, error) {
		return SMTP{}, fmt.Errorf("GATEHOUSE_SMTP_URL: %s (want smtp://user:pass@host:port or smtps://user:pass@host:port)", why)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("not a URL")
	}
	var s SMTP
	switch u.Scheme {
	case "smtp":
		s.Port = 587
	case "smtps":
		s.Port, s.TLS = 465, true
	default:
		return bad(fmt.Sprintf("scheme %q", u.Scheme))
	}
	if s.Host = u.Hostname(); s.Host == "" {
		return bad("no host")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return bad(fmt.Sprintf("port %q", p))
		}
		s.Port = n
	}
	if u.User != nil {
		s.Username = u.User.Username()
		s.Password, _ = u.User.Password()
	}
	return s, nil
}

// ParseOrigins reads a comma-separated list of exact browser origins
// (scheme://host[:port], no path, no "*").
func ParseOrigins(v string) ([]string, error) {
	var out []string
	for _, o := range strings.Split(v, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if o == "*" {
			return nil, errors.New(`"*" is not allowed: list the exact origins (scheme://host[:port])`)
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") ||
			u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("%q: want an origin such as https://dev.agentinbox.ai (scheme://host[:port], no path)", o)
		}
		out = append(out, u.Scheme+"://"+u.Host)
	}
	return out, nil
}
