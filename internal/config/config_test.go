package config

import (
	"strings"
	"testing"
	"time"
)

func TestLLMSettings(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string) (Config, error) { return Load(func(k string) string { return env[k] }) }
	c, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	l := c.LLM
	if l.Provider != "scripted" || l.OllamaBaseURL != "http://localhost:11434" || l.OllamaModel != "mistral:latest" ||
		l.OllamaTemp != 0.7 || l.OllamaTimeout != 30*time.Second || l.OllamaMaxTurns != 5 ||
		l.OpenAIBaseURL != "https://api.openai.com/v1" || l.OpenAIModel != "gpt-4o-mini" || l.OpenAITimeout != 120*time.Second {
		t.Errorf("defaults: %+v", l)
	}
	c, err = load(map[string]string{"LLM_PROVIDER": "OpenAI", "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1/",
		"OPENAI_REQUEST_TIMEOUT": "45", "OLLAMA_REQUEST_TIMEOUT": "1m"})
	if err != nil {
		t.Fatal(err)
	}
	if c.LLM.Provider != "openai" || c.LLM.OpenAIBaseURL != "http://127.0.0.1:8000/v1" || c.LLM.OpenAITimeout != 45*time.Second ||
		c.LLM.OllamaTimeout != time.Minute {
		t.Errorf("settings: %+v", c.LLM)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"LLM_PROVIDER": "ollama", "OLLAMA_BASE_URL": "localhost:11434"}, "OLLAMA_BASE_URL"},
		{map[string]string{"LLM_PROVIDER": "openai", "OPENAI_BASE_URL": "api.openai.com"}, "OPENAI_BASE_URL"},
		{map[string]string{"OPENAI_REQUEST_TIMEOUT": "-1"}, "OPENAI_REQUEST_TIMEOUT"},
		{map[string]string{"OLLAMA_TEMPERATURE": "warm"}, "OLLAMA_TEMPERATURE"},
		{map[string]string{"LLM_PROVIDER": "claude"}, "LLM_PROVIDER"},
	} {
		if _, err := load(tc.env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %s", tc.env, err, tc.want)
		}
	}
	// A base URL is only checked for the provider in use.
	if _, err := load(map[string]string{"OLLAMA_BASE_URL": "nonsense"}); err != nil {
		t.Errorf("scripted with an unused bad OLLAMA_BASE_URL: %v", err)
	}
}

func TestAuthSettings(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string) (Config, error) { return Load(func(k string) string { return env[k] }) }
	c, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := c.Auth
	if len(a.Approvals) != 0 || strings.Join(a.SoDKinds, ",") != "merge" || a.SessionIdle != 12*time.Hour ||
		a.SessionMax != 168*time.Hour || a.TrustProxy {
		t.Errorf("defaults: %+v", a)
	}
	c, err = load(map[string]string{"GATEHOUSE_APPROVALS": "merge=2,prd=3", "GATEHOUSE_SOD_KINDS": "none",
		"GATEHOUSE_SESSION_IDLE": "30m", "GATEHOUSE_SESSION_MAX": "8h", "GATEHOUSE_TRUST_PROXY": "true",
		"GATEHOUSE_ADMIN_PASSWORD": "long enough"})
	if err != nil {
		t.Fatal(err)
	}
	a = c.Auth
	if a.Approvals["merge"] != 2 || a.Approvals["prd"] != 3 || len(a.SoDKinds) != 0 || a.SessionIdle != 30*time.Minute ||
		a.SessionMax != 8*time.Hour || !a.TrustProxy {
		t.Errorf("settings: %+v", a)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"GATEHOUSE_APPROVALS": "merge=zero"}, "GATEHOUSE_APPROVALS"},
		{map[string]string{"GATEHOUSE_SOD_KINDS": "merge,9"}, "GATEHOUSE_SOD_KINDS"},
		{map[string]string{"GATEHOUSE_SESSION_IDLE": "9h", "GATEHOUSE_SESSION_MAX": "8h"}, "GATEHOUSE_SESSION_IDLE"},
		{map[string]string{"GATEHOUSE_TRUST_PROXY": "maybe"}, "GATEHOUSE_TRUST_PROXY"},
		{map[string]string{"GATEHOUSE_ADMIN_PASSWORD": "short"}, "GATEHOUSE_ADMIN_PASSWORD"},
	} {
		if _, err := load(tc.env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %s", tc.env, err, tc.want)
		}
	}
}

func TestOutboxRetention(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string) (Config, error) { return Load(func(k string) string { return env[k] }) }
	for v, want := range map[string]time.Duration{"": 720 * time.Hour, "0": 0, "0s": 0, "2160h": 2160 * time.Hour, " 90m ": 90 * time.Minute} {
		c, err := load(map[string]string{"GATEHOUSE_OUTBOX_RETENTION": v})
		if err != nil || c.OutboxRetention != want {
			t.Errorf("GATEHOUSE_OUTBOX_RETENTION=%q: %v %v, want %v", v, c.OutboxRetention, err, want)
		}
	}
	for _, v := range []string{"30d", "720", "-1h", "forever"} {
		_, err := load(map[string]string{"GATEHOUSE_OUTBOX_RETENTION": v})
		if err == nil || !strings.Contains(err.Error(), "GATEHOUSE_OUTBOX_RETENTION") || !strings.Contains(err.Error(), "720h") {
			t.Errorf("GATEHOUSE_OUTBOX_RETENTION=%q: error %v, want one naming the variable and an example", v, err)
		}
	}
}

