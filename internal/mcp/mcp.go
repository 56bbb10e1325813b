// Package mcp is Gatehouse's MCP server (SPEC §19): at /mcp, over the
// Model Context Protocol's Streamable HTTP transport, coding agents,
// desktop assistants and agent frameworks ask people through Gatehouse
// durably (approval requests of §16) and start and read tasks, with the
// same services, the same wire types and the same error mapping as the
// JSON API.
//
// The server is stateless in the protocol's sense: no MCP session lives in
// a process, so any replica answers any call, and a restart loses nothing
// but the calls in flight (a request made is in PostgreSQL; get_request
// answers it afterwards). Nothing is decided over MCP: the agent asks;
// people decide on the desk, by email, in Slack or through the API.
//
// It imports graph, auth, requests and pgtext, and declares the Tasks it calls
// (internal/web's API code provides it); never internal/web nor its handler
// packages, nor postgres.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/pgtext"
)

// Path is where the server is mounted.
const Path = "/mcp"

// Via is the channel name events caused over MCP carry as data.via.
const Via = "mcp"

// Authenticator resolves a bearer token to its principal (auth.Service).
// Errors: auth.ErrUnauthenticated for no valid token.
type Authenticator interface {
	Bearer(ctx context.Context, token string) (auth.Principal, error)
}

var _ Authenticator = (*auth.Service)(nil)

// Tasks is what the task tools need from the JSON API, so that a task
// started over MCP is the one POST /api/v1/tasks starts and its JSON is
// §7's Task, written by the API's own code.
type Tasks interface {
	// Workflows describes every workflow this binary runs.
	Workflows() []graph.Description
	// StartTask creates a task as p (through Via) and returns its Task
	// JSON. Errors: the API's (unknown workflow, *graph.ValidationError…).
	StartTask(ctx context.Context, p auth.Principal, in StartTaskInput) (any, error)
	// Task returns the Task JSON of a task p may read. Errors:
	// graph.ErrTaskNotFound.
	Task(ctx context.Context, p auth.Principal, id string) (any, error)
}

// Problem is what an agent is told about a failed call: the API's error
// mapping of it.
type Problem struct {
	// Status is the HTTP status the API would answer (400, 403, 404, 409,
	// 422, 500…); 500 and above are not the caller's doing.
	Status  int
	Code    string
	Field   string
	Message string
}

// Deps is what the server needs.
type Deps struct {
	Auth  Authenticator
	Tasks Tasks
	// Requests serves the request tools (SPEC §16's service).
	Requests Requests
	// TaskSchema is the JSON Schema of §7's Task (the output of start_task
	// and get_task), made by the owner of the wire type with SchemaFor.
	TaskSchema any
	// Explain maps an error to what the API would answer (its one error
	// mapping).
	Explain func(error) Problem
	// Closing is closed when the server shuts down: calls that wait end at
	// once, answering the request as it stands (nil: never).
	Closing <-chan struct{}
	Logger  *slog.Logger
	Version string
	// ProgressEvery is how often a waiting call sends
	// notifications/progress (0: ProgressInterval).
	ProgressEvery time.Duration
}

// ProgressInterval is how often a waiting call reports progress when the
// client sent a progressToken (SPEC §19: at least every 10 s).
const ProgressInterval = 5 * time.Second

// Server is the MCP server: an http.Handler for Path.
type Server struct {
	d       Deps
	log     *slog.Logger
	srv     *sdk.Server
	handler http.Handler
}

// New builds the server and its tools.
func New(d Deps) *Server {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.ProgressEvery <= 0 {
		d.ProgressEvery = ProgressInterval
	}
	s := &Server{d: d, log: d.Logger}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "gatehouse", Title: "Gatehouse", Version: d.Version},
		&sdk.ServerOptions{
			Instructions: "Gatehouse asks people and records their answers durably. Use request_approval before " +
				"an action that needs a person's approval, and ask_human for a question; pass wait_seconds to wait " +
				"for the answer, and call get_request with wait_seconds again while the request is pending. " +
				"Nothing is decided over MCP: people decide on the Gatehouse desk, by email, in Slack or via the API.",
			Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}},
		})
	s.addTaskTools()
	s.addRequestTools()
	stream := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv },
		&sdk.StreamableHTTPOptions{Stateless: true, Logger: d.Logger})
	verify := sdkauth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		p, ok := ctx.Value(principalKey{}).(auth.Principal)
		if !ok {
			return nil, sdkauth.ErrInvalidToken
		}
		return &sdkauth.TokenInfo{UserID: p.Name, Extra: map[string]any{principalExtra: p}}, nil
	}, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	s.handler = s.authenticate(refuseBadText(verify(stream)))
	return s
}

