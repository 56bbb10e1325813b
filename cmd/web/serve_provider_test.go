package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeRefusesBadLLMSettings: settings that cannot work stop start-up
// with exit status 2 and one line naming the setting, before any
// connection to the database is tried.
func TestServeRefusesBadLLMSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	if err := os.WriteFile(script, []byte("{\"roles\": {\n  \"slogan.reviewer\": [\"Too vague.\",]\n}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"MalformedScript", map[string]string{"LLM_SCRIPT_FILE": script}, []string{"LLM_SCRIPT_FILE", "script.json:2:", "]"}},
		{"MissingScript", map[string]string{"LLM_SCRIPT_FILE": filepath.Join(dir, "nope.json")}, []string{"LLM_SCRIPT_FILE", "nope.json"}},
		{"UnknownProvider", map[string]string{"LLM_PROVIDER": "gpt"}, []string{"LLM_PROVIDER"}},
		{"OllamaBadURL", map[string]string{"LLM_PROVIDER": "ollama", "OLLAMA_BASE_URL": "localhost:11434"}, []string{"OLLAMA_BASE_URL"}},
		{"OllamaBadTimeout", map[string]string{"LLM_PROVIDER": "ollama", "OLLAMA_REQUEST_TIMEOUT": "soon"}, []string{"OLLAMA_REQUEST_TIMEOUT"}},
		{"OpenAIBadURL", map[string]string{"LLM_PROVIDER": "openai", "OPENAI_BASE_URL": "ftp://example.com"}, []string{"OPENAI_BASE_URL"}},
		{"SSOWithoutSecret", map[string]string{"GATEHOUSE_OIDC_ISSUER": "https://idp.example.com", "GATEHOUSE_OIDC_CLIENT_ID": "gh",
			"GATEHOUSE_OIDC_ROLE_MAP": "staff=viewer", "GATEHOUSE_PUBLIC_URL": "https://gatehouse.example.com"},
			[]string{"GATEHOUSE_OIDC_CLIENT_SECRET is not set"}},
		{"SSOWithoutPublicURL", map[string]string{"GATEHOUSE_OIDC_ISSUER": "https://idp.example.com", "GATEHOUSE_OIDC_CLIENT_ID": "gh",
			"GATEHOUSE_OIDC_CLIENT_SECRET": "s", "GATEHOUSE_OIDC_ROLE_MAP": "staff=viewer"}, []string{"GATEHOUSE_PUBLIC_URL is not set"}},
		{"LocalLoginOffWithoutSSO", map[string]string{"GATEHOUSE_LOCAL_LOGIN": "false"}, []string{"GATEHOUSE_LOCAL_LOGIN=false needs single sign-on"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/none"}
			for k, v := range tc.env {
				env[k] = v
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"serve"}, func(k string) string { return env[k] },
				strings.NewReader(""), &stdout, &stderr)
			msg := stderr.String()
			if code != 2 || strings.Count(msg, "\n") != 1 {
				t.Fatalf("exit %d, stderr %q; want 2 and one line", code, msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("stderr %q does not contain %q", msg, w)
				}
			}
		})
	}
}
