package main

import (
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/notify/notifytest"
)

// TestE2EEmailActionLink: `gatehouse serve` with GATEHOUSE_SMTP_URL mails
// the PRD to the approver with an email address (a real SMTP server on
// loopback); the link's page changes nothing; its POST approves as her,
// and the task moves on.
func TestE2EEmailActionLink(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	smtp := notifytest.NewSMTPServer(t)
	add := exec.Command(binary, "users", "add", "alice", "--role", "approver", "--email", "alice@example.com")
	add.Env = append(os.Environ(), "DATABASE_URL="+d.url)
	add.Stdin = strings.NewReader("alice-password\n")
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("users add: %v %s", err, out)
	}
	p := serve(t, d.url, "GATEHOUSE_PUBLIC_URL=http://gatehouse.test",
		"GATEHOUSE_SMTP_URL=smtp://127.0.0.1:"+strconv.Itoa(smtp.Port), "GATEHOUSE_SMTP_FROM=Gatehouse <gh@example.com>")
	id := p.createFeature(map[string]any{"gates": map[string]any{"allowPrd": false, "allowPlan": true, "allowMerge": true}}, "mail me")
	m := smtp.Wait(t, 1, 30*time.Second)[0]
	if len(m.To) != 1 || m.To[0] != "alice@example.com" || !strings.Contains(m.Header.Get("Subject"), "PRD waits for your decision") {
		t.Fatalf("message to %v: %q", m.To, m.Header.Get("Subject"))
	}
	link := regexp.MustCompile(`http://gatehouse\.test(/act/[A-Za-z0-9_-]{43})`).FindStringSubmatch(m.Text)
	if link == nil {
		t.Fatalf("no action link in:\n%s", m.Text)
	}
	resp, err := http.Get(p.url(link[1]))
	if err != nil {
		t.Fatal(err)
	}
	page := new(strings.Builder)
	_, _ = ioCopyAll(page, resp)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("GET link: %d", resp.StatusCode)
	}
	var tk taskJSON
	p.do("GET", "/api/v1/tasks/"+id, nil, &tk)
	if tk.PendingInterrupt == nil || tk.PendingInterrupt.Kind != "prd" {
		t.Fatalf("after GET: %+v", tk)
	}
	key := regexp.MustCompile(`name="_act" value="([^"]+)"`).FindStringSubmatch(page.String())[1]
	req, _ := http.NewRequest(http.MethodPost, p.url(link[1]), strings.NewReader(url.Values{"action": {"approve"}, "_act": {key}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+p.Addr)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST link: %d", resp.StatusCode)
	}
	d.waitAll(30 * time.Second)
	if n := d.int("SELECT count(*) FROM decisions WHERE decided_by = 'alice' AND action = 'approve'"); n != 1 {
		t.Fatalf("%d decisions by alice", n)
	}
	if strings.Contains(p.Logs(), link[1]) {
		t.Error("the token is in the server's log")
	}
}

func ioCopyAll(w *strings.Builder, resp *http.Response) (int, error) {
	defer resp.Body.Close()
	buf := make([]byte, 32<<10)
	n := 0
	for {
		k, err := resp.Body.Read(buf)
		w.Write(buf[:k])
		n += k
		if err != nil {
			return n, nil
		}
	}
}
