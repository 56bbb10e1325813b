package sdd

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
)

// BuiltinReply is the scripted provider's reply of role for a project
// brief (scripted.Defaults): Markdown designs for the architect, the API
// and data designer, the database designer and the writer, a JSON review
// (no revision needed) for the reviewer, each naming the brief's own
// subject. ok is false for a role that is not one of the workflow's.
func BuiltinReply(role, brief string) (reply string, ok bool) {
	return Builtin(role, brief, nil)
}

// Builtin is BuiltinReply answering feedback (human rejections and the
// reviewer's issues, oldest first): each draft gains a section saying how
// it answers each point, the final document a revision-history row per
// point, and the review says which points it checked — so a rejection in
// the demo changes the document the reviewer sees.
func Builtin(role, brief string, feedback []string) (reply string, ok bool) {
	d := newDemo(brief)
	d.feedback = agent.Points(feedback)
	switch role {
	case RoleArchitect:
		return d.hld(), true
	case RoleAPIData:
		return d.lld(), true
	case RoleDatabase:
		return d.database(), true
	case RoleReviewer:
		b, _ := json.Marshal(Review{NeedsRevision: false, Issues: []string{},
			Suggestions: []string{
				fmt.Sprintf("State the retention period of %s records explicitly.", d.entity),
				"Add a load test target (requests per second) to the scalability section.",
			},
			Summary: fmt.Sprintf("The design of %s is complete and consistent; the API, data model and schema agree.%s", d.name, d.checked())})
		return string(b), true
	case RoleWriter:
		return d.sdd(), true
	}
	return "", false
}

// demo is what the built-in replies say about one brief.
type demo struct {
	name, summary, entity, second, store, style string
	// feedback is what this revision answers (none on a first draft).
	feedback []string
}

// answered is a Markdown section saying how this draft answers each point
// of feedback ("" for none).
func (d demo) answered(what string) string {
	if len(d.feedback) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString("\n## Review feedback addressed\n")
	for _, f := range d.feedback {
		fmt.Fprintf(&sb, "- %s: %s\n", what, f)
	}
	return sb.String()
}

// checked is the review's sentence about the feedback it checked.
func (d demo) checked() string {
	if len(d.feedback) == 0 {
		return ""
	}
	return " The revision answers the review feedback: " + strings.Join(d.feedback, "; ") + "."
}

// history is the final document's revision-history rows after 1.0.
func (d demo) history() string {
	var sb strings.Builder
	for i, f := range d.feedback {
		fmt.Fprintf(&sb, "| 1.%d | Revised for review feedback: %s |\n", i+1, strings.ReplaceAll(f, "|", "/"))
	}
	return sb.String()
}

func newDemo(brief string) demo {
	d := demo{
		name:    agent.Name(brief, "The Service"),
		summary: agent.FirstSentence(brief, 240),
		entity:  ident(agent.Noun(brief, 0, "record")),
		second:  ident(agent.Noun(brief, 1, "event")),
	}
	if d.summary == "" {
		d.summary = "A new service."
	}
	if d.second == d.entity {
		d.second = "event"
	}
	stores := []string{"PostgreSQL 16", "PostgreSQL with logical replication", "PostgreSQL and a Redis cache"}
	styles := []string{"a modular monolith", "two services behind an API gateway", "a stateless API with background workers"}
	i := agent.Pick(brief, 3)
	d.store, d.style = stores[i], styles[(i+1)%3]
	return d
}

// ident is a keyword as a singular SQL-friendly noun.
func ident(w string) string { return strings.ReplaceAll(singular(w), "-", "_") }

func singular(w string) string {
	if strings.HasSuffix(w, "ies") && len(w) > 4 {
		return w[:len(w)-3] + "y"
	}
	if strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && len(w) > 4 {
		return w[:len(w)-1]
	}
	return w
}

