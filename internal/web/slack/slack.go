// Package slack answers Slack's interactivity callbacks (SPEC §12): POST
// /integrations/slack/actions as Slack sends it, verified with the signing
// secret, acknowledged at once; the outcome goes to the callback's
// response_url. Decisions go through the Decider as the Gatehouse user the
// Slack user maps to. It declares the Store it reads; it imports the
// request and response kernels, never another handler package nor
// internal/web.
package slack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/pgtext"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// Store is what the Slack callbacks read (postgres.Store).
type Store interface {
	// UserBySlack errors: auth.ErrNotFound.
	UserBySlack(ctx context.Context, slackID string) (*auth.User, error)
	Interrupt(ctx context.Context, id string) (*graph.Interrupt, error)
	Task(ctx context.Context, taskID string) (*graph.Task, error)
	Decisions(ctx context.Context, taskID string) ([]graph.Decision, error)
}

// Router adds a route with the least role it needs ("" public): the
// server's, which keeps every route's role.
type Router interface {
	Route(method, path string, role auth.Role, h echo.HandlerFunc)
}

// Deps is what the callbacks need.
type Deps struct {
	Store   Store
	Decider *auth.Decider
	// SigningSecret verifies the callbacks ("": the route answers 404).
	SigningSecret string
	// Client posts the outcomes to response_url; nil: one with a 15 s
	// timeout.
	Client *http.Client
	Logger *slog.Logger
}

// Handler serves the callbacks.
type Handler struct {
	store   Store
	decider *auth.Decider
	secret  string
	client  *http.Client
	log     *slog.Logger
	// answers holds the answers to callbacks in flight.
	answers sync.WaitGroup
}

// New returns the handler.
func New(d Deps) *Handler {
	h := &Handler{store: d.Store, decider: d.Decider, secret: d.SigningSecret, client: d.Client, log: d.Logger}
	if h.client == nil {
		h.client = &http.Client{Timeout: 15 * time.Second}
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h
}

// Register adds POST /integrations/slack/actions: signed by Slack, not a
// principal.
func (h *Handler) Register(r Router) {
	r.Route(http.MethodPost, "/integrations/slack/actions", "", h.actions)
}

// Wait waits for the answers to callbacks in flight (server shutdown).
func (h *Handler) Wait() { h.answers.Wait() }

// slackWindow is how old a callback's timestamp may be.
const slackWindow = 5 * time.Minute

// VerifySlack checks X-Slack-Signature: v0=<hex HMAC-SHA256(secret,
// "v0:" + timestamp + ":" + body)> with the timestamp within 5 minutes of
// now.
func VerifySlack(secret, timestamp, signature string, body []byte, now time.Time) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return errors.New("X-Slack-Request-Timestamp is missing or not a number")
	}
	if d := now.Sub(time.Unix(ts, 0)); d > slackWindow || d < -slackWindow {
		return errors.New("X-Slack-Request-Timestamp is more than 5 minutes from now")
	}
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "v0:%s:", timestamp)
	m.Write(body)
	want := "v0=" + hex.EncodeToString(m.Sum(nil))
	if !hmac.Equal([]byte(signature), []byte(want)) {
		return errors.New("X-Slack-Signature does not match")
	}
	return nil
}

// slackPayload is the part of a block_actions callback we read.
type slackPayload struct {
	Type string `json:"type"`
	User struct {
		ID       string `json:"id"`
		Username string `json:"username"`
	} `json:"user"`
	ResponseURL string `json:"response_url"`
	Actions     []struct {
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
	} `json:"actions"`
}

// actions: POST /integrations/slack/actions.
func (h *Handler) actions(c echo.Context) error {
	if h.secret == "" {
		return &response.Error{Status: http.StatusNotFound, Code: response.CodeNotFound, Message: "Slack is not configured (GATEHOUSE_SLACK_SIGNING_SECRET)"}
	}
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, 1<<20))
	if err != nil {
		return err
	}
	hdr := c.Request().Header
	if err := VerifySlack(h.secret, hdr.Get("X-Slack-Request-Timestamp"), hdr.Get("X-Slack-Signature"), body, time.Now()); err != nil {
		return &response.Error{Status: http.StatusUnauthorized, Code: response.CodeUnauthorized, Message: err.Error()}
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return response.BadRequest("payload", "the body is not a form")
	}
	var p slackPayload
	if err := json.Unmarshal([]byte(form.Get("payload")), &p); err != nil {
		return response.BadRequest("payload", "payload is not JSON")
	}
	if field, problem := badText(form); problem != "" {
		// Text that cannot be stored (U+0000, invalid UTF-8) decides
		// nothing. The person who clicked is told so where Slack shows
		// it, in an ephemeral message, unless the response_url is what is
		// wrong: then the 400 is all there is (Slack marks the button).
		if field == "payload.response_url" || p.ResponseURL == "" {
			return response.BadRequest(field, "%s %s; nothing was decided", field, problem)
		}
		h.answer(p.ResponseURL, func(context.Context) map[string]any {
			return ephemeral(fmt.Sprintf("Nothing was decided: the callback's %s %s.", field, problem))
		})
		return c.NoContent(http.StatusOK)
	}
	if p.Type != "block_actions" || len(p.Actions) == 0 {
		// Nothing of ours (another kind of interaction): acknowledged.
		return c.NoContent(http.StatusOK)
	}
	a := p.Actions[0]
	if a.ActionID != "approve" {
		// The link button ("Reject with feedback…") opens the desk;
		// Slack still sends its click.
		return c.NoContent(http.StatusOK)
	}
	if _, err := url.Parse(p.ResponseURL); err != nil || p.ResponseURL == "" {
		return response.BadRequest("response_url", "is missing")
	}
	// Slack wants its answer within 3 s: the decision and its outcome
	// travel to response_url after the acknowledgement.
	h.answer(p.ResponseURL, func(ctx context.Context) map[string]any {
		return h.decide(ctx, p.User.ID, strings.TrimSpace(a.Value))
	})
	return c.NoContent(http.StatusOK)
}

