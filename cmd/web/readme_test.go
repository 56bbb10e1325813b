package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestReadmeFirstCommandFromAFreshClone does what the README tells a
// newcomer: in a fresh clone, its first command (make run), then sign in
// with the password the log prints, then the log's own advice — the
// command it names changes the password, and the new one signs in.
// servingRe finds the address in the line a server logs once it listens.
var servingRe = regexp.MustCompile(`msg="gatehouse serving" addr=(\S+)`)

func TestReadmeFirstCommandFromAFreshClone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a fresh clone (-short)")
	}
	t.Parallel()
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		if os.Getenv("GATEHOUSE_TEST_STRICT") != "" {
			t.Fatalf("not in a git checkout (GATEHOUSE_TEST_STRICT is set: CI runs in a clone): %v", err)
		}
		t.Skip("not in a git checkout: nothing to clone")
	}
	readme, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(root)), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	first := firstCommand(t, string(readme))
	if first != "make run" {
		t.Fatalf("the README's first command is %q; this test knows how to follow make run", first)
	}

	dir := filepath.Join(t.TempDir(), "gatehouse")
	if out, err := exec.Command("git", "clone", "--quiet", strings.TrimSpace(string(root)), dir).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		// The clone's private cluster: stopped, its data removed with the clone
		// (or its /tmp fallback, which pg.sh names after the clone's path).
		out, _ := exec.Command("bash", filepath.Join(dir, "scripts/pg.sh"), "stop").CombinedOutput()
		t.Logf("pg.sh stop: %s", bytes.TrimSpace(out))
	})

	cmd := exec.Command("bash", "-c", first)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "GATEHOUSE_") {
			env = append(env, kv)
		}
	}
	// Another server may hold the default port on a shared machine.
	cmd.Env = append(env, "GATEHOUSE_ADDR=127.0.0.1:0")
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs bytes.Buffer
	serving := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := servingRe.FindStringSubmatch(sc.Text()); m != nil {
				serving <- m[1]
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	logText := func() string { mu.Lock(); defer mu.Unlock(); return logs.String() }
	var addr string
	select {
	case addr = <-serving:
	case err := <-exited:
		t.Fatalf("make run ended before serving: %v\n%s", err, logText())
	case <-time.After(5 * time.Minute):
		t.Fatalf("make run did not serve within 5 minutes\n%s", logText())
	}
	base := "http://" + addr
	password, advice := adminPassword(t, logText())
	if !strings.Contains(advice, "bin/gatehouse users passwd admin") {
		t.Errorf("the log's command %q is not the binary make run built", advice)
	}
	if !signsIn(t, base, "admin", password) {
		t.Fatalf("cannot sign in with the password the log printed")
	}

	// The log's advice, pasted into a shell in the clone.
	pw := exec.Command("bash", "-c", advice)
	pw.Dir = dir
	pw.Env = env // a shell of the user's: no DATABASE_URL of its own
	pw.Stdin = strings.NewReader("my-own-password-1\n")
	if out, err := pw.CombinedOutput(); err != nil {
		t.Fatalf("the log's command %q: %v\n%s", advice, err, out)
	}
	if signsIn(t, base, "admin", password) {
		t.Error("the old password still signs in")
	}
	if !signsIn(t, base, "admin", "my-own-password-1") {
		t.Error("the new password does not sign in")
	}
}

// firstCommand is the first command line of the README's first shell
// block, without its comment.
func firstCommand(t *testing.T, readme string) string {
	t.Helper()
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("the README has no shell block")
	}
	line, _, _ := strings.Cut(m[1], "\n")
	line, _, _ = strings.Cut(line, "#")
	return strings.TrimSpace(line)
}

var csrfRe = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// signsIn signs in through the login form as a browser would and reports
// whether the desk then opens.
func signsIn(t *testing.T, base, user, password string) bool {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	ctx := context.Background()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/login", nil)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	_, _ = page.ReadFrom(res.Body)
	res.Body.Close()
	m := csrfRe.FindStringSubmatch(page.String())
	if m == nil {
		t.Fatalf("login page without its form token:\n%s", page.String())
	}
	form := url.Values{"username": {user}, "password": {password}, "_csrf": {m[1]}, "next": {"/"}}
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		return false
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/", nil)
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}
