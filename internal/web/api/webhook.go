package api

import (
	"encoding/json"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/notify"
)

// webhookPayload is a webhook's body (SPEC §12): the task, the interrupt
// and its decision as §7 shows them, and links when GATEHOUSE_PUBLIC_URL
// is set.
type webhookPayload struct {
	Type      string      `json:"type"`
	Timestamp string      `json:"timestamp"`
	Data      webhookData `json:"data"`
}

type webhookData struct {
	Task      Task              `json:"task"`
	Interrupt *Interrupt        `json:"interrupt,omitempty"`
	Decision  *Decision         `json:"decision,omitempty"`
	Links     map[string]string `json:"links,omitempty"`
}

// WebhookBody builds webhook bodies in the API's JSON shapes; publicURL
// ("" for none) is the base of their links.
func WebhookBody(publicURL string) notify.WebhookBody {
	return func(event string, at time.Time, s *notify.Subject) (json.RawMessage, error) {
		var pending *graph.Interrupt
		if s.Interrupt != nil && s.Interrupt.Status == graph.InterruptPending {
			pending = s.Interrupt
		}
		p := webhookPayload{Type: event, Timestamp: stamp(at), Data: webhookData{Task: taskJSON(s.Task, pending)}}
		if s.Interrupt != nil {
			itr := interruptJSON(s.Interrupt)
			p.Data.Interrupt = &itr
		}
		if s.Decision != nil {
			d := decisionJSON(s.Decision)
			p.Data.Decision = &d
		}
		if publicURL != "" {
			p.Data.Links = map[string]string{"task": publicURL + "/tasks/" + s.Task.ID}
			if s.Interrupt != nil {
				p.Data.Links["inbox"] = publicURL + "/inbox"
			}
		}
		return json.Marshal(p)
	}
}
