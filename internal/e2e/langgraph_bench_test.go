package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gatehousehq/gatehouse/graph"
)

// lgResume resumes a thread through /langgraph as Agent Inbox does (POST
// runs/stream with command.resume accept) and reads the SSE stream; it
// returns when the values event carrying __interrupt__ arrived, and when
// the stream ended.
func (s *stack) lgResume(thread string) (toInterrupt, toEnd time.Duration, err error) {
	body, _ := json.Marshal(map[string]any{"assistant_id": "gatecycle",
		"command": map[string]any{"resume": []any{map[string]any{"type": "accept", "args": nil}}}})
	t0 := time.Now()
	req, _ := http.NewRequest(http.MethodPost, s.base+"/langgraph/threads/"+thread+"/runs/stream", bytes.NewReader(body))
	req.Header.Set("x-api-key", token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("runs/stream: %d", res.StatusCode)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "values" && toInterrupt == 0 && strings.Contains(line, `"__interrupt__"`):
			toInterrupt = time.Since(t0)
		case line == "" && event == "end":
			toEnd = time.Since(t0)
			// Read to the stream's close, as a browser does, so that the
			// next resume reuses this connection instead of dialling.
			_, _ = io.Copy(io.Discard, res.Body)
			return toInterrupt, toEnd, nil
		}
	}
	return 0, 0, fmt.Errorf("stream ended without end: %v", sc.Err())
}

// BenchmarkLangGraphResume measures, in the same loop on one replica, a
// resume through /langgraph (HTTP + SSE, Agent Inbox's accept) to the
// next interrupt, against the native approval round trip (POST decision →
// the next interrupt.raised on the task's websocket), on two tasks cycling
// between two gates. ratio_p50 is the first's median over the second's.
func BenchmarkLangGraphResume(b *testing.B) {
	s := newStack(b, 4)
	ctx := context.Background()
	mk := func() string {
		t, err := s.engine.Create(ctx, graph.NewTask{Workflow: "gatecycle", Options: json.RawMessage(`{"gates":{}}`)})
		if err != nil {
			b.Fatal(err)
		}
		return t.ID
	}
	native, thread := mk(), mk()
	u := fmt.Sprintf("ws%s/api/v1/tasks/%s/stream?after=0", s.base[len("http"):], native)
	conn, _, err := websocket.DefaultDialer.Dial(u, http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	itr, err := nextInterrupt(conn)
	if err != nil {
		b.Fatal(err)
	}
	// The thread's task waits at its first gate before the loop starts.
	for deadline := time.Now().Add(10 * time.Second); ; {
		t, err := s.store.Task(ctx, thread)
		if err != nil {
			b.Fatal(err)
		}
		if t.Status == graph.StatusWaiting {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the thread's task never waited")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var nat, lg, lgEnd []time.Duration
	round := func() {
		t0 := time.Now()
		code, err := s.post("/api/v1/tasks/"+native+"/decisions", map[string]string{"interrupt_id": itr, "action": "approve"})
		if err != nil || code != http.StatusAccepted {
			b.Fatalf("decision: %d %v", code, err)
		}
		if itr, err = nextInterrupt(conn); err != nil {
			b.Fatal(err)
		}
		nat = append(nat, time.Since(t0))
		toItr, toEnd, err := s.lgResume(thread)
		if err != nil {
			b.Fatal(err)
		}
		lg, lgEnd = append(lg, toItr), append(lgEnd, toEnd)
	}
	// Warm up untimed, as BenchmarkApprovalRoundTrip does: statistics
	// gathered over a few hundred interrupts, and round trips on the
	// plans made from them; without, every lookup by key scanned tables
	// the measured loop kept growing.
	for range 200 {
		round()
	}
	s.analyze(b)
	for range 20 {
		round()
	}
	nat, lg, lgEnd = nat[:0], lg[:0], lgEnd[:0]
	b.ResetTimer()
	for range b.N {
		round()
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	n, l, e := p50(nat), p50(lg), p50(lgEnd)
	b.ReportMetric(n, "native_p50_ms")
	b.ReportMetric(l, "langgraph_p50_ms")
	b.ReportMetric(e, "langgraph_end_p50_ms")
	b.ReportMetric(l/n, "ratio_p50")
}
