package web

// Slack's interactivity callbacks (SPEC §12): POST
// /integrations/slack/actions as Slack sends it, verified with the signing
// secret, acknowledged at once; the outcome goes to the callback's
// response_url. Decisions go through the Decider as the Gatehouse user the
// Slack user maps to.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/notify"
)

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

// slackActions: POST /integrations/slack/actions.
func (s *Server) slackActions(c echo.Context) error {
	if s.slackSecret == "" {
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "Slack is not configured (GATEHOUSE_SLACK_SIGNING_SECRET)"}
	}
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, 1<<20))
	if err != nil {
		return err
	}
	h := c.Request().Header
	if err := VerifySlack(s.slackSecret, h.Get("X-Slack-Request-Timestamp"), h.Get("X-Slack-Signature"), body, time.Now()); err != nil {
		return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: err.Error()}
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return badRequest("payload", "the body is not a form")
	}
	var p slackPayload
	if err := json.Unmarshal([]byte(form.Get("payload")), &p); err != nil {
		return badRequest("payload", "payload is not JSON")
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
		return badRequest("response_url", "is missing")
	}
	// Slack wants its answer within 3 s: the decision and its outcome
	// travel to response_url after the acknowledgement.
	s.slackWG.Add(1)
	go func() {
		defer s.slackWG.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		msg := s.slackDecide(ctx, p.User.ID, strings.TrimSpace(a.Value))
		b, _ := json.Marshal(msg)
		if code, err := notify.PostJSON(ctx, s.slackClient, p.ResponseURL, b); err != nil || code >= 300 {
			s.log.Warn("answering a Slack callback", "status", code, "error", err)
		}
	}()
	return c.NoContent(http.StatusOK)
}

func ephemeral(text string) map[string]any {
	return map[string]any{"response_type": "ephemeral", "replace_original": false, "text": text}
}

// slackDecide approves interrupt itrID as the user Slack user slackID maps
// to, and returns what to post to response_url.
func (s *Server) slackDecide(ctx context.Context, slackID, itrID string) map[string]any {
	u, err := s.auth.Store().UserBySlack(ctx, slackID)
	if errors.Is(err, auth.ErrNotFound) {
		return ephemeral(fmt.Sprintf("Your Slack user (%s) is not linked to a Gatehouse user, so nothing was decided. "+
			"An admin can link it: gatehouse users slack NAME %s", slackID, slackID))
	}
	if err != nil {
		s.log.Error("slack user lookup", "error", err)
		return ephemeral("Gatehouse could not look you up; nothing was decided. Try the task page.")
	}
	if u.Disabled {
		return ephemeral(fmt.Sprintf("Gatehouse user %s is disabled; nothing was decided.", u.Username))
	}
	itr, err := s.store.Interrupt(ctx, itrID)
	if err != nil {
		return ephemeral("That decision is not known to Gatehouse; nothing was decided.")
	}
	task, err := s.store.Task(ctx, itr.TaskID)
	if err != nil {
		return ephemeral("That task is not known to Gatehouse; nothing was decided.")
	}
	p := auth.Principal{Name: u.Username, Role: u.Role, Kinds: u.Kinds, Kind: auth.KindUser, ID: u.ID}
	out, err := s.decider.DecideOn(ctx, p, auth.Subject{Task: task, Interrupt: itr},
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
		decs, derr := s.store.Decisions(ctx, task.ID)
		if derr == nil {
			for _, d := range decs {
				if d.InterruptID == itr.ID {
					return ephemeral(fmt.Sprintf("Nothing more to decide: %s %s this %s at %s.", d.DecidedBy,
						verb(d.Action), kind, d.DecidedAt.UTC().Format(time.RFC3339)))
				}
			}
		}
		return ephemeral(fmt.Sprintf("Nothing more to decide: this %s is %s.", kind, cf.Status))
	case errors.As(err, &ve):
		return ephemeral("Not approved: " + decisionMessage(ve))
	default:
		s.log.Error("slack decision", "error", err)
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
