package feature

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// The documents of a feature, named as in the seed's spec directory.
const (
	SpecFile           = "spec.yaml"
	ResearchFile       = "research.yaml"
	PlanFile           = "plan.yaml"
	TasksFile          = "tasks.yaml"
	FeatureFile        = "feature.yaml"
	ImplementationFile = "implementation.md"
	MergeFile          = "merge.md"

	ContentYAML     = "application/yaml"
	ContentMarkdown = "text/markdown"
)

// Feedback is one rejection recorded in spec.yaml's rejectionFeedback.
type Feedback struct {
	// Phase is the gated node that was rejected (requirements, plan, merge).
	Phase string `yaml:"phase" json:"phase"`
	// Iteration is the iteration of the node run that was rejected.
	Iteration int    `yaml:"iteration" json:"iteration"`
	Feedback  string `yaml:"feedback" json:"feedback"`
}

// PhaseTiming is one entry of feature.yaml's status.phaseTimings: one
// producer node run, named by its iteration-aware phase (requirements,
// requirements:2, …).
type PhaseTiming struct {
	Phase       string `yaml:"phase" json:"phase"`
	StartedAt   string `yaml:"startedAt" json:"startedAt"`
	CompletedAt string `yaml:"completedAt" json:"completedAt"`
	DurationMS  int64  `yaml:"durationMs" json:"durationMs"`
}

type featureDoc struct {
	Feature struct {
		Name        string `yaml:"name"`
		Description string `yaml:"description"`
	} `yaml:"feature"`
	Status featureStatus `yaml:"status"`
}

type featureStatus struct {
	Phase           string        `yaml:"phase"`
	CompletedPhases []string      `yaml:"completedPhases"`
	PhaseTimings    []PhaseTiming `yaml:"phaseTimings"`
}

func readFeature(text string) (*featureDoc, error) {
	var d featureDoc
	if err := yaml.Unmarshal([]byte(text), &d); err != nil {
		return nil, &DocumentError{Artifact: FeatureFile, Parse: err}
	}
	if d.Status.CompletedPhases == nil {
		d.Status.CompletedPhases = []string{}
	}
	if d.Status.PhaseTimings == nil {
		d.Status.PhaseTimings = []PhaseTiming{}
	}
	return &d, nil
}

func (d *featureDoc) render() string { return marshal(d) }

// CompletedPhases reads status.completedPhases from feature.yaml.
func CompletedPhases(featureYAML string) ([]string, error) {
	d, err := readFeature(featureYAML)
	if err != nil {
		return nil, err
	}
	return d.Status.CompletedPhases, nil
}

// PhaseTimings reads status.phaseTimings from feature.yaml.
func PhaseTimings(featureYAML string) ([]PhaseTiming, error) {
	d, err := readFeature(featureYAML)
	if err != nil {
		return nil, err
	}
	return d.Status.PhaseTimings, nil
}

// PhaseTimingNames lists the phase names of status.phaseTimings in order.
func PhaseTimingNames(featureYAML string) ([]string, error) {
	ts, err := PhaseTimings(featureYAML)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Phase
	}
	return out, nil
}

// RejectionFeedback reads rejectionFeedback from spec.yaml.
func RejectionFeedback(specYAML string) ([]Feedback, error) {
	var d struct {
		RejectionFeedback []Feedback `yaml:"rejectionFeedback"`
	}
	if err := yaml.Unmarshal([]byte(specYAML), &d); err != nil {
		return nil, &DocumentError{Artifact: SpecFile, Parse: err}
	}
	return d.RejectionFeedback, nil
}

func initialFeature(name, description string) string {
	d := &featureDoc{Status: featureStatus{Phase: "new", CompletedPhases: []string{}, PhaseTimings: []PhaseTiming{}}}
	d.Feature.Name, d.Feature.Description = name, description
	return d.render()
}

