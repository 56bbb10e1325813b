package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// sizedState is a state with one large field that no node changes (a
// document under review, a transcript) and one small field that every
// node run changes.
type sizedState struct {
	Doc   string `json:"doc"`
	Count int    `json:"count"`
}

const sizedSteps = 10

// sizedGraph runs one node sizedSteps times, each run changing Count only.
func sizedGraph(tb testing.TB) graph.Workflow {
	g, err := graph.New[sizedState]("sized").
		Node("work", func(_ context.Context, _ *graph.NodeRun, s sizedState) (sizedState, error) {
			s.Count++
			return s, nil
		}).
		Route("work", func(s sizedState) string {
			if s.Count >= sizedSteps {
				return graph.END
			}
			return "work"
		}, "work", graph.END).
		// The result is written once per task, not per step: keep it out.
		Result(func(s sizedState) any { return s.Count }).
		Init(sizedInit).
		Compile()
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// sizedInit makes the state of a sized task: its input names the size
// only (the task's input is read with every load; the state is measured).
func sizedInit(in json.RawMessage, _ graph.Options) (sizedState, error) {
	var size struct{ Size int }
	err := json.Unmarshal(in, &size)
	return sizedState{Doc: prose(size.Size)}, err
}

// prose is n bytes of words: text compresses about as a real document does
// (random bytes would defeat TOAST's compression, repeated ones flatter it).
func prose(n int) string {
	words := strings.Fields(`the gate holds each task until a reviewer approves the plan and the
		engine writes a checkpoint after every node run so that a crash loses at most one step of work
		while replicas share one database through leases fences and notifications of progress`)
	r := rand.New(rand.NewPCG(1, 2))
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString(words[r.IntN(len(words))])
		if r.IntN(12) == 0 {
			sb.WriteString(".\n")
		} else {
			sb.WriteByte(' ')
		}
	}
	return sb.String()[:n]
}

// BenchmarkStateSize runs tasks whose state holds a 1 KB, 64 KB or 1 MB
// document that never changes while one small field changes per step, and
// reports the WAL PostgreSQL writes per step (pg_current_wal_lsn before and
// after) and the time per step. One iteration runs a task of each size, so
// that the ratio compares steps that saw the same machine.
func BenchmarkStateSize(b *testing.B) {
	pool := pgtest.NewPool(b)
	e, err := graph.NewEngine(newStore(b, pool), []graph.Workflow{sizedGraph(b)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	sizes := []struct {
		name string
		n    int
	}{{"1k", 1 << 10}, {"64k", 64 << 10}, {"1m", 1 << 20}}
	inputs := make([]json.RawMessage, len(sizes))
	for i, sz := range sizes {
		// the state's other bytes (keys, count) are left out of the size
		inputs[i] = json.RawMessage(fmt.Sprintf(`{"size": %d}`, sz.n-24))
	}
	wal := func() string {
		var lsn string
		if err := pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
			b.Fatal(err)
		}
		return lsn
	}
	walSince := func(lsn string) float64 {
		var d float64
		if err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)`, lsn).Scan(&d); err != nil {
			b.Fatal(err)
		}
		return d
	}
	walBytes := make([]float64, len(sizes))
	spent := make([]time.Duration, len(sizes))
	for b.Loop() {
		for i := range sizes {
			t, err := e.Create(ctx, graph.NewTask{Workflow: "sized", Input: inputs[i]})
			if err != nil {
				b.Fatal(err)
			}
			lsn := wal()
			start := time.Now()
			if out, err := e.Run(ctx, t.ID, 0); err != nil || out.Status != graph.StatusSucceeded {
				b.Fatalf("%+v %v", out, err)
			}
			spent[i] += time.Since(start)
			walBytes[i] += walSince(lsn)
		}
	}
	steps := float64(b.N * sizedSteps)
	for i, sz := range sizes {
		b.ReportMetric(walBytes[i]/steps, fmt.Sprintf("wal_%s_B/step", sz.name))
		b.ReportMetric(float64(spent[i].Microseconds())/steps, fmt.Sprintf("us_%s/step", sz.name))
	}
	b.ReportMetric(float64(spent[2])/float64(spent[0]), "ratio_1m_vs_1k")
}
