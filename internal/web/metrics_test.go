package web

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMetricsEndpoint: /metrics is served without a token, like /healthz,
// and OpenWebsockets counts the streams open.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: testToken, tweak: func(s *Server) {
		s.metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("websockets_open 0\n"))
		})
		s.routes() // the handler is mounted when routes are built
	}})
	r := b.doAuth(t, http.MethodGet, "/metrics", nil, "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "websockets_open") {
		t.Fatalf("GET /metrics: %d %s", r.status, r.body)
	}

	task := b.create(t, featureTask(map[string]bool{}))
	if n := b.srv.OpenWebsockets(); n != 0 {
		t.Fatalf("open websockets before any: %d", n)
	}
	conn := b.dial(t, b.base, task.ID, 0)
	readUntil(t, conn, "task.created")
	if n := b.srv.OpenWebsockets(); n != 1 {
		t.Errorf("open websockets with one stream: %d", n)
	}
	conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for b.srv.OpenWebsockets() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := b.srv.OpenWebsockets(); n != 0 {
		t.Errorf("open websockets after the client left: %d", n)
	}
}

// TestNoMetricsWithoutHandler: without Deps.Metrics there is no /metrics.
func TestNoMetricsWithoutHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if r := b.doAuth(t, http.MethodGet, "/metrics", nil, ""); r.status != http.StatusNotFound {
		t.Errorf("GET /metrics without a handler: %d", r.status)
	}
}
