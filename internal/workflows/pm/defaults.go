package pm

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
)

// BuiltinReply is the scripted provider's reply of role (scripted.Defaults)
// for its subject — the task's description for the planner and the
// summarizer, the step's title for the worker and the verifier: a YAML
// plan of three steps that passes ParsePlan, a Markdown step report, a
// passing JSON verification, a Markdown summary. ok is false for a role
// that is not one of the workflow's.
func BuiltinReply(role, subject string) (reply string, ok bool) {
	return Builtin(role, subject, nil)
}

// Builtin is BuiltinReply answering feedback (oldest first): the plan's
// rejections become steps of the plan and a line of the summary, a failed
// verification (the remediation) a section of the worker's report and a
// finding of the verifier — so a rejection in the demo changes the plan.
func Builtin(role, subject string, feedback []string) (reply string, ok bool) {
	fb := agent.Points(feedback)
	topic := agent.Name(subject, "the change")
	focus := agent.Noun(subject, 0, "feature")
	switch role {
	case RolePlanner:
		plan := Plan{
			Steps: []Step{
				{ID: "step-1", Title: "Survey the current " + focus + " behaviour",
					Description:     "Read the code and data involved in " + strings.ToLower(topic) + "; write down what changes.",
					ExpectedOutputs: []string{"a short design note listing the files and tables to change"},
					Evidence:        []string{"links to the code read", "the list of affected tests"},
					Capabilities:    []string{"repository"}},
				{ID: "step-2", Title: "Implement " + strings.ToLower(topic),
					Description:     "Make the change in small commits with tests for each acceptance criterion.",
					ExpectedOutputs: []string{"the code change", "new or updated tests"},
					Evidence:        []string{"the diff", "go test output with the new tests passing"},
					Capabilities:    []string{"go", "postgres"}},
				{ID: "step-3", Title: "Verify against the acceptance criteria",
					Description:     "Run the whole suite and check every acceptance criterion by hand once.",
					ExpectedOutputs: []string{"a checklist of the acceptance criteria with results"},
					Evidence:        []string{"full test run output", "notes of the manual checks"},
					Capabilities:    []string{"go", "postgres", "browser"}},
			},
			Assumptions: []string{
				"The repository builds and its tests pass before the change.",
				"No data migration of existing " + focus + " records is needed.",
			},
		}
		for i, f := range fb {
			plan.Steps = append(plan.Steps, Step{ID: fmt.Sprintf("step-%d", 4+i), Title: "Address review: " + agent.Excerpt(f, 80),
				Description:     "The plan's reviewer asked: " + f,
				ExpectedOutputs: []string{"the change the reviewer asked for"},
				Evidence:        []string{"a note showing how the feedback was answered"},
				Capabilities:    []string{"repository"}})
		}
		return plan.YAML(), true
	case RoleWorker:
		return fmt.Sprintf(`## %[1]s

Done. I worked in a fresh sandbox from the main branch.

### Outputs
- Completed: %[1]s
- Changes are in the job's branch, one commit per logical change.

### Evidence
- go test ./... passes (all packages ok).
- Every expected output of the step is listed above with its location.
%[2]s`, strings.TrimRight(strings.TrimSpace(subject), ".")+".", section("Remediation", "Fixed", fb)), true
	case RoleVerifier:
		findings := []string{fmt.Sprintf("%q: every expected output is present and the evidence supports it.", agent.Excerpt(subject, 80))}
		for _, f := range fb {
			findings = append(findings, "The remediation was done: "+f)
		}
		b, _ := json.Marshal(map[string]any{"status": VerifyPass,
			"findings":            findings,
			"recommended_actions": []string{}})
		return string(b), true
	case RoleSummarizer:
		return fmt.Sprintf(`# Summary: %[1]s

**Outcome:** done; every step passed verification.

## What was done
- The current %[2]s behaviour was surveyed and the change designed.
- The change was implemented with tests for each acceptance criterion.
- The whole suite was run and each criterion checked.

## Acceptance criteria
Each criterion is met; the verification records of the steps hold the evidence.

## Open risks
- None known. Watch the error rate after release.
%[3]s`, topic, focus, section("Review feedback on the plan", "Answered", fb)), true
	}
	return "", false
}

// section is a Markdown section with one line per point of fb ("" for
// none).
func section(title, verb string, fb []string) string {
	if len(fb) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString("\n### " + title + "\n")
	for _, f := range fb {
		sb.WriteString("- " + verb + ": " + f + "\n")
	}
	return sb.String()
}