// completePhase marks phase (a node name) complete in feature.yaml, once,
// and appends the timing of the node run named runPhase.
func completePhase(featureYAML, phase, runPhase, name string, start, end time.Time) (string, error) {
	d, err := readFeature(featureYAML)
	if err != nil {
		return "", err
	}
	if name != "" {
		d.Feature.Name = name
	}
	d.Status.Phase = phase
	if !slices.Contains(d.Status.CompletedPhases, phase) {
		d.Status.CompletedPhases = append(d.Status.CompletedPhases, phase)
	}
	d.Status.PhaseTimings = append(d.Status.PhaseTimings, PhaseTiming{
		Phase:       runPhase,
		StartedAt:   start.UTC().Format(time.RFC3339Nano),
		CompletedAt: end.UTC().Format(time.RFC3339Nano),
		DurationMS:  end.Sub(start).Milliseconds(),
	})
	return d.render(), nil
}

// reopenPhase removes phase from completedPhases (a rejected gate).
func reopenPhase(featureYAML, phase string) (string, error) {
	d, err := readFeature(featureYAML)
	if err != nil {
		return "", err
	}
	d.Status.CompletedPhases = slices.DeleteFunc(d.Status.CompletedPhases, func(p string) bool { return p == phase })
	d.Status.Phase = phase
	return d.render(), nil
}

func initialSpec(name, description string) string {
	m := &yaml.Node{Kind: yaml.MappingNode}
	mapSet(m, "name", toNode(name))
	mapSet(m, "description", toNode(description))
	setPhase(m, "new")
	withFeedback(m, nil)
	return render(m)
}

// mergeMapping copies every key of src into dst except the skipped ones.
func mergeMapping(dst, src *yaml.Node, skip ...string) {
	for i := 0; i+1 < len(src.Content); i += 2 {
		k := src.Content[i].Value
		if slices.Contains(skip, k) {
			continue
		}
		mapSet(dst, k, src.Content[i+1])
	}
}

// withFeedback sets rejectionFeedback (as the last key) in the spec
// mapping m.
func withFeedback(m *yaml.Node, fb []Feedback) {
	if fb == nil {
		fb = []Feedback{}
	}
	mapDelete(m, "rejectionFeedback")
	mapSet(m, "rejectionFeedback", toNode(fb))
}

// setPhase sets the spec's phase, just before rejectionFeedback.
func setPhase(m *yaml.Node, phase string) {
	mapDelete(m, "phase")
	mapSet(m, "phase", toNode(phase))
}

// specWithFeedback rewrites spec.yaml's rejectionFeedback; a spec that
// does not parse is returned unchanged (the next run rebuilds it).
func specWithFeedback(specYAML string, fb []Feedback) string {
	root, err := parseDoc(specYAML)
	if err != nil || root.Kind != yaml.MappingNode {
		return specYAML
	}
	withFeedback(root, fb)
	return render(root)
}

// --- yaml.Node helpers ---

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func mapGet(m *yaml.Node, key string) *yaml.Node {
	m = deref(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return deref(m.Content[i+1])
		}
	}
	return nil
}

// mapText returns the scalar value at key, or "".
func mapText(m *yaml.Node, key string) string {
	if v := mapGet(m, key); v != nil && v.Kind == yaml.ScalarNode && v.Tag != "!!null" {
		return strings.TrimSpace(v.Value)
	}
	return ""
}

func mapSet(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

func mapDelete(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = slices.Delete(m.Content, i, i+2)
			return
		}
	}
}

func toNode(v any) *yaml.Node {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		panic(fmt.Sprintf("feature: encode %T as YAML: %v", v, err)) // only our own plain types get here
	}
	return &n
}

func render(n *yaml.Node) string { return marshal(n) }

func marshal(v any) string {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("feature: marshal YAML: %v", err)) // a parsed node or our own types always encode
	}
	_ = enc.Close()
	return buf.String()
}

// stripFences removes a Markdown code fence around the whole reply
// (```yaml … ```), which models like to add.
func stripFences(text string) string {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return text
	}
	nl := strings.IndexByte(t, '\n')
	if nl < 0 {
		return text
	}
	body := t[nl+1 : len(t)-3]
	if strings.Contains(body, "```") {
		return text // several blocks: not one fenced document
	}
	return strings.TrimRight(body, " \t\n") + "\n"
}
