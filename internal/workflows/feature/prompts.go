package feature

import (
	"fmt"
	"strings"
)

// feedbackSection lists the rejection feedback of the given phases (all
// phases when none are given) for a prompt.
func feedbackSection(fb []Feedback, phases ...string) string {
	var sb strings.Builder
	for _, f := range fb {
		if len(phases) > 0 && !contains(phases, f.Phase) {
			continue
		}
		if sb.Len() == 0 {
			sb.WriteString("\nA reviewer rejected earlier iterations. Address every point of their feedback:\n")
		}
		fmt.Fprintf(&sb, "- (%s, iteration %d) %s\n", f.Phase, f.Iteration, indentRest(f.Feedback))
	}
	return sb.String()
}

func indentRest(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n  ")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func document(name, text string) string {
	if strings.TrimSpace(text) == "" {
		return fmt.Sprintf("%s: (none yet)\n", name)
	}
	return fmt.Sprintf("%s:\n---\n%s\n---\n", name, strings.TrimRight(text, "\n"))
}

func header(role, task, name string, iteration int) string {
	h := fmt.Sprintf("You are the %s (role %s)", task, role)
	if name != "" {
		h += fmt.Sprintf(" for the feature %q", name)
	}
	h += "."
	if iteration > 1 {
		h += fmt.Sprintf(" This is iteration %d of this step.", iteration)
	}
	return h + "\n\n"
}

const yamlOnly = "Reply with one YAML document only: no prose before or after it, no code fences.\n"

func analyzePrompt(s State) string {
	var sb strings.Builder
	sb.WriteString(header(RoleAnalyze, "feature analyst", s.Name, 1))
	sb.WriteString("Analyse the feature request below.\n")
	sb.WriteString(yamlOnly)
	sb.WriteString(`Keys:
name: a short kebab-case name for the feature (required)
summary: two or three sentences on what the feature does and for whom (required)
technologies: the technologies involved (list, optional)
complexity: low, medium or high (optional)

`)
	fmt.Fprintf(&sb, "Feature request:\n%s\n", strings.TrimSpace(s.Description))
	if s.Name != "" {
		fmt.Fprintf(&sb, "\nThe requester named it %q: use that name.\n", s.Name)
	}
	return sb.String()
}

func requirementsPrompt(s State, iteration int) string {
	var sb strings.Builder
	sb.WriteString(header(RoleRequirements, "product manager writing the PRD", s.Name, iteration))
	fmt.Fprintf(&sb, "Feature request:\n%s\n\n", strings.TrimSpace(s.Description))
	sb.WriteString(document(SpecFile, s.SpecYAML))
	sb.WriteString("\nWrite the product requirements. " + yamlOnly)
	sb.WriteString(`Keys:
requirements: a non-empty list of {id: FR-1, description: one testable requirement}
acceptanceCriteria: a list of statements a tester can check
openQuestions: a list of {question: ...} (may be empty)
`)
	sb.WriteString(feedbackSection(s.Feedback)) // every rejectionFeedback entry of spec.yaml
	return sb.String()
}

func researchPrompt(s State) string {
	var sb strings.Builder
	sb.WriteString(header(RoleResearch, "technical researcher", s.Name, 1))
	sb.WriteString(document(SpecFile, s.SpecYAML))
	sb.WriteString("\nDecide how to build it: libraries, storage, interfaces, risks. " + yamlOnly)
	sb.WriteString(`Keys:
summary: one paragraph
decisions: a non-empty list of {title, chosen, rationale, alternatives: [list of rejected options]}
`)
	return sb.String()
}

func planPrompt(s State, iteration int) string {
	var sb strings.Builder
	sb.WriteString(header(RolePlan, "technical lead writing the implementation plan", s.Name, iteration))
	sb.WriteString(document(SpecFile, s.SpecYAML))
	sb.WriteString(document(ResearchFile, s.ResearchYAML))
	sb.WriteString("\nPlan the implementation in phases of small tasks. " + yamlOnly)
	sb.WriteString(`Keys:
summary: one paragraph
phases: a non-empty list of {id: phase-1, name, description, tasks: a non-empty list of {id: task-1, title, description, dependsOn: [task ids]}}
`)
	sb.WriteString(feedbackSection(s.Feedback, NodePlan))
	return sb.String()
}

func implementPrompt(s State) string {
	var sb strings.Builder
	sb.WriteString(header(RoleImplement, "software engineer", s.Name, 1))
	sb.WriteString(document(SpecFile, s.SpecYAML))
	sb.WriteString(document(PlanFile, s.PlanYAML))
	sb.WriteString(document(TasksFile, s.TasksYAML))
	sb.WriteString("\nImplement every task of tasks.yaml in order. Reply in Markdown: per task, what you changed " +
		"(files, functions), the tests you added, and anything left open.\n")
	return sb.String()
}

func mergePrompt(s State, iteration int) string {
	var sb strings.Builder
	sb.WriteString(header(RoleMerge, "release engineer preparing the merge", s.Name, iteration))
	sb.WriteString(document(SpecFile, s.SpecYAML))
	sb.WriteString(document(TasksFile, s.TasksYAML))
	sb.WriteString(document(ImplementationFile, s.Implementation))
	sb.WriteString("\nWrite the merge request description in Markdown: a title line, a summary, the changes, " +
		"the test evidence, the risks and how to roll back.\n")
	sb.WriteString(feedbackSection(s.Feedback, NodeMerge))
	return sb.String()
}
