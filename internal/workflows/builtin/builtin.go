// Package builtin assembles Gatehouse's five built-in workflows (feature,
// sdd, pm, slogan, analyze) over the LLM provider the settings name. The
// root package gatehouse serves them unless told WithoutBuiltins; the
// commands of cmd/web that need the workflows (run, tasks check) build
// them here too, so every entry point has the same definitions.
//
// The workflows themselves use only the public graph API.
//
// It imports the workflows, the LLM providers, config, auth and requests;
// never storage or the web packages.
package builtin

import (
	"fmt"
	"log/slog"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/config"
	"github.com/gatehousehq/gatehouse/internal/llm"
	"github.com/gatehousehq/gatehouse/internal/llm/ollama"
	"github.com/gatehousehq/gatehouse/internal/llm/openai"
	"github.com/gatehousehq/gatehouse/internal/llm/scripted"
	"github.com/gatehousehq/gatehouse/internal/requests"
	"github.com/gatehousehq/gatehouse/internal/workflows/analyze"
	"github.com/gatehousehq/gatehouse/internal/workflows/feature"
	"github.com/gatehousehq/gatehouse/internal/workflows/pm"
	"github.com/gatehousehq/gatehouse/internal/workflows/request"
	"github.com/gatehousehq/gatehouse/internal/workflows/sdd"
	"github.com/gatehousehq/gatehouse/internal/workflows/slogan"
)

// SettingError is a setting that cannot work (LLM_SCRIPT_FILE that does
// not parse, an unknown LLM_PROVIDER): the command line says it in one
// line and exits 2.
type SettingError struct {
	// Name is the environment variable.
	Name string
	// Problem says what is wrong with it.
	Problem string
}

// Error says "NAME: problem".
func (e *SettingError) Error() string { return e.Name + ": " + e.Problem }

// Provider makes the LLM provider of c: the scripted one (with its script
// file), Ollama or an OpenAI-compatible server. Errors: *SettingError.
func Provider(c config.LLM, log *slog.Logger) (llm.Provider, error) {
	switch c.Provider {
	case "scripted":
		var script *scripted.Script
		if c.ScriptFile != "" {
			s, err := scripted.LoadScript(c.ScriptFile)
			if err != nil {
				return nil, &SettingError{Name: "LLM_SCRIPT_FILE", Problem: err.Error()}
			}
			script = s
		}
		return scripted.New(scripted.Chain(feature.Builtin, sdd.Builtin, pm.Builtin,
			slogan.Builtin, analyze.Builtin), script), nil
	case ollama.Name:
		return ollama.New(ollama.Config{BaseURL: c.OllamaBaseURL, Model: c.OllamaModel, Temperature: c.OllamaTemp,
			Timeout: c.OllamaTimeout, Logger: log}), nil
	case openai.Name:
		return openai.New(openai.Config{BaseURL: c.OpenAIBaseURL, APIKey: c.OpenAIAPIKey, Model: c.OpenAIModel,
			Timeout: c.OpenAITimeout, MaxTokens: c.OpenAIMaxTokens, Logger: log}), nil
	default:
		return nil, &SettingError{Name: "LLM_PROVIDER", Problem: fmt.Sprintf("%q: want scripted, ollama or openai", c.Provider)}
	}
}

// Request compiles the workflow of approval requests (SPEC §16): every
// server runs it, WithoutBuiltins too, since /api/v1/requests makes its
// tasks.
func Request() (graph.Workflow, error) {
	r, err := request.New()
	if err != nil {
		return nil, err
	}
	return r, nil
}

// DeciderOptions are the options of every channel's Decider: it hands
// the tasks its decisions make runnable to worker (nil: none), and checks
// typed answers to approval requests (requests.CheckDecision).
func DeciderOptions(worker auth.Worker) []auth.DeciderOption {
	opts := []auth.DeciderOption{auth.WithDecisionCheck(requests.CheckDecision)}
	if worker != nil {
		opts = append(opts, auth.WithWorker(worker))
	}
	return opts
}

// Workflows compiles every built-in workflow over p: feature, sdd, pm,
// slogan (its default max_turns is OLLAMA_MAX_TURNS) and analyze, and the
// request workflow (Request).
func Workflows(p llm.Provider, c config.LLM) ([]graph.Workflow, error) {
	f, err := feature.New(feature.LLMExecutor(p))
	if err != nil {
		return nil, err
	}
	d, err := sdd.New(p)
	if err != nil {
		return nil, err
	}
	m, err := pm.New(p)
	if err != nil {
		return nil, err
	}
	var sloganOpts []slogan.Option
	if c.OllamaMaxTurns > 0 {
		sloganOpts = append(sloganOpts, slogan.WithMaxTurns(min(c.OllamaMaxTurns, slogan.MaxMaxTurns)))
	}
	s, err := slogan.New(p, sloganOpts...)
	if err != nil {
		return nil, err
	}
	a, err := analyze.New(p)
	if err != nil {
		return nil, err
	}
	r, err := Request()
	if err != nil {
		return nil, err
	}
	return []graph.Workflow{f, d, m, s, a, r}, nil
}
