package web

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
)

// analyticsKinds decodes a report's kinds by name.
func analyticsKinds(t *testing.T, r reply) (map[string]map[string]any, map[string]any) {
	t.Helper()
	var m map[string]any
	r.json(t, &m)
	out := map[string]map[string]any{}
	for _, k := range m["kinds"].([]any) {
		k := k.(map[string]any)
		out[k["kind"].(string)] = k
	}
	return out, m
}

// TestAnalyticsAPI: decisions taken through the API show up in
// GET /api/v1/analytics at once (the rollups are written in the decision's
// transaction), the CSV carries the same figures, and bad parameters are
// 400s naming the parameter.
func TestAnalyticsAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)

	r := b.do(t, http.MethodGet, "/api/v1/analytics", nil)
	if r.status != http.StatusOK {
		t.Fatalf("empty analytics: %d %s", r.status, r.body)
	}
	if kinds, m := analyticsKinds(t, r); len(kinds) != 0 || len(m["deciders"].([]any)) != 0 || len(m["days"].([]any)) != 0 {
		t.Fatalf("a fresh database has figures: %s", r.body)
	}

	// Reject the PRD once, approve it; the task then waits on its plan.
	task := b.waitingTask(t)
	b.decide(t, task.ID, map[string]any{"interrupt_id": task.PendingInterrupt.ID, "action": "reject", "feedback": "more detail"})
	if out := b.run(t, task.ID); out.Status != graph.StatusWaiting {
		t.Fatalf("after the rejection: %+v", out)
	}
	again := b.getTask(t, task.ID)
	b.decide(t, task.ID, map[string]any{"interrupt_id": again.PendingInterrupt.ID, "action": "approve"})
	if out := b.run(t, task.ID); out.Status != graph.StatusWaiting {
		t.Fatalf("after the approval: %+v", out)
	}

	r = b.do(t, http.MethodGet, "/api/v1/analytics?workflow=feature", nil)
	if r.status != http.StatusOK {
		t.Fatalf("analytics: %d %s", r.status, r.body)
	}
	kinds, m := analyticsKinds(t, r)
	prd, plan := kinds["prd"], kinds["plan"]
	if prd == nil || plan == nil || len(kinds) != 2 {
		t.Fatalf("kinds: %s", r.body)
	}
	hist, _ := json.Marshal(prd["rejections_before_approval"])
	if prd["raised"] != 2.0 || prd["approved"] != 1.0 || prd["rejected"] != 1.0 || prd["pending"] != 0.0 ||
		prd["rejection_rate"] != 0.5 || string(hist) != `{"0":0,"1":1}` {
		t.Errorf("prd: %v", prd)
	}
	if plan["raised"] != 1.0 || plan["pending"] != 1.0 || plan["oldest_pending_seconds"] == nil ||
		plan["time_to_decision_seconds"].(map[string]any)["p50"] != nil {
		t.Errorf("plan: %v", plan)
	}
	ds := m["deciders"].([]any)
	if len(ds) != 1 {
		t.Fatalf("deciders: %v", ds)
	}
	if d := ds[0].(map[string]any); d["decider"] != "bootstrap" || d["decisions"] != 2.0 || d["approvals"] != 1.0 ||
		d["rejections"] != 1.0 || d["fast_decisions"] != 0.0 || d["median_seconds"] == nil {
		t.Errorf("decider: %v", d)
	}
	if days := m["days"].([]any); len(days) != 2 {
		t.Errorf("days: %v", days)
	}

	// Another workflow has none of it.
	r = b.do(t, http.MethodGet, "/api/v1/analytics?workflow=linear", nil)
	if kinds, _ := analyticsKinds(t, r); len(kinds) != 0 {
		t.Errorf("linear: %s", r.body)
	}

	t.Run("CSV", func(t *testing.T) {
		r := b.do(t, http.MethodGet, "/api/v1/analytics?workflow=feature&format=csv", nil)
		if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") ||
			!strings.Contains(r.header.Get("Content-Disposition"), "attachment") {
			t.Fatalf("csv: %d %v %s", r.status, r.header, r.body)
		}
		rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
		if err != nil || len(rows) != 3 {
			t.Fatalf("csv rows %v: %v", rows, err)
		}
		for _, row := range rows[1:] {
			k := kinds[row[0]]
			ttd := k["time_to_decision_seconds"].(map[string]any)
			want := []any{k["kind"], k["raised"], k["approved"], k["rejected"], k["edited"], k["answered"], k["expired"],
				k["pending"], k["oldest_pending_seconds"], ttd["p50"], ttd["p90"], ttd["max"],
				k["rejections_before_approval"], k["rejection_rate"], k["auto_approved"], k["auto_rejected"]}
			for i, cell := range row {
				var got any = cell
				if i > 0 {
					got = nil
					if cell != "" {
						if err := json.Unmarshal([]byte(cell), &got); err != nil {
							t.Fatalf("cell %q: %v", cell, err)
						}
					}
				}
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want[i])
				if i == 8 { // the pending age moves between the two requests
					if (got == nil) != (want[i] == nil) {
						t.Errorf("%s %s: %s vs %s", row[0], rows[0][i], g, w)
					}
					continue
				}
				if !bytes.Equal(g, w) {
					t.Errorf("%s %s: CSV %s, JSON %s", row[0], rows[0][i], g, w)
				}
			}
		}
	})

	t.Run("BadInput", func(t *testing.T) {
		for _, c := range []struct{ query, field string }{
			{"since=yesterday", "since"},
			{"until=2026-13-01", "until"},
			{"since=2026-02-01&until=2026-01-01", "since"},
			{"since=2020-01-01&until=2026-01-01", "since"},
			{"format=xml", "format"},
		} {
			r := b.do(t, http.MethodGet, "/api/v1/analytics?"+c.query, nil)
			if r.status != http.StatusBadRequest {
				t.Errorf("%s: %d %s", c.query, r.status, r.body)
				continue
			}
			if e := r.apiErr(t); !strings.Contains(e.Message, c.field) {
				t.Errorf("%s: %+v does not name %s", c.query, e, c.field)
			}
		}
	})

	t.Run("Unauthenticated", func(t *testing.T) {
		if r := b.doAuth(t, http.MethodGet, "/api/v1/analytics", nil, ""); r.status != http.StatusUnauthorized {
			t.Errorf("no token: %d", r.status)
		}
	})
}

// TestInterruptViewRecorded: an approver opening a task page with a
// pending interrupt records their first view (once); a viewer's does not
// count, as they cannot decide.
func TestInterruptViewRecorded(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	e.user("vera", "viewer")
	e.user("abe", "approver")
	id := e.createFeature("views")
	itr := e.waitPending(id, "prd")
	for _, who := range []string{"vera", "abe", "abe"} {
		s := e.session(who)
		if st, _, body := e.getAs(t, &s, "/tasks/"+id, nil); st != http.StatusOK {
			t.Fatalf("%s: %d %s", who, st, body)
		}
	}
	rows, err := e.pool.Query(context.Background(), `SELECT viewer FROM interrupt_views WHERE interrupt_id = $1`, itr.ID)
	if err != nil {
		t.Fatal(err)
	}
	var viewers []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		viewers = append(viewers, v)
	}
	if len(viewers) != 1 || viewers[0] != "abe" {
		t.Errorf("views: %v", viewers)
	}
}
