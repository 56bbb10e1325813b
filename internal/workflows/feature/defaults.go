package feature

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
)

// DefaultReplies returns a well-formed reply per role for a feature
// request: YAML that passes the validators for analyze, requirements,
// research and plan, Markdown for implement and merge. The stub executor
// of the tests and the scripted LLM serve them.
func DefaultReplies(description string) map[string]string {
	out := make(map[string]string, 6)
	for _, r := range Roles() {
		out[r] = DefaultReply(r, description)
	}
	return out
}

// DefaultReply is DefaultReplies(description)[role], or "" for a role that
// is not one of the workflow's.
func DefaultReply(role, description string) string { return Revision(role, description, nil) }

// Revision is DefaultReply answering review feedback (oldest first): each
// point becomes something a reviewer can see in the diff (a requirement, a
// plan task, a decision, a section quoting it), so a rejection in the
// offline demo changes the document. No feedback: DefaultReply exactly.
func Revision(role, description string, feedback []string) string {
	fb := agent.Points(feedback)
	desc := strings.TrimSpace(description)
	if desc == "" {
		desc = "A new feature."
	}
	name := Slug(desc)
	switch role {
	case RoleAnalyze:
		return marshal(struct {
			Name         string   `yaml:"name"`
			Summary      string   `yaml:"summary"`
			Technologies []string `yaml:"technologies"`
			Complexity   string   `yaml:"complexity"`
		}{name, firstSentence(desc, 300) + revisedFor(fb), []string{"Go", "PostgreSQL", "htmx"}, "medium"})
	case RoleRequirements:
		type req struct {
			ID          string `yaml:"id"`
			Description string `yaml:"description"`
		}
		reqs := []req{
			{"FR-1", "The system provides: " + firstSentence(desc, 200)},
			{"FR-2", "Every change made by the feature is recorded with who made it and when."},
			{"FR-3", "Invalid input is refused with a message naming the field; nothing is changed."},
		}
		criteria := []string{
			"A user can complete the main flow end to end in the browser.",
			"The API returns 400 naming the field for invalid input.",
			"The feature is covered by integration tests against PostgreSQL.",
		}
		for i, f := range fb {
			id := fmt.Sprintf("%s%d", requirementPrefix, firstAddedRequirement+i)
			reqs = append(reqs, req{id, "From review feedback: " + f})
			criteria = append(criteria, fmt.Sprintf("A reviewer confirms %s answers: %s", id, f))
		}
		return marshal(struct {
			Requirements       []req    `yaml:"requirements"`
			AcceptanceCriteria []string `yaml:"acceptanceCriteria"`
			OpenQuestions      []string `yaml:"openQuestions"`
		}{reqs, criteria, []string{}})
	case RoleResearch:
		type decision struct {
			Title        string   `yaml:"title"`
			Chosen       string   `yaml:"chosen"`
			Rationale    string   `yaml:"rationale"`
			Alternatives []string `yaml:"alternatives"`
		}
		decisions := []decision{
			{"Storage", "PostgreSQL tables with a goose migration", "The service already runs on PostgreSQL; one store keeps backups and transactions simple.", []string{"SQLite", "a document store"}},
			{"API", "JSON endpoints under /api/v1", "Matches the existing API and its error format.", []string{"GraphQL"}},
			{"UI", "server-rendered templ pages with htmx", "No build step; consistent with the rest of the UI.", []string{"a single-page app"}},
		}
		for i, f := range fb {
			decisions = append(decisions, decision{fmt.Sprintf("Review feedback %d", i+1), f,
				"A reviewer asked for it; the design follows their feedback.", []string{"keeping the earlier choice"}})
		}
		return marshal(struct {
			Summary   string     `yaml:"summary"`
			Decisions []decision `yaml:"decisions"`
		}{"Build " + name + " inside the existing Go service, storing its data in PostgreSQL." + revisedFor(fb), decisions})
	case RolePlan:
		type task struct {
			ID          string   `yaml:"id"`
			Title       string   `yaml:"title"`
			Description string   `yaml:"description"`
			DependsOn   []string `yaml:"dependsOn"`
		}
		type phase struct {
			ID          string `yaml:"id"`
			Name        string `yaml:"name"`
			Description string `yaml:"description"`
			Tasks       []task `yaml:"tasks"`
		}
		phases := []phase{
			{"phase-1", "Foundation", "Schema, queries and API.", []task{
				{"task-1", "Add the migration and sqlc queries", "Tables, indexes and generated code.", []string{}},
				{"task-2", "Add the API endpoints", "Handlers with input validation and errors.", []string{"task-1"}},
			}},
			{"phase-2", "Experience", "UI and end-to-end tests.", []task{
				{"task-3", "Add the templ pages", "Forms and live updates with htmx.", []string{"task-2"}},
				{"task-4", "Add integration and browser tests", "PostgreSQL-backed tests and chromedp flows.", []string{"task-3"}},
			}},
		}
		summary := "Two phases: the data model and API first, then the UI and its tests."
		// Requirements a PRD's rejection added ("FR-4: …") become tasks
		// of the second phase; the plan's own rejections a third phase.
		var own []string
		for _, f := range fb {
			id, text, ok := addedRequirement(f)
			if !ok {
				own = append(own, f)
				continue
			}
			n := len(phases[1].Tasks) + 1
			prev := phases[1].Tasks[len(phases[1].Tasks)-1].ID
			t := task{fmt.Sprintf("task-%d", 2+n), "Meet " + id + ": " + agent.Excerpt(text, 60), text, []string{prev}}
			phases[1].Tasks = append(phases[1].Tasks, t)
		}
		if len(own) > 0 {
			n := len(phases[0].Tasks) + len(phases[1].Tasks)
			last := phases[1].Tasks[len(phases[1].Tasks)-1].ID
			var tasks []task
			for i, f := range own {
				tasks = append(tasks, task{fmt.Sprintf("task-%d", n+1+i), "Address review feedback " + fmt.Sprint(i+1), f, []string{last}})
			}
			phases = append(phases, phase{"phase-3", "Review feedback", "Changes the reviewer asked for.", tasks})
			summary = "Three phases: the data model and API, the UI and its tests, then the changes the review asked for."
		}
		if len(own) < len(fb) {
			summary = strings.Replace(summary, "the UI and its tests", "the UI, its tests and the requirements the PRD's review added", 1)
		}
		return marshal(struct {
			Summary string  `yaml:"summary"`
			Phases  []phase `yaml:"phases"`
		}{summary, phases})
	case RoleImplement:
		return fmt.Sprintf(`# Implementation of %s

## task-1: migration and queries
- Added the migration and the sqlc queries; regenerated code.

## task-2: API endpoints
- Added the handlers with validation; errors name the field.

## task-3: pages
- Added the templ pages with htmx live updates.

## task-4: tests
- Added integration tests against PostgreSQL and a chromedp flow.
%s
All tests pass.
`, name, answered("Review feedback addressed", fb))
	case RoleMerge:
		return fmt.Sprintf(`# Merge: %s

## Summary
%s

## Changes
- Migration, queries, API endpoints, pages and tests (see implementation.md).

## Test evidence
- go test ./... passes, including the PostgreSQL integration tests.

## Risks and rollback
- The migration is additive; roll back by reverting the merge and running migrate down.
%s`, name, firstSentence(desc, 300), answered("Review feedback addressed", fb))
	}
	return ""
}