func (d demo) hld() string {
	return fmt.Sprintf(`# High-level design: %[1]s

## Overview
%[2]s The system is built as %[3]s; %[4]s is the system of record.

## Goals and non-goals
- Goal: manage %[5]ss and their %[6]ss reliably, with an audit trail of every change.
- Goal: respond within 200 ms at the 95th percentile for reads.
- Non-goal: offline clients; analytics beyond operational reports.

## Architecture
- **API service**: validates requests, enforces authorization, owns the %[5]s lifecycle.
- **Worker**: processes %[6]ss asynchronously with retries and idempotency keys.
- **Store**: %[4]s; one schema, migrations applied at start-up.
- **Web UI**: server-rendered pages for operators.

## Data flow
1. A client calls the API; the request is validated and authorized.
2. The API writes the %[5]s and an outbox row in one transaction.
3. The worker picks up the outbox row and records the resulting %[6]s.

## Technology choices
- Go for the services: one static binary, strong concurrency support.
- %[4]s: transactions, constraints and JSON columns in one place.

## Security
Bearer tokens with roles; every write is audited; inputs are validated at the edge; secrets come from the environment.

## Scalability and availability
Stateless API replicas behind a load balancer; workers scale horizontally and claim work with SKIP LOCKED.

## Risks
- Outbox backlog under load: monitored with an alert on its age.
- Schema changes on large tables: additive migrations only.
%[7]s`, d.name, d.summary, d.style, d.store, d.entity, d.second, d.answered("Changed in the architecture"))
}

func (d demo) lld() string {
	return fmt.Sprintf(`# Low-level design: %[1]s

## API endpoints
| method | path | body | responses |
| --- | --- | --- | --- |
| POST | /api/v1/%[2]ss | {"name", "description"} | 201 %[3]s, 400 naming the field, 409 duplicate name |
| GET | /api/v1/%[2]ss?cursor=&limit= | | 200 {"items": [...], "next_cursor"} |
| GET | /api/v1/%[2]ss/{id} | | 200 %[3]s, 404 |
| PATCH | /api/v1/%[2]ss/{id} | partial fields, "version" | 200, 409 on a stale version |
| GET | /api/v1/%[2]ss/{id}/%[4]ss | | 200 list of %[4]ss |

Errors are {"error": {"code", "message"}}.

## Data models
- **%[3]s**: id (uuid), name (text, unique), description (text), status (draft | active | archived), version (int), created_at, updated_at.
- **%[5]s**: id (uuid), %[2]s_id (uuid, references %[3]s), kind (text), payload (json), created_at.

## Validation and error handling
Names are 1–200 characters; unknown fields are refused; optimistic locking with the version field.

## Main sequences
1. Create: validate → insert %[2]s and outbox row in one transaction → 201.
2. Update: compare version → update → record one more %[4]s → 200.
%[6]s`, d.name, d.entity, agent.TitleCase(d.entity), d.second, agent.TitleCase(d.second), d.answered("Changed in the API and data models"))
}

func (d demo) database() string {
	return fmt.Sprintf("# Database design: %[1]s\n\n```sql\n"+`CREATE TABLE %[2]ss (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200),
    description text NOT NULL DEFAULT '',
    status      text NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'active', 'archived')),
    version     integer NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE %[3]ss (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    %[2]s_id   uuid NOT NULL REFERENCES %[2]ss (id) ON DELETE CASCADE,
    kind       text NOT NULL,
    payload    jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX %[3]ss_by_%[2]s ON %[3]ss (%[2]s_id, created_at);

CREATE TABLE outbox (
    id         bigserial PRIMARY KEY,
    topic      text NOT NULL,
    payload    jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
`+"```\n\n"+`## Notes
- %[3]ss_by_%[2]s serves the history of one %[2]s, newest last.
- Archived %[2]ss are kept; %[3]ss older than two years are moved to cold storage.
- Migrations are additive and run with goose at start-up.
%[4]s`, d.name, d.entity, d.second, d.answered("Changed in the schema"))
}

func (d demo) sdd() string {
	strip := func(doc string) string {
		// Drop the draft's own title; demote its sections one level.
		lines := strings.Split(strings.TrimSpace(doc), "\n")
		var out []string
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "## ") {
				l = "#" + l
			}
			out = append(out, l)
		}
		return strings.TrimSpace(strings.Join(out, "\n"))
	}
	return fmt.Sprintf(`# Software Design Document: %[1]s

## 1. Introduction
**Purpose.** This document describes the design of %[1]s.

**Scope.** %[2]s

## 2. High-level design
%[3]s

## 3. Low-level design
%[4]s

## 4. Database design
%[5]s

## 5. Open issues
- None blocking. The retention period of %[6]s records is to be confirmed with the product owner.

## 6. Revision history
| version | change |
| --- | --- |
| 1.0 | First complete version, reviewed. |
%[7]s`, d.name, d.summary, strip(d.hld()), strip(d.lld()), strip(d.database()), d.entity, d.history())
}
