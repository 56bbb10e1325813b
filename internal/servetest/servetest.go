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
