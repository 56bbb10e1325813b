// Package servetest runs Gatehouse for tests: the real `gatehouse serve`
// binary for tests that drive it from outside, as the official SDK tests
// (LangGraph, MCP) and the examples do, and a Replica in process (store,
// engine, hub, runner on a fresh database) for tests that build their
// server over it. It is test support: only tests import it, and it
// imports none of the HTTP packages (internal/web and below), so that
// their own tests may use it.
package servetest

import (
	"bufio"
	"fmt"
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

// Build compiles the binary (cmd/web, given relative to the test's
// package directory) into a temporary directory and returns its path.
func Build(t *testing.T, cmdDir string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gatehouse")
	build := exec.Command("go", "build", "-o", bin, cmdDir)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// servingLine is the line a process logs once it listens: its address,
// and the replica's name when the line says it.
var servingLine = regexp.MustCompile(`msg="gatehouse serving" addr=(\S+)(?: .*replica=(\S+))?`)

// Process is one running program of this module that serves like
// `gatehouse serve` (the binary, or an example built on the root
// package), started with Start.
type Process struct {
	// Cmd is the process; Addr ("127.0.0.1:port") and Replica are what
	// its serving line said.
	Cmd     *exec.Cmd
	Addr    string
	Replica string
	// Exited is closed once the process exited and its log was read
	// whole; Err is then its exit error.
	Exited <-chan struct{}

	exited chan struct{}
	err    error
	mu     sync.Mutex
	logs   strings.Builder
}

// Start runs bin with args in dir ("": the test's directory) and env added
// to the test's environment, and waits up to 60 s until it logs that it
// serves. At cleanup a process still running is killed, and its log is
// shown when the test failed.
func Start(t *testing.T, bin, dir string, args []string, env ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	p := &Process{Cmd: cmd, exited: make(chan struct{})}
	p.Exited = p.exited
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			if p.Addr == "" {
				if m := servingLine.FindStringSubmatch(line); m != nil {
					p.Addr, p.Replica = m[1], m[2]
					close(ready)
				}
			}
			p.mu.Unlock()
		}
	}()
	// Wait closes the pipe: only after the last lines were read (the log
	// of a shutdown was sometimes lost).
	go func() { <-drained; p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("log of %s %s:\n%s", filepath.Base(bin), p.Replica, p.Logs())
		}
	})
	select {
	case <-ready:
	case <-p.exited:
		t.Fatalf("%s exited before serving: %v\n%s", filepath.Base(bin), p.err, p.Logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not serve within 60 s\n%s", filepath.Base(bin), p.Logs())
	}
	return p
}

// URL is the process's base URL ("http://127.0.0.1:port").
func (p *Process) URL() string { return "http://" + p.Addr }

// Logs is what the process logged so far.
func (p *Process) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// Err is the process's exit error, once Exited is closed.
func (p *Process) Err() error {
	<-p.exited
	return p.err
}

// Stop sends SIGTERM and waits up to within for the process to exit; its
// exit error, or an error saying it did not exit.
func (p *Process) Stop(within time.Duration) error {
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.exited:
		return p.err
	case <-time.After(within):
		return fmt.Errorf("still running %s after SIGTERM", within)
	}
}

// Serve starts `bin serve` with env added to the test's environment
// (GATEHOUSE_ADDR=127.0.0.1:0 among them, for a free port) and returns its
// base URL once it serves; the process is stopped with SIGTERM at cleanup,
// and its log is shown when the test failed.
func Serve(t *testing.T, bin string, env ...string) string {
	t.Helper()
	p := Start(t, bin, "", []string{"serve"}, env...)
	t.Cleanup(func() {
		if err := p.Stop(20 * time.Second); err != nil {
			t.Logf("stopping %s: %v", bin, err)
		}
	})
	return p.URL()
}

// Node returns the path of node and the absolute path of the npm project
// dir (relative to the test's package), running npm ci there when
// node_modules/<pkg> is missing. Without node the test is skipped, or
// fails under GATEHOUSE_TEST_STRICT (CI installs node); what names the SDK
// the test drives, for the skip message.
func Node(t *testing.T, dir, pkg, what string) (node, abs string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil && os.Getenv("GATEHOUSE_TEST_STRICT") != "" {
		t.Fatalf("node is not installed (GATEHOUSE_TEST_STRICT is set: .ci/run installs it): %v", err)
	}
	if err != nil {
		t.Skipf("node is not installed: this test drives gatehouse with %s (apt-get install nodejs npm; .ci/run does)", what)
	}
	abs, err = filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(abs, "node_modules", pkg)); err != nil {
		npm, lerr := exec.LookPath("npm")
		if lerr != nil {
			t.Fatalf("%s/node_modules is missing and npm is not installed: run npm ci there", dir)
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = abs
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	return node, abs
}