// answer posts what msg returns to a callback's response_url, after the
// acknowledgement (Wait waits for it).
func (h *Handler) answer(responseURL string, msg func(context.Context) map[string]any) {
	h.answers.Add(1)
	go func() {
		defer h.answers.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b, _ := json.Marshal(msg(ctx))
		if code, err := notify.PostJSON(ctx, h.client, responseURL, b); err != nil || code >= 300 {
			h.log.Warn("answering a Slack callback", "status", code, "error", err)
		}
	}()
}

// badText finds the first text of a callback's form that PostgreSQL could
// not store (pgtext): a field of the form, or one of its payload's JSON
// ("payload.user.id", "payload.actions[0].value"); problem "" when none.
func badText(form url.Values) (field, problem string) {
	if field, problem := pgtext.JSON([]byte(form.Get("payload"))); problem != "" {
		return strings.TrimSuffix("payload."+field, "."), problem
	}
	name, problem := pgtext.Values(form)
	if problem != "" && name == "" {
		name = "form"
	}
	return name, problem
}

func ephemeral(text string) map[string]any {
	return map[string]any{"response_type": "ephemeral", "replace_original": false, "text": text}
}

// decide approves interrupt itrID as the user Slack user slackID maps
// to, and returns what to post to response_url.
func (h *Handler) decide(ctx context.Context, slackID, itrID string) map[string]any {
	u, err := h.store.UserBySlack(ctx, slackID)
	if errors.Is(err, auth.ErrNotFound) {
		return ephemeral(fmt.Sprintf("Your Slack user (%s) is not linked to a Gatehouse user, so nothing was decided. "+
			"An admin can link it: gatehouse users slack NAME %s", slackID, slackID))
	}
	if err != nil {
		h.log.Error("slack user lookup", "error", err)
		return ephemeral("Gatehouse could not look you up; nothing was decided. Try the task page.")
	}
	if u.Disabled {
		return ephemeral(fmt.Sprintf("Gatehouse user %s is disabled; nothing was decided.", u.Username))
	}
	itr, err := h.store.Interrupt(ctx, itrID)
	if err != nil {
		return ephemeral("That decision is not known to Gatehouse; nothing was decided.")
	}
	task, err := h.store.Task(ctx, itr.TaskID)
	if err != nil {
		return ephemeral("That task is not known to Gatehouse; nothing was decided.")
	}
	p := auth.UserPrincipal(*u)
	out, err := h.decider.DecideOn(ctx, p, auth.Subject{Task: task, Interrupt: itr},
		graph.DecisionInput{InterruptID: itr.ID, Action: graph.ActionApprove})
	kind := notify.KindLabel(itr.Kind)
	var (
		fb *auth.ForbiddenError
		cf *graph.ConflictError
		ve *graph.ValidationError
	)
	switch {
	case err == nil:
	case errors.As(err, &fb):
		return ephemeral("Not approved: " + fb.Reason)
	case errors.As(err, &cf) && cf.Holder != "":
		// Claimed by someone else (SPEC §11): the button works again once
		// the claim is released or ends.
		return ephemeral(fmt.Sprintf("Not approved: %s has claimed this %s; only they may decide it while they hold it. "+
			"Try again once they release it or the claim ends.", cf.Holder, kind))
	case errors.As(err, &cf):
		decs, derr := h.store.Decisions(ctx, task.ID)
		if derr == nil {
			for _, d := range decs {
				if d.InterruptID == itr.ID {
					return ephemeral(fmt.Sprintf("Nothing more to decide: %s %s this %s at %s.", d.DecidedBy,
						response.Verb(d.Action), kind, d.DecidedAt.UTC().Format(time.RFC3339)))
				}
			}
		}
		return ephemeral(fmt.Sprintf("Nothing more to decide: this %s is %s.", kind, cf.Status))
	case errors.As(err, &ve):
		return ephemeral("Not approved: " + response.DecisionMessage(ve))
	default:
		h.log.Error("slack decision", "error", err)
		return ephemeral("Gatehouse could not record the decision; try the task page.")
	}
	title := notify.SlackEscape(task.Title)
	if out.Pending() {
		return ephemeral(fmt.Sprintf("Your approval of %s (%s) is recorded: %s; it waits for another approver.",
			kind, title, out.Progress()))
	}
	text := fmt.Sprintf("✅ *%s* approved %s of %s at %s.", notify.SlackEscape(p.Name), kind, title,
		out.Decision.DecidedAt.UTC().Format(time.RFC3339))
	return map[string]any{"replace_original": true, "text": text,
		"blocks": []any{map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": text}}}}
}
