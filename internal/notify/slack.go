package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
)

// Slack posts raised interrupts to a Slack incoming webhook as Block Kit
// messages: the summary, an Approve button (answered at
// /integrations/slack/actions) and a link to reject with feedback on the
// desk.
type Slack struct {
	url       string
	publicURL string
	client    *http.Client
}

// NewSlack returns the Slack channel.
func NewSlack(webhookURL, publicURL string) *Slack {
	return &Slack{url: webhookURL, publicURL: strings.TrimRight(publicURL, "/"), client: &http.Client{Timeout: WebhookTimeout}}
}

// SlackEscape escapes text for Slack's mrkdwn (and plain text): &, <, >.
func SlackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// SlackMessage is the Block Kit message of a raised interrupt.
func SlackMessage(s *Subject, publicURL string) map[string]any {
	itr := s.Interrupt
	kind := KindLabel(itr.Kind)
	title := s.Task.Title
	if title == "" {
		title = s.Task.Workflow + " task " + s.Task.ID
	}
	head := fmt.Sprintf("*%s waits for a decision*\n%s (%s)", kind, SlackEscape(title), SlackEscape(s.Task.Workflow))
	if t := strings.TrimSpace(itr.Payload.Title); t != "" {
		head += "\n" + SlackEscape(t)
	}
	if q := strings.TrimSpace(itr.Payload.Question); q != "" {
		head += "\n>" + SlackEscape(q)
	}
	blocks := []any{map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": head}}}
	if a := itr.Payload.Artifact; a != nil && strings.TrimSpace(a.Content) != "" {
		sum, cut := Summarize(a.Content)
		if len(sum) > 2500 {
			sum, cut = strings.ToValidUTF8(sum[:2500], ""), true
		}
		text := fmt.Sprintf("*%s*\n```%s```", SlackEscape(a.Name), SlackEscape(sum))
		if cut {
			text += "\n_cut short: the whole document is on the task page_"
		}
		blocks = append(blocks, map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": text}})
	}
	taskURL := publicURL + "/tasks/" + s.Task.ID
	var elems []any
	if containsAction(itr.Payload.Actions, graph.ActionApprove) {
		elems = append(elems, map[string]any{"type": "button", "action_id": "approve", "style": "primary",
			"text": map[string]any{"type": "plain_text", "text": "Approve"}, "value": itr.ID})
	}
	label := "Reject with feedback…"
	if !containsAction(itr.Payload.Actions, graph.ActionReject) {
		label = "Answer on the task page…"
	}
	elems = append(elems, map[string]any{"type": "button", "action_id": "open", "url": taskURL + "#decide",
		"text": map[string]any{"type": "plain_text", "text": label}})
	blocks = append(blocks, map[string]any{"type": "actions", "block_id": "gatehouse:" + itr.ID, "elements": elems})
	return map[string]any{"text": fmt.Sprintf("%s waits for a decision: %s", kind, SlackEscape(title)), "blocks": blocks}
}

func containsAction(actions []string, a string) bool {
	for _, x := range actions {
		if x == a {
			return true
		}
	}
	return false
}

// Send implements Channel.
func (s *Slack) Send(ctx context.Context, d *Delivery, subj *Subject) Outcome {
	if d.Event != EventRaised || subj.Interrupt == nil {
		return Outcome{OK: true}
	}
	if subj.Interrupt.Status != graph.InterruptPending {
		// Decided before it could be posted: nothing to ask any more.
		return Outcome{Err: errors.New("the interrupt was decided before it was posted"), Permanent: true}
	}
	body, err := json.Marshal(SlackMessage(subj, s.publicURL))
	if err != nil {
		return Outcome{Err: err, Permanent: true}
	}
	code, err := PostJSON(ctx, s.client, s.url, body)
	out := Outcome{StatusCode: code, Err: err}
	switch {
	case err != nil:
	case code >= 200 && code < 300:
		out.OK = true
	case code == http.StatusTooManyRequests:
		out.Err, out.RetryAfter = errors.New("429 from Slack"), 30*time.Second
	case code >= 400 && code < 500:
		out.Err, out.Permanent = fmt.Errorf("Slack answered %d", code), true
	default:
		out.Err = fmt.Errorf("Slack answered %d", code)
	}
	return out
}

// PostJSON posts body and returns the status code.
func PostJSON(ctx context.Context, c *http.Client, url string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, WebhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}
