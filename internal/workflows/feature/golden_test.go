package feature_test

// A golden checkpoint of the feature workflow (LESSONS.md: "Encoding
// changes break old checkpoints"). testdata/feature_checkpoint_v1.json is
// the state JSON of a feature task waiting at the plan gate, as version 1 of
// the state encoding stored it in PostgreSQL. It is committed and must keep
// loading and running to completion. Regenerate it only with
//
//	go test ./internal/workflows/feature/ -run TestGoldenCheckpoint -update
//
// and only for a new file (feature_checkpoint_v2.json, …) when the encoding
// changes on purpose: old files stay, so old checkpoints stay readable.

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature/featuretest"
)

var update = flag.Bool("update", false, "rewrite the golden checkpoint in testdata")

var goldenCheckpoint = filepath.Join("testdata", "feature_checkpoint_v1.json")

// goldenIterations are the node runs completed when the golden state was
// stored: every node up to plan, once.
func goldenIterations() map[string]int { return nodesUpTo("plan", 1) }

// writeGolden runs a task to the plan gate and stores its state JSON as read
// back from PostgreSQL. The phase timings come from a fixed clock so the
// file is reproducible.
func writeGolden(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(250 * time.Millisecond)
		return now
	}
	p := setup(t, feature.WithClock(clock))
	id := p.create(`{"gates": {"allowPrd": true, "allowPlan": false, "allowMerge": true}}`)
	p.waitsAt(id, "plan", "plan", 1)
	var raw []byte
	if err := p.pool.QueryRow(ctxFor(t), `SELECT state FROM workflow_checkpoints WHERE task_id = $1`, id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	out.WriteByte('\n')
	if err := os.MkdirAll(filepath.Dir(goldenCheckpoint), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(goldenCheckpoint, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", goldenCheckpoint)
}

// readGolden loads the golden state strictly: a field the file has and
// State no longer knows (renamed or dropped) fails here, before it silently
// loads as empty.
func readGolden(t *testing.T) (raw []byte, s feature.State) {
	t.Helper()
	raw, err := os.ReadFile(goldenCheckpoint)
	if err != nil {
		t.Fatalf("%v (generate it once with -update)", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("the golden checkpoint no longer loads into feature.State: %v", err)
	}
	return raw, s
}

func TestGoldenCheckpoint(t *testing.T) {
	if *update {
		writeGolden(t)
	}
	t.Parallel()
	raw, s := readGolden(t)

	// The state as stored: every document up to the plan is there.
	if s.Description != featuretest.DefaultDescription || s.Name != "let-users-export-their-reports-as" || s.Summary == "" {
		t.Errorf("golden identity: description %q name %q summary %q", s.Description, s.Name, s.Summary)
	}
	for name, text := range map[string]string{"spec": s.SpecYAML, "research": s.ResearchYAML, "plan": s.PlanYAML,
		"tasks": s.TasksYAML, "feature": s.FeatureYAML} {
		if strings.TrimSpace(text) == "" {
			t.Errorf("golden %s document is empty", name)
		}
	}
	if s.Implementation != "" || s.MergeSummary != "" || len(s.Feedback) != 0 || len(s.Unpublished) != 0 {
		t.Errorf("golden state has more than the plan gate's: %+v", s)
	}
	goldenPhases := []string{"analyze", "requirements", "research", "plan"}
	if ps, err := feature.CompletedPhases(s.FeatureYAML); err != nil || !slices.Equal(ps, goldenPhases) {
		t.Errorf("golden completedPhases = %v (%v)", ps, err)
	}
	goldenTimings, err := feature.PhaseTimings(s.FeatureYAML)
	if err != nil || len(goldenTimings) != 4 || goldenTimings[0].StartedAt != "2026-01-02T03:04:05.25Z" {
		t.Errorf("golden phaseTimings = %+v (%v)", goldenTimings, err)
	}

	// Every field of the file keeps its name and value when the state is
	// encoded again (new fields may be added; none may be renamed).
	var stored, again map[string]any
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &again); err != nil {
		t.Fatal(err)
	}
	for k, v := range stored {
		if !reflect.DeepEqual(again[k], v) {
			t.Errorf("field %q of the golden state encodes as %v, stored as %v", k, again[k], v)
		}
	}

	// goldenTask stores a queued task whose checkpoint is the golden state
	// after the plan node run; it returns the task id.
	goldenTask := func(p *pgEnv, options string) string {
		id := p.create(options)
		iters, _ := json.Marshal(goldenIterations())
		// a row as written before 00050_state_blobs: the whole state in state
		p.exec(`UPDATE workflow_checkpoints SET state = $2::jsonb, state_refs = '{}', last_node_id = 'plan', next_node_id = $3,
			iterations = $4::jsonb WHERE task_id = $1`, id, string(raw), feature.NodeValidatePlanTasks, string(iters))
		p.exec(`UPDATE tasks SET current_node = $2 WHERE id = $1`, id, feature.NodeValidatePlanTasks)
		return id
	}
	// finishes checks a task that ran from the golden state to its end.
	finishes := func(t *testing.T, p *pgEnv, id string, res feature.Result) {
		t.Helper()
		// Nothing before the plan ran again: the golden state carried it.
		p.wantCalls(roleCalls{implement: 1, merge: 1})
		wantStrings(t, "nodes started", p.phases(id, graph.EventNodeStarted, ""), []string{"validate_plan_tasks", "implement", "merge"})
		end := p.state(id)
		if end.SpecYAML != s.SpecYAML || end.PlanYAML != s.PlanYAML || end.TasksYAML != s.TasksYAML || end.ResearchYAML != s.ResearchYAML ||
			end.Name != s.Name || strings.TrimSpace(end.Implementation) == "" || strings.TrimSpace(end.MergeSummary) == "" {
			t.Errorf("final state lost the golden documents or lacks the new ones: %+v", end)
		}
		timings := p.phaseTimings(id)
		wantStrings(t, "phaseTimings", timings, append(slices.Clone(goldenPhases), "implement", "merge"))
		wantCompleteResult(t, res, 0)
		// The implementer worked from the golden plan.
		if prompts := p.stub.PromptsFor(feature.RoleImplement); len(prompts) != 1 || !strings.Contains(prompts[0], strings.TrimSpace(s.TasksYAML)) {
			t.Errorf("implement prompt lacks the golden tasks.yaml: %q", prompts)
		}
		iters := p.completions(id)
		if iters["implement"] != 1 || iters["merge"] != 1 || iters["plan"] != 0 {
			t.Errorf("completions = %v", iters)
		}
		p.audit(id)
	}

	t.Run("runs to completion without gates", func(t *testing.T) {
		t.Parallel()
		p := setup(t)
		id := goldenTask(p, "")
		res := p.succeeds(id)
		finishes(t, p, id, res)
	})

	t.Run("approved at the plan gate", func(t *testing.T) {
		t.Parallel()
		// The same state behind a real pending plan gate: approve it on a
		// fresh engine and run on.
		p := setup(t)
		id := p.create(`{"gates": {"allowPrd": true, "allowPlan": false, "allowMerge": true}}`)
		itr := p.waitsAt(id, "plan", "plan", 1)
		iters, _ := json.Marshal(goldenIterations())
		p.exec(`UPDATE workflow_checkpoints SET state = $2::jsonb, state_refs = '{}', iterations = $3::jsonb WHERE task_id = $1`,
			id, string(raw), string(iters))
		p.decide(id, itr, graph.ActionApprove, "")
		res := p.succeeds(id)
		wantCompleteResult(t, res, 0)
		if got := p.state(id); got.PlanYAML != s.PlanYAML || got.TasksYAML != s.TasksYAML {
			t.Errorf("final plan differs from the golden one")
		}
		wantStrings(t, "phaseTimings", p.phaseTimings(id), append(slices.Clone(goldenPhases), "implement", "merge"))
		p.wantCalls(roleCalls{1, 1, 1, 1, 1, 1})
		p.audit(id)
	})
}
