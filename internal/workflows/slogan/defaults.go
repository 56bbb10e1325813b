package slogan

import (
	"fmt"
	"strings"

	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
)

// BuiltinReply is Builtin with no feedback.
func BuiltinReply(role, userInput string) (reply string, ok bool) {
	return Builtin(role, userInput, nil)
}

// Builtin is the scripted provider's reply of role for a product
// (scripted.Defaults): a slogan made of the product's own words for the
// writer, an approving review (SHIP IT!) for the reviewer. With feedback
// the writer's slogan changes: another wording, ending on the review's
// own key word, so a rejection in the demo visibly answers. ok is false
// for a role that is not one of the workflow's.
func Builtin(role, userInput string, feedback []string) (reply string, ok bool) {
	product := agent.Name(userInput, "Your Product")
	fb := agent.Points(feedback)
	switch role {
	case RoleWriter:
		templates := []string{
			"%[1]s: Done Right, Made Simple.",
			"%[1]s You Can Trust, Every Single Day.",
			"Less Hassle, More %[1]s.",
			"%[1]s, Made for the Way You Live.",
			"Think %[1]s. Think Ahead.",
			"The Future of %[1]s Starts Here.",
		}
		i := agent.Pick(userInput, len(templates))
		if len(fb) == 0 {
			return fmt.Sprintf(templates[i], product), true
		}
		last := fb[len(fb)-1]
		slogan := strings.TrimSuffix(fmt.Sprintf(templates[(i+1+agent.Pick(last, len(templates)-1))%len(templates)], product), ".")
		if k := agent.Keywords(last, 8); len(k) > 0 {
			return fmt.Sprintf("%s — %s, As You Asked.", slogan, agent.TitleCase(k[len(k)-1])), true
		}
		return slogan + "!", true
	case RoleReviewer:
		reviews := []string{
			"Clear, rhythmic and specific about %s. SHIP IT!",
			"Memorable, and it sells %s in a few words. SHIP IT!",
			"Short, positive and easy to say out loud; it fits %s. SHIP IT!",
		}
		review := fmt.Sprintf(reviews[agent.Pick(userInput, len(reviews))], strings.ToLower(product))
		if len(fb) > 0 {
			review = fmt.Sprintf("It answers the last review (%q). %s", fb[len(fb)-1], review)
		}
		return review, true
	}
	return "", false
}