func TestHistoryRetention(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string) (Config, error) { return Load(func(k string) string { return env[k] }) }
	for v, want := range map[string]time.Duration{"": 0, "0": 0, "0s": 0, "720h": 720 * time.Hour, " 90m ": 90 * time.Minute} {
		c, err := load(map[string]string{"GATEHOUSE_HISTORY_RETENTION": v})
		if err != nil || c.HistoryRetention != want {
			t.Errorf("GATEHOUSE_HISTORY_RETENTION=%q: %v %v, want %v", v, c.HistoryRetention, err, want)
		}
	}
	for _, v := range []string{"30d", "720", "-1h", "forever"} {
		_, err := load(map[string]string{"GATEHOUSE_HISTORY_RETENTION": v})
		if err == nil || !strings.Contains(err.Error(), "GATEHOUSE_HISTORY_RETENTION") || !strings.Contains(err.Error(), "720h") {
			t.Errorf("GATEHOUSE_HISTORY_RETENTION=%q: error %v, want one naming the variable and an example", v, err)
		}
	}
}

func TestSSOSettings(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string) (Config, error) { return Load(func(k string) string { return env[k] }) }
	full := func(edit map[string]string) map[string]string {
		env := map[string]string{"GATEHOUSE_OIDC_ISSUER": "https://idp.example.com/realms/corp",
			"GATEHOUSE_OIDC_CLIENT_ID": "gatehouse", "GATEHOUSE_OIDC_CLIENT_SECRET": "secret",
			"GATEHOUSE_OIDC_ROLE_MAP": "idp-admins=admin,staff=viewer", "GATEHOUSE_PUBLIC_URL": "https://gatehouse.example.com/"}
		for k, v := range edit {
			if v == "" {
				delete(env, k)
			} else {
				env[k] = v
			}
		}
		return env
	}
	c, err := load(nil)
	if err != nil || c.SSO.Enabled || !c.SSO.LocalLogin {
		t.Fatalf("defaults: %+v, %v", c.SSO, err)
	}
	c, err = load(full(map[string]string{"GATEHOUSE_OIDC_SCOPES": "openid profile email groups", "GATEHOUSE_LOCAL_LOGIN": "false",
		"GATEHOUSE_BREAK_GLASS_USER": "KeyHolder"}))
	if err != nil {
		t.Fatal(err)
	}
	s := c.SSO
	if !s.Enabled || s.RedirectURL != "https://gatehouse.example.com/auth/oidc/callback" || s.Name != "SSO" ||
		s.GroupsClaim != "groups" || s.RoleMap.String() != "idp-admins=admin,staff=viewer" || s.LocalLogin ||
		s.BreakGlassUser != "keyholder" || strings.Join(s.Scopes, " ") != "profile email groups" {
		t.Fatalf("settings: %+v", s)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{full(map[string]string{"GATEHOUSE_OIDC_CLIENT_SECRET": ""}), "GATEHOUSE_OIDC_CLIENT_SECRET is not set"},
		{full(map[string]string{"GATEHOUSE_OIDC_ISSUER": ""}), "GATEHOUSE_OIDC_ISSUER is not set"},
		{full(map[string]string{"GATEHOUSE_OIDC_CLIENT_ID": ""}), "GATEHOUSE_OIDC_CLIENT_ID is not set"},
		{full(map[string]string{"GATEHOUSE_OIDC_ROLE_MAP": ""}), "GATEHOUSE_OIDC_ROLE_MAP is not set"},
		{full(map[string]string{"GATEHOUSE_PUBLIC_URL": ""}), "GATEHOUSE_PUBLIC_URL is not set"},
		{full(map[string]string{"GATEHOUSE_OIDC_ROLE_MAP": "staff=owner"}), "GATEHOUSE_OIDC_ROLE_MAP: \"staff=owner\": unknown role"},
		{full(map[string]string{"GATEHOUSE_OIDC_ISSUER": "http://idp.example.com"}), "GATEHOUSE_OIDC_ISSUER=\"http://idp.example.com\": want https://"},
		{full(map[string]string{"GATEHOUSE_PUBLIC_URL": "http://gatehouse.example.com"}), "GATEHOUSE_PUBLIC_URL=\"http://gatehouse.example.com\": want https://"},
		{map[string]string{"GATEHOUSE_LOCAL_LOGIN": "false"}, "GATEHOUSE_LOCAL_LOGIN=false needs single sign-on"},
		{map[string]string{"GATEHOUSE_LOCAL_LOGIN": "nope"}, "GATEHOUSE_LOCAL_LOGIN=\"nope\": want true or false"},
		{full(map[string]string{"GATEHOUSE_BREAK_GLASS_USER": "bad name"}), "GATEHOUSE_BREAK_GLASS_USER=\"bad name\""},
	} {
		if _, err := load(tc.env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.env, err, tc.want)
		}
	}
	// Loopback http is fine for a provider and a desk on this machine.
	if _, err := load(full(map[string]string{"GATEHOUSE_OIDC_ISSUER": "http://127.0.0.1:5556/dex",
		"GATEHOUSE_PUBLIC_URL": "http://localhost:8080"})); err != nil {
		t.Fatal(err)
	}
}
