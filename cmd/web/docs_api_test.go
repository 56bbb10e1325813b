package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// shBlock is a fenced block of shell in a Markdown document.
var shBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")

// TestDocsAPIRunsVerbatim (issue 27, item 10): docs/api.md's sh blocks,
// taken as they are and run top to bottom in one shell (bash -eu -o
// pipefail: a variable used before it is set fails it), against a fresh
// server as `make run` starts it. Only the address changes (the server
// listens on a free port); bin/gatehouse is the binary built for the
// tests and scripts/pg.sh prints the fresh database's URL, as the real
// one prints its cluster's. Every request succeeds (no error object in
// what the blocks print) but the one the doc shows refused, and what the
// doc says happens shows in the output.
func TestDocsAPIRunsVerbatim(t *testing.T) {
	d, p := docServer(t)
	text := runDocBlocks(t, "api.md", d, p)
	if strings.Contains(text, `"error":`) {
		t.Error("a request of docs/api.md was refused (an error object in the output)")
	}
	for _, want := range []string{
		"token my-script (approver",                       // the token
		`"waiting_on": "prd"`,                             // the task stops at its first gate
		"Add a requirement for exports over 10,000 rows.", // the rejection, in the audit trail
		`"edit"`, // the edited plan
		"Separation of duties: token:my-script started this", // the refused merge
		"app.log",             // the analyst read the attached file
		`"kind": "question"`,  // the pending interrupts
		`"forked_from"`,       // the fork
		`"decision.recorded"`, // the audit trail
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if !regexp.MustCompile(`(?m)^"(running|queued)"$`).MatchString(text) {
		t.Error("no decision answered with the task running on")
	}
	if n := d.int(`SELECT count(*) FROM decisions`); n != 4 {
		t.Errorf("%d decisions recorded, want 4 (reject, approve, edit, respond)", n)
	}
	if n := d.int(`SELECT count(*) FROM tasks WHERE status = 'cancelled'`); n != 1 {
		t.Errorf("%d tasks cancelled, want 1", n)
	}
}

// docServer skips without the tools the docs use (fails under
// GATEHOUSE_TEST_STRICT) and starts a fresh server as `make run` would.
func docServer(t *testing.T) (*db, *proc) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a docs walk against a server (-short)")
	}
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("GATEHOUSE_TEST_STRICT") != "" {
				t.Fatalf("%s is needed: %v", tool, err)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	t.Parallel()
	d := newDB(t)
	return d, serve(t, d.url)
}

// runDocBlocks runs docs/<name>'s sh blocks as they are, top to bottom in
// one shell (bash -eu -o pipefail: a variable used before it is set fails
// it), against p: only the address changes (the server listens on a free
// port); bin/gatehouse is the binary built for the tests and scripts/pg.sh
// prints d's URL, as the real one prints its cluster's. It returns what
// the blocks print; a block that fails fails the test.
func runDocBlocks(t *testing.T, name string, d *db, p *proc) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	for _, m := range shBlock.FindAllStringSubmatch(string(doc), -1) {
		script.WriteString(m[1] + "\n")
	}
	if !strings.Contains(script.String(), "http://127.0.0.1:8080") {
		t.Fatalf("docs/%s no longer names the server make run starts (http://127.0.0.1:8080)", name)
	}
	dir := t.TempDir()
	for _, sub := range []string{"bin", "scripts"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(binary, filepath.Join(dir, "bin", "gatehouse")); err != nil {
		t.Fatal(err)
	}
	pgsh := "#!/bin/bash\n[ \"$1\" = url ] || exit 2\necho '" + d.url + "'\n"
	if err := os.WriteFile(filepath.Join(dir, "scripts", "pg.sh"), []byte(pgsh), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-eu", "-o", "pipefail", "-c",
		strings.ReplaceAll(script.String(), "127.0.0.1:8080", p.Addr))
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "GATEHOUSE") && !strings.HasPrefix(kv, "TOKEN=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	t.Logf("docs/%s's blocks said:\n%s", name, out)
	if err != nil {
		t.Fatalf("docs/%s's blocks stopped: %v", name, err)
	}
	return string(out)
}

// TestDocsRequestsRunsVerbatim: docs/requests.md's sh blocks run as they
// are, while a person (here the bootstrap token) approves the tool call
// the first block asks about: its long poll prints the decision, and the
// typed question of the second block is created.
func TestDocsRequestsRunsVerbatim(t *testing.T) {
	d, p := docServer(t)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			var list struct {
				Requests []requestJSON `json:"requests"`
			}
			if p.do("GET", "/api/v1/requests?kind=tool_call&status=pending", nil, &list) != 200 || len(list.Requests) == 0 {
				continue
			}
			r := list.Requests[0]
			if p.do("POST", "/api/v1/tasks/"+r.TaskID+"/decisions", map[string]any{"interrupt_id": r.InterruptID, "action": "approve"}, nil) == 202 {
				return
			}
		}
	}()
	text := runDocBlocks(t, "requests.md", d, p)
	for _, want := range []string{
		"token agent (operator",       // the token
		"Decide it on the desk: http", // the request's page
		`"status": "approved"`,        // the long poll's answer
		`"by": "bootstrap"`,
		`"kind":"question"`, // the typed question
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if strings.Contains(text, `"error":`) {
		t.Error("a request of docs/requests.md was refused (an error object in the output)")
	}
}
