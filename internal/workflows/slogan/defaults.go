package slogan

import (
	"fmt"
	"strings"

	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
)

// BuiltinReply is the scripted provider's reply of role for a product
// (scripted.Defaults): a slogan made of the product's own words for the
// writer, an approving review (SHIP IT!) for the reviewer. ok is false
// for a role that is not one of the workflow's.
func BuiltinReply(role, userInput string) (reply string, ok bool) {
	product := agent.Name(userInput, "Your Product")
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
		return fmt.Sprintf(templates[agent.Pick(userInput, len(templates))], product), true
	case RoleReviewer:
		reviews := []string{
			"Clear, rhythmic and specific about %s. SHIP IT!",
			"Memorable, and it sells %s in a few words. SHIP IT!",
			"Short, positive and easy to say out loud; it fits %s. SHIP IT!",
		}
		return fmt.Sprintf(reviews[agent.Pick(userInput, len(reviews))], strings.ToLower(product)), true
	}
	return "", false
}