// addedRequirement reads a plan's feedback entry that names a
// requirement a PRD's rejection added ("FR-4: text").
func addedRequirement(f string) (id, text string, ok bool) {
	rest, found := strings.CutPrefix(f, requirementPrefix)
	if !found {
		return "", "", false
	}
	n, text, found := strings.Cut(rest, ": ")
	if _, err := strconv.Atoi(n); !found || err != nil {
		return "", "", false
	}
	return requirementPrefix + n, text, true
}

// revisedFor is a sentence closing a summary that was revised for fb.
func revisedFor(fb []string) string {
	if len(fb) == 0 {
		return ""
	}
	return " Revised for review feedback: " + strings.Join(fb, "; ")
}

// answered is a Markdown section listing each point of fb as done ("" for
// none).
func answered(title string, fb []string) string {
	if len(fb) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString("\n## " + title + "\n")
	for _, f := range fb {
		sb.WriteString("- Done: " + f + "\n")
	}
	return sb.String()
}

// Slug turns text into a short kebab-case name (at most six words).
func Slug(text string) string {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	if len(words) > 6 {
		words = words[:6]
	}
	if len(words) == 0 {
		return "feature"
	}
	return strings.Join(words, "-")
}

func firstSentence(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.IndexAny(s, ".!?"); i > 0 {
		s = s[:i+1]
	}
	if len(s) > max {
		s, _ = cut(s, max)
		s += "…"
	}
	return s
}