// ServeHTTP serves MCP's Streamable HTTP transport.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

type principalKey struct{}

const principalExtra = "gatehouse.principal"

// authenticate admits a request with a valid bearer token (an API token or
// the bootstrap token); anything else is 401 with WWW-Authenticate: Bearer
// and the API's error body.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			unauthorized(w)
			return
		}
		p, err := s.d.Auth.Bearer(r.Context(), token)
		if errors.Is(err, auth.ErrUnauthenticated) {
			unauthorized(w)
			return
		}
		if err != nil {
			s.log.Error("mcp authentication", "error", err)
			writeError(w, http.StatusInternalServerError, "internal", "internal error")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// refuseBadText answers a message with text PostgreSQL cannot store
// (U+0000, or invalid UTF-8, which the SDK's decoder would silently turn
// into U+FFFD) before the SDK reads it: a tool call gets the tool error
// an agent reads, naming the argument ("bad_request: title: contains a
// NUL character…"), any other request a JSON-RPC invalid-params error.
// Nothing has been done.
func refuseBadText(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", "the request body could not be read")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		field, problem := pgtext.JSON(body)
		if problem == "" {
			next.ServeHTTP(w, r)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &msg)
		if len(msg.ID) == 0 || field == "id" {
			writeError(w, http.StatusBadRequest, "bad_request", strings.TrimSpace(field+" "+problem))
			return
		}
		reply := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
		if arg, ok := toolArgument(field); ok && msg.Method == "tools/call" {
			reply["result"] = map[string]any{"isError": true,
				"content": []any{map[string]string{"type": "text", "text": badArg(arg, "%s", problem).Error()}}}
		} else {
			reply["error"] = map[string]any{"code": -32602, "message": "invalid params: " + field + " " + problem}
		}
		b, _ := json.Marshal(reply)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
}

// toolArgument is the argument a tool call's field names
// ("params.arguments.input.goal" → "input.goal"; the arguments object
// itself → "arguments"), ok when field is within the arguments.
func toolArgument(field string) (string, bool) {
	rest, ok := strings.CutPrefix(field, "params.arguments")
	switch {
	case !ok:
		return "", false
	case rest == "":
		return "arguments", true
	case rest[0] == '.':
		return rest[1:], true
	case rest[0] == '[':
		return "arguments" + rest, true
	}
	return "", false
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="gatehouse"`)
	writeError(w, http.StatusUnauthorized, "unauthorized",
		"a valid bearer token is required (Authorization: Bearer <token>)")
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// principal is who makes a tool call; the role check of the tool follows.
func principal(req *sdk.CallToolRequest, min auth.Role) (auth.Principal, error) {
	var p auth.Principal
	if req != nil && req.Extra != nil && req.Extra.TokenInfo != nil {
		p, _ = req.Extra.TokenInfo.Extra[principalExtra].(auth.Principal)
	}
	if p.IsZero() {
		return p, &toolError{msg: "unauthenticated"}
	}
	if !p.Can(min) {
		return p, &toolError{msg: fmt.Sprintf("forbidden: this tool needs the %s role; %s is %s", min, p.Name, p.Role)}
	}
	return p, nil
}

// toolError is a tool result with isError: what the agent reads.
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

// fail turns an error of a service into the tool error the agent reads:
// the API's mapping, naming the field; internal errors are logged and
// shown as "internal error".
func (s *Server) fail(tool string, err error) error {
	var te *toolError
	if errors.As(err, &te) {
		return te
	}
	p := Problem{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}
	if s.d.Explain != nil {
		p = s.d.Explain(err)
	}
	if p.Status >= 500 {
		s.log.Error("mcp tool failed", "tool", tool, "error", err)
		return &toolError{msg: "internal error"}
	}
	msg := p.Message
	if p.Field != "" && !strings.Contains(msg, p.Field) {
		msg = p.Field + ": " + msg
	}
	return &toolError{msg: p.Code + ": " + msg}
}

// badArg is a bad argument named by its field.
func badArg(field, format string, args ...any) error {
	return &toolError{msg: "bad_request: " + field + ": " + fmt.Sprintf(format, args...)}
}
