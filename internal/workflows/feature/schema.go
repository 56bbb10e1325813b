package feature

import (
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// kind is what a schema node accepts.
type kind int

const (
	kindMap       kind = iota + 1
	kindList           // a sequence
	kindText           // a non-null scalar (string, number, …), non-empty
	kindInt            // an integer scalar
	kindTextOrMap      // a text scalar or a mapping matching fields
)

// schema is a tiny structural schema for the YAML documents: required keys
// and their types, checked on the yaml.Node tree so that every problem
// carries its line.
type schema struct {
	kind     kind
	fields   []field // kindMap, kindTextOrMap
	items    *schema // kindList
	minItems int     // kindList
}

type field struct {
	name     string
	s        *schema
	required bool
}

func req(name string, s *schema) field { return field{name: name, s: s, required: true} }
func opt(name string, s *schema) field { return field{name: name, s: s} }

var (
	textS = &schema{kind: kindText}
	intS  = &schema{kind: kindInt}
)

func mapOf(fields ...field) *schema { return &schema{kind: kindMap, fields: fields} }
func listOf(items *schema, minItems int) *schema {
	return &schema{kind: kindList, items: items, minItems: minItems}
}

// The documents' schemas. Optional keys are checked when present; unknown
// keys are allowed (models add context, reviewers add notes).
var (
	feedbackS = mapOf(req("phase", textS), req("iteration", intS), req("feedback", textS))

	// specAnalyzeS is spec.yaml after analyze.
	specAnalyzeS = mapOf(
		req("name", textS), req("summary", textS),
		opt("rejectionFeedback", listOf(feedbackS, 0)),
	)
	// requirementS is one requirement: a sentence, or {id, description}.
	requirementS = &schema{kind: kindTextOrMap, fields: []field{opt("id", textS), req("description", textS)}}
	// specRequirementsS is spec.yaml after requirements.
	specRequirementsS = mapOf(
		req("name", textS), req("summary", textS),
		req("requirements", listOf(requirementS, 1)),
		opt("acceptanceCriteria", listOf(textS, 0)),
		opt("openQuestions", listOf(&schema{kind: kindTextOrMap, fields: []field{req("question", textS)}}, 0)),
		opt("rejectionFeedback", listOf(feedbackS, 0)),
	)
	researchS = mapOf(
		opt("summary", textS),
		req("decisions", listOf(mapOf(req("title", textS), req("chosen", textS), opt("rationale", textS),
			opt("alternatives", listOf(textS, 0))), 1)),
	)
	planTaskS = &schema{kind: kindTextOrMap, fields: []field{opt("id", textS), req("title", textS),
		opt("description", textS), opt("dependsOn", listOf(textS, 0))}}
	planS = mapOf(
		opt("summary", textS),
		req("phases", listOf(mapOf(req("id", textS), req("name", textS), opt("description", textS),
			req("tasks", listOf(planTaskS, 1))), 1)),
	)
	tasksS = mapOf(
		req("tasks", listOf(mapOf(req("id", textS), req("phaseId", textS), req("title", textS),
			opt("description", textS), opt("state", textS), opt("dependsOn", listOf(textS, 0))), 1)),
	)
	featureS = mapOf(
		req("status", mapOf(
			req("completedPhases", listOf(textS, 0)),
			opt("phaseTimings", listOf(mapOf(req("phase", textS), req("startedAt", textS),
				req("completedAt", textS), req("durationMs", intS)), 0)),
		)),
	)
)

// check returns every problem of n against s, each "line N: path: problem".
func (s *schema) check(path string, n *yaml.Node) []string {
	n = deref(n)
	where := func(msg string) string {
		p := path
		if p == "" {
			p = "document"
		}
		return fmt.Sprintf("line %d: %s %s", n.Line, p, msg)
	}
	switch s.kind {
	case kindText:
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			return []string{where("must be text, got " + describe(n))}
		}
		if strings.TrimSpace(n.Value) == "" {
			return []string{where("must not be empty")}
		}
	case kindInt:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			return []string{where("must be an integer, got " + describe(n))}
		}
	case kindList:
		if n.Kind != yaml.SequenceNode {
			if s.minItems > 0 {
				return []string{where("must be a non-empty list, got " + describe(n))}
			}
			return []string{where("must be a list, got " + describe(n))}
		}
		if len(n.Content) < s.minItems {
			return []string{where("must be a non-empty list")}
		}
		var errs []string
		for i, it := range n.Content {
			errs = append(errs, s.items.check(fmt.Sprintf("%s[%d]", path, i), it)...)
		}
		return errs
	case kindTextOrMap:
		if n.Kind == yaml.ScalarNode {
			return textS.check(path, n)
		}
		if n.Kind != yaml.MappingNode {
			return []string{where("must be text or a mapping, got " + describe(n))}
		}
		return (&schema{kind: kindMap, fields: s.fields}).check(path, n)
	case kindMap:
		if n.Kind != yaml.MappingNode {
			return []string{where("must be a mapping, got " + describe(n))}
		}
		var errs []string
		for _, f := range s.fields {
			sub := path + "." + f.name
			if path == "" {
				sub = f.name
			}
			v := mapGet(n, f.name)
			if v == nil {
				if f.required {
					errs = append(errs, where("is missing required key "+f.name))
				}
				continue
			}
			errs = append(errs, f.s.check(sub, v)...)
		}
		return errs
	}
	return nil
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "nothing"
		case "!!str":
			return fmt.Sprintf("text %q", short(n.Value))
		default:
			return fmt.Sprintf("%s %s", strings.TrimPrefix(n.Tag, "!!"), short(n.Value))
		}
	}
	return "an unknown node"
}

