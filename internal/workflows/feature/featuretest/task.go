package featuretest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
)

// Creator makes tasks (graph.Engine).
type Creator interface {
	Create(ctx context.Context, in graph.NewTask) (*graph.Task, error)
}

// Create starts a feature task titled title on DefaultDescription whose
// every gate waits for a person, created by "test", and returns its id.
func Create(t testing.TB, e Creator, title string) string {
	t.Helper()
	task, err := e.Create(context.Background(), graph.NewTask{Workflow: feature.Name, Title: title,
		Input:   json.RawMessage(`{"description":"` + DefaultDescription + `"}`),
		Options: json.RawMessage(`{"gates":{}}`), CreatedBy: "test"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return task.ID
}
