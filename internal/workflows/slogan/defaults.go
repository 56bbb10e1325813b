package slogan

import (
	"fmt"
	"regexp"
	"strconv"
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
// the writer answers the last review as a copywriter would: a length it
// asks for ("under 6 words", "at most four words", "shorter") gives a
// slogan that keeps to it; other feedback gives another wording built
// around the review's own key word. ok is false for a role that is not
// one of the workflow's.
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
		first := fmt.Sprintf(templates[i], product)
		if len(fb) == 0 {
			return first, true
		}
		last := fb[len(fb)-1]
		if limit, ok := wordLimit(last, len(strings.Fields(first))); ok {
			return shortSlogan(userInput, last, limit), true
		}
		if k := agent.Nouns(last, 8); len(k) > 0 {
			around := []string{"%[1]s, Now With %[2]s.", "%[1]s: All About %[2]s.", "Real %[2]s. Real %[1]s."}
			return fmt.Sprintf(around[agent.Pick(last, len(around))], product, agent.TitleCase(k[len(k)-1])), true
		}
		return strings.TrimSuffix(fmt.Sprintf(templates[(i+1+agent.Pick(last, len(templates)-1))%len(templates)], product), ".") + "!", true
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

// numberWord matches a count of words written as digits or in words.
const numberWord = `(\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)`

var (
	// "under 6 words", "fewer than five words", "less than 6 words"
	belowWords = regexp.MustCompile(`(?i)\b(?:under|fewer than|less than|below|shorter than)\s+` + numberWord + `\s+words?\b`)
	// "at most 5 words", "no more than five words", "max 4 words",
	// "5 words or fewer", "in three words", "4 words max"
	atMostWords = regexp.MustCompile(`(?i)\b(?:at most|no more than|not more than|max(?:imum)?(?: of)?|up to|within|in|only|just)\s+` +
		numberWord + `\s+words?\b|\b` + numberWord + `\s+words?\s+(?:or fewer|or less|max(?:imum)?|at most|tops|long)\b`)
	// "shorter", "too long", "fewer words", "more concise", "punchier"
	shorterWords = regexp.MustCompile(`(?i)\b(?:shorter|too long|fewer words|concise|punchier|snappier|tighter|trim it|cut it down)\b`)
)

var numberWords = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
	"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}

func count(s string) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return numberWords[strings.ToLower(s)]
}

// wordLimit is the most words a review allows the next slogan: "under N
// words" allows N-1, "at most N words" N, "shorter" fewer than before
// (the earlier slogan had was words). ok is false when the review says
// nothing of length.
func wordLimit(review string, was int) (limit int, ok bool) {
	if m := belowWords.FindStringSubmatch(review); m != nil {
		return max(count(m[1])-1, 1), true
	}
	if m := atMostWords.FindStringSubmatch(review); m != nil {
		n := count(m[1])
		if m[1] == "" {
			n = count(m[2])
		}
		return max(n, 1), true
	}
	if shorterWords.MatchString(review) {
		return max(min(was-2, 4), 2), true
	}
	return 0, false
}

// shortSlogan is a slogan of at most limit words: the product's name (its
// first keywords, as many as fit) in a short frame.
func shortSlogan(userInput, review string, limit int) string {
	frames := []string{"%s, Done Right.", "Think %s.", "%s. Simply Better.", "Just %s.", "%s Works.", "Pure %s."}
	name := agent.Keywords(userInput, 3)
	if len(name) == 0 {
		name = []string{"your", "product"}
	}
	start := agent.Pick(userInput+"\n"+review, len(frames))
	for k := len(name); k >= 1; k-- {
		product := agent.TitleCase(strings.Join(name[:k], " "))
		for j := range frames {
			s := fmt.Sprintf(frames[(start+j)%len(frames)], product)
			if len(strings.Fields(s)) <= limit {
				return s
			}
		}
	}
	return agent.TitleCase(strings.Join(name[:min(limit, len(name))], " ")) + "."
}