func short(s string) string {
	if len(s) > 40 {
		s, _ = cut(s, 40)
		return s + "…"
	}
	return s
}

// DocumentError is a YAML document that does not parse or does not match
// its schema. Its text names the document and, where known, the line.
type DocumentError struct {
	// Artifact is the document's name, e.g. "spec.yaml".
	Artifact string
	// Parse is the parser's error (it carries "line N") when the document
	// does not parse; nil otherwise.
	Parse error
	// Problems are the schema violations, each "line N: path problem".
	Problems []string
}

func (e *DocumentError) Error() string {
	switch {
	case errors.Is(e.Parse, errEmpty):
		return e.Artifact + " is empty"
	case e.Parse != nil:
		return fmt.Sprintf("%s does not parse: %v", e.Artifact, e.Parse)
	case len(e.Problems) == 0:
		return e.Artifact + " is invalid"
	default:
		return fmt.Sprintf("%s is invalid: %s", e.Artifact, strings.Join(e.Problems, "; "))
	}
}

// Unwrap returns the parse error.
func (e *DocumentError) Unwrap() error { return e.Parse }

var errEmpty = errors.New("the document is empty")

// parseDoc parses text as a YAML document and returns its root node.
func parseDoc(text string) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, withLine(err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, errEmpty
	}
	return deref(doc.Content[0]), nil
}

// validateDoc parses text and checks it against s.
func validateDoc(artifact, text string, s *schema) (*yaml.Node, error) {
	root, err := parseDoc(text)
	if err != nil {
		return nil, &DocumentError{Artifact: artifact, Parse: err}
	}
	if problems := s.check("", root); len(problems) > 0 {
		return root, &DocumentError{Artifact: artifact, Problems: problems}
	}
	return root, nil
}

// lineError is a parse error whose text names a line.
type lineError struct {
	msg string
	err error
}

func (e *lineError) Error() string { return e.msg }
func (e *lineError) Unwrap() error { return e.err }

// withLine makes sure a yaml.v3 parse error names a line: yaml.v3 leaves
// the line out when the problem is on the first one ("yaml: mapping values
// are not allowed in this context").
func withLine(err error) error {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "yaml: "); ok && !strings.HasPrefix(rest, "line ") && !strings.Contains(msg, "\n") {
		return &lineError{msg: "yaml: line 1: " + rest, err: err}
	}
	return err
}
