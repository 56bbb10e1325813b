package feature

import (
	"context"
	"fmt"
	"slices"

	"github.com/gatehousehq/gatehouse/graph"
	"gopkg.in/yaml.v3"
)

// invalid fails the node run for good: a document that does not match its
// schema will not match it on a second try.
func invalid(run *graph.NodeRun, err error) error {
	return graph.Permanent(fmt.Errorf("%s: %w", run.Node, err))
}

func (w *workflow) validateSpecAnalyze(_ context.Context, run *graph.NodeRun, s State) (State, error) {
	if _, err := validateDoc(SpecFile, s.SpecYAML, specAnalyzeS); err != nil {
		return s, invalid(run, err)
	}
	if _, err := validateDoc(FeatureFile, s.FeatureYAML, featureS); err != nil {
		return s, invalid(run, err)
	}
	publish(run, &s)
	return s, nil
}

func (w *workflow) validateSpecRequirements(_ context.Context, run *graph.NodeRun, s State) (State, error) {
	if _, err := validateDoc(SpecFile, s.SpecYAML, specRequirementsS); err != nil {
		return s, invalid(run, err)
	}
	publish(run, &s)
	return s, nil
}

func (w *workflow) validateResearch(_ context.Context, run *graph.NodeRun, s State) (State, error) {
	if _, err := validateDoc(ResearchFile, s.ResearchYAML, researchS); err != nil {
		return s, invalid(run, err)
	}
	publish(run, &s)
	return s, nil
}

func (w *workflow) validatePlanTasks(_ context.Context, run *graph.NodeRun, s State) (State, error) {
	plan, err := validateDoc(PlanFile, s.PlanYAML, planS)
	if err != nil {
		return s, invalid(run, err)
	}
	if _, err := validateDoc(TasksFile, s.TasksYAML, tasksS); err != nil {
		return s, invalid(run, err)
	}
	if err := crossCheck(plan, s.TasksYAML); err != nil {
		return s, invalid(run, err)
	}
	publish(run, &s)
	return s, nil
}

// crossCheck checks tasks.yaml against plan.yaml: unique ids, every task in
// a phase of the plan, every phase with a task, dependencies that exist.
func crossCheck(plan *yaml.Node, tasksYAML string) error {
	var problems []string
	phases := map[string]bool{}
	for _, p := range mapGet(plan, "phases").Content {
		id := mapText(p, "id")
		if phases[id] {
			return &DocumentError{Artifact: PlanFile, Problems: []string{fmt.Sprintf("line %d: phase id %q is used twice", p.Line, id)}}
		}
		phases[id] = false
	}
	var td tasksDoc
	if err := yaml.Unmarshal([]byte(tasksYAML), &td); err != nil {
		return &DocumentError{Artifact: TasksFile, Parse: err}
	}
	ids := map[string]bool{}
	for i, t := range td.Tasks {
		if ids[t.ID] {
			problems = append(problems, fmt.Sprintf("tasks[%d]: task id %q is used twice", i, t.ID))
		}
		ids[t.ID] = true
		if _, ok := phases[t.PhaseID]; !ok {
			problems = append(problems, fmt.Sprintf("tasks[%d]: phaseId %q is not a phase of plan.yaml", i, t.PhaseID))
		} else {
			phases[t.PhaseID] = true
		}
	}
	for i, t := range td.Tasks {
		for _, d := range t.DependsOn {
			if !ids[d] {
				problems = append(problems, fmt.Sprintf("tasks[%d]: dependsOn %q is not a task id", i, d))
			}
		}
	}
	var empty []string
	for id, has := range phases {
		if !has {
			empty = append(empty, id)
		}
	}
	slices.Sort(empty)
	for _, id := range empty {
		problems = append(problems, fmt.Sprintf("phase %q of plan.yaml has no task", id))
	}
	if len(problems) > 0 {
		return &DocumentError{Artifact: TasksFile, Problems: problems}
	}
	return nil
}

type taskEntry struct {
	ID          string   `yaml:"id"`
	PhaseID     string   `yaml:"phaseId"`
	Title       string   `yaml:"title"`
	Description string   `yaml:"description,omitempty"`
	DependsOn   []string `yaml:"dependsOn,omitempty"`
	State       string   `yaml:"state"`
}

type tasksDoc struct {
	Tasks []taskEntry `yaml:"tasks"`
}

// deriveTasks lists the tasks of a plan (which matches planS) for
// tasks.yaml. A task without an id gets task-N, N counting all tasks.
func deriveTasks(plan *yaml.Node) tasksDoc {
	td := tasksDoc{Tasks: []taskEntry{}}
	n := 0
	for _, p := range mapGet(plan, "phases").Content {
		phaseID := mapText(p, "id")
		for _, t := range mapGet(p, "tasks").Content {
			n++
			t = deref(t)
			e := taskEntry{PhaseID: phaseID, State: "todo"}
			if t.Kind == yaml.ScalarNode {
				e.Title = t.Value
			} else {
				e.ID = mapText(t, "id")
				e.Title = mapText(t, "title")
				e.Description = mapText(t, "description")
				if deps := mapGet(t, "dependsOn"); deps != nil && deps.Kind == yaml.SequenceNode {
					for _, d := range deps.Content {
						e.DependsOn = append(e.DependsOn, deref(d).Value)
					}
				}
			}
			if e.ID == "" {
				e.ID = fmt.Sprintf("task-%d", n)
			}
			td.Tasks = append(td.Tasks, e)
		}
	}
	return td
}
