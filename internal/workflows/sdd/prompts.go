package sdd

import (
	"fmt"
	"strings"
)

func header(role, who, what string, iteration int) string {
	h := fmt.Sprintf("You are the %s (role %s) of a team writing a software design document (SDD). Your part: %s.", who, role, what)
	if iteration > 1 {
		h += fmt.Sprintf(" This is revision %d of your part.", iteration)
	}
	return h + "\n\n"
}

func document(name, text string) string {
	if strings.TrimSpace(text) == "" {
		return name + ": (none yet)\n\n"
	}
	return fmt.Sprintf("%s:\n---\n%s\n---\n\n", name, strings.TrimRight(text, "\n"))
}

// feedback is the revision feedback section every agent sees: what the
// reviewer or the human asked for last, and every human rejection so far.
func feedback(s State) string {
	var sb strings.Builder
	if s.RevisionFeedback != "" {
		sb.WriteString("This is a revision. Address this feedback:\n")
		sb.WriteString(s.RevisionFeedback)
		sb.WriteString("\n\n")
	}
	if len(s.HumanFeedback) > 0 {
		sb.WriteString("Human reviewers rejected earlier versions. Address every point they made:\n")
		for _, h := range s.HumanFeedback {
			fmt.Fprintf(&sb, "- (review round %d) %s\n", h.Round, strings.ReplaceAll(strings.TrimSpace(h.Feedback), "\n", "\n  "))
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

const markdownOnly = "Reply with the Markdown document only: no preamble, no closing remarks.\n"

func architectPrompt(s State, iteration int) string {
	var sb strings.Builder
	sb.WriteString(header(RoleArchitect, "system architect", "the high-level design (HLD)", iteration))
	sb.WriteString(document("Project brief", s.ProjectBrief))
	if iteration > 1 {
		sb.WriteString(document("Your previous HLD", s.HLDDraft))
	}
	sb.WriteString(feedback(s))
	sb.WriteString(`Write the HLD with these sections: Overview; Goals and non-goals; Architecture (components and
their responsibilities); Data flow; Technology choices (with the reason for each); Security; Scalability and
availability; Risks. Be concrete about this project; at least a few hundred words.
`)
	sb.WriteString(markdownOnly)
	return sb.String()
}

func apiDataPrompt(s State, iteration int) string {
	var sb strings.Builder
	sb.WriteString(header(RoleAPIData, "API and data designer", "the low-level design (LLD): interfaces and data models", iteration))
	sb.WriteString(document("Project brief", s.ProjectBrief))
	sb.WriteString(document("High-level design", s.HLDDraft))
	sb.WriteString(feedback(s))
	sb.WriteString(`Write the LLD with these sections: API endpoints (method, path, request and response bodies, errors);
Data models (entities, fields, types, relations); Validation and error handling; Main sequences (step by step).
`)
	sb.WriteString(markdownOnly)
	return sb.String()
}

func databasePrompt(s State, iteration int) string {
	var sb strings.Builder
	sb.WriteString(header(RoleDatabase, "database designer", "the database schema", iteration))
	sb.WriteString(document("High-level design", s.HLDDraft))
	sb.WriteString(document("Low-level design", s.LLDDraft))
	sb.WriteString(feedback(s))
	sb.WriteString(`Write the database design: the PostgreSQL DDL in one sql code block (tables, keys, constraints,
indexes), then notes on each index's purpose, data retention and migrations.
`)
	sb.WriteString(markdownOnly)
	return sb.String()
}

func reviewerPrompt(s State, iteration int) string {
	var sb strings.Builder
	sb.WriteString(header(RoleReviewer, "design reviewer", "review the drafts for completeness, consistency and risk", iteration))
	sb.WriteString(document("Project brief", s.ProjectBrief))
	sb.WriteString(document("High-level design", s.HLDDraft))
	sb.WriteString(document("Low-level design", s.LLDDraft))
	sb.WriteString(document("Database design", s.DatabaseSchema))
	if len(s.HumanFeedback) > 0 {
		sb.WriteString(feedback(State{HumanFeedback: s.HumanFeedback}))
		sb.WriteString("Check that the drafts address the human reviewers' points.\n\n")
	}
	sb.WriteString(`Reply with one JSON object only, no prose and no code fences:
{"needs_revision": true or false,
 "issues": ["each problem that must be fixed before the document can go out"],
 "suggestions": ["improvements that are nice to have"],
 "summary": "one or two sentences",
 "score": a number from 1 to 10}
Set needs_revision to true only for issues that must be fixed.
`)
	return sb.String()
}

func writerPrompt(s State, iteration int) string {
	var sb strings.Builder
	sb.WriteString(header(RoleWriter, "technical writer", "assemble and format the final SDD", iteration))
	sb.WriteString(document("Project brief", s.ProjectBrief))
	sb.WriteString(document("High-level design", s.HLDDraft))
	sb.WriteString(document("Low-level design", s.LLDDraft))
	sb.WriteString(document("Database design", s.DatabaseSchema))
	if s.ForcedContinue && s.ReviewFeedback != nil {
		sb.WriteString("The reviewer's last issues are still open (the revision limit was reached); list them under Open issues:\n")
		for _, i := range s.ReviewFeedback.Issues {
			fmt.Fprintf(&sb, "- %s\n", i)
		}
		sb.WriteString("\n")
	}
	if len(s.HumanFeedback) > 0 {
		sb.WriteString(feedback(State{HumanFeedback: s.HumanFeedback}))
	}
	sb.WriteString(`Assemble one document titled "Software Design Document: <project name>" with numbered sections:
1. Introduction (purpose, scope); 2. High-level design; 3. Low-level design; 4. Database design;
5. Open issues; 6. Revision history. Keep every technical detail of the drafts; fix formatting and consistency.
`)
	sb.WriteString(markdownOnly)
	return sb.String()
}
