package config

import (
	"strings"
	"testing"
)

func TestNotifySettings(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string) (Config, error) { return Load(func(k string) string { return env[k] }) }
	c, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Notify; n.SMTPURL != "" || n.PublicURL != "" || n.WebhookBackoffScale != 1 || n.WebhookAllowPrivate {
		t.Errorf("defaults: %+v", n)
	}
	c, err = load(map[string]string{"GATEHOUSE_PUBLIC_URL": "https://gh.example.com/", "GATEHOUSE_SMTP_URL": "smtp://u:p%40ss@mail.example.com",
		"GATEHOUSE_WEBHOOK_BACKOFF_SCALE": "0.001", "GATEHOUSE_WEBHOOK_ALLOW_PRIVATE": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Notify; n.PublicURL != "https://gh.example.com" || n.SMTPFrom != "Gatehouse <gatehouse@gh.example.com>" ||
		n.WebhookBackoffScale != 0.001 || !n.WebhookAllowPrivate {
		t.Errorf("settings: %+v", n)
	}
	s, err := ParseSMTPURL(c.Notify.SMTPURL)
	if err != nil || s.Host != "mail.example.com" || s.Port != 587 || s.Username != "u" || s.Password != "p@ss" || s.TLS {
		t.Errorf("smtp: %+v %v", s, err)
	}
	if s, err := ParseSMTPURL("smtps://mail.example.com"); err != nil || s.Port != 465 || !s.TLS {
		t.Errorf("smtps: %+v %v", s, err)
	}
	pub := "https://gh.example.com"
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"GATEHOUSE_SMTP_URL": "smtp://mail.example.com"}, "GATEHOUSE_PUBLIC_URL is not"},
		{map[string]string{"GATEHOUSE_SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/x", "GATEHOUSE_SLACK_SIGNING_SECRET": "s"}, "GATEHOUSE_PUBLIC_URL is not"},
		{map[string]string{"GATEHOUSE_SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/x", "GATEHOUSE_PUBLIC_URL": pub}, "GATEHOUSE_SLACK_SIGNING_SECRET"},
		{map[string]string{"GATEHOUSE_SMTP_URL": "http://mail.example.com", "GATEHOUSE_PUBLIC_URL": pub}, "GATEHOUSE_SMTP_URL: scheme"},
		{map[string]string{"GATEHOUSE_SMTP_URL": "smtp://", "GATEHOUSE_PUBLIC_URL": pub}, "GATEHOUSE_SMTP_URL: no host"},
		{map[string]string{"GATEHOUSE_SMTP_URL": "smtp://h:99999", "GATEHOUSE_PUBLIC_URL": pub}, "GATEHOUSE_SMTP_URL: port"},
		{map[string]string{"GATEHOUSE_SMTP_URL": "::bad", "GATEHOUSE_PUBLIC_URL": pub}, "GATEHOUSE_SMTP_URL"},
		{map[string]string{"GATEHOUSE_SMTP_URL": "smtp://h", "GATEHOUSE_PUBLIC_URL": pub, "GATEHOUSE_SMTP_FROM": "not an address"}, "GATEHOUSE_SMTP_FROM"},
		{map[string]string{"GATEHOUSE_PUBLIC_URL": "gh.example.com"}, "GATEHOUSE_PUBLIC_URL"},
		{map[string]string{"GATEHOUSE_WEBHOOK_BACKOFF_SCALE": "0"}, "GATEHOUSE_WEBHOOK_BACKOFF_SCALE"},
		{map[string]string{"GATEHOUSE_WEBHOOK_ALLOW_PRIVATE": "maybe"}, "GATEHOUSE_WEBHOOK_ALLOW_PRIVATE"},
	} {
		if _, err := load(tc.env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %s", tc.env, err, tc.want)
		}
	}
	// The password never shows in an error.
	if _, err := load(map[string]string{"GATEHOUSE_SMTP_URL": "ftp://u:hunter2@h", "GATEHOUSE_PUBLIC_URL": pub}); err == nil ||
		strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %v", err)
	}
}
