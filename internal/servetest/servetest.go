// Package servetest runs the real `gatehouse serve` binary for tests that
// drive it from outside, as the official SDK tests (LangGraph, MCP) do.
package servetest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
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

var servingAddr = regexp.MustCompile(`msg="gatehouse serving" addr=(\S+)`)

// Serve starts `bin serve` with env added to the test's environment
// (GATEHOUSE_ADDR=127.0.0.1:0 among them, for a free port) and returns its
// base URL once it serves; the process is stopped with SIGTERM at cleanup,
// and its log is shown when the test failed.
func Serve(t *testing.T, bin string, env ...string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	addr := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			logs.WriteString(line + "\n")
			if m := servingAddr.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		<-drained
		if t.Failed() {
			t.Logf("gatehouse serve log:\n%s", logs.String())
		}
	})
	select {
	case a := <-addr:
		return fmt.Sprintf("http://%s", a)
	case <-time.After(60 * time.Second):
		t.Fatalf("gatehouse serve did not start:\n%s", logs.String())
		return ""
	}
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
