package agent

import (
	"hash/fnv"
	"strings"
	"unicode"
)

// Helpers for built-in scripted replies: they vary with the task's subject
// so an offline demo reads like the real thing, and stay deterministic.

var stopWords = map[string]bool{
	"about": true, "after": true, "again": true, "also": true, "based": true, "because": true, "been": true,
	"before": true, "being": true, "between": true, "both": true, "build": true, "can": true, "could": true,
	"does": true, "each": true, "every": true, "from": true, "have": true, "into": true, "just": true,
	"like": true, "make": true, "makes": true, "many": true, "more": true, "most": true, "much": true,
	"must": true, "need": true, "needs": true, "only": true, "other": true, "over": true, "same": true,
	"should": true, "some": true, "such": true, "than": true, "that": true, "their": true, "them": true,
	"then": true, "there": true, "these": true, "they": true, "this": true, "those": true, "through": true,
	"under": true, "very": true, "want": true, "what": true, "when": true, "where": true, "which": true,
	"while": true, "will": true, "with": true, "within": true, "without": true, "would": true, "your": true,
	"users": true, "user": true, "system": true, "allow": true, "allows": true, "able": true, "using": true,
	"support": true, "supports": true, "create": true, "provide": true, "please": true, "help": true,
}

// Keywords returns up to n significant words of text (four letters or
// more, not common words), lower case, in order of first appearance.
func Keywords(text string, n int) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-'
	}) {
		w = strings.Trim(w, "-")
		if len([]rune(w)) < 4 || stopWords[w] || seen[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
		if len(out) == n {
			break
		}
	}
	return out
}

// Keyword is the i-th keyword of text, or fallback when it has fewer.
func Keyword(text string, i int, fallback string) string {
	if k := Keywords(text, i+1); len(k) > i {
		return k[i]
	}
	return fallback
}

// Pick chooses an index below n from text, the same one every time.
func Pick(text string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(strings.TrimSpace(text)))
	return int(h.Sum32() % uint32(n))
}

// TitleCase upper-cases the first letter of each word.
func TitleCase(s string) string {
	words := strings.Fields(s)
	for i, w := range words {
		r := []rune(w)
		r[0] = unicode.ToUpper(r[0])
		words[i] = string(r)
	}
	return strings.Join(words, " ")
}

// Name is a short title for a subject: its first three keywords, title
// cased ("Invoice Approval Workflow"), or fallback.
func Name(subject, fallback string) string {
	k := Keywords(subject, 3)
	if len(k) == 0 {
		return fallback
	}
	return TitleCase(strings.Join(k, " "))
}

// FirstSentence is text's first sentence on one line, cut at max
// characters with "…".
func FirstSentence(text string, max int) string {
	s := strings.Join(strings.Fields(text), " ")
	if i := strings.IndexAny(s, ".!?\n"); i > 0 {
		s = s[:i+1]
	}
	return Excerpt(s, max)
}

// MaxPoint is where Points cuts each point of feedback.
const MaxPoint = 240

// Points is feedback as the built-in replies quote it: each entry on one
// line, cut at MaxPoint characters, blank entries dropped.
func Points(feedback []string) []string {
	var out []string
	for _, f := range feedback {
		if p := Excerpt(f, MaxPoint); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// describing are common adjectives, adverbs and verbs of a brief ("a tiny
// service that lets small teams track …"): words a reply cannot name a
// thing by ("manage smalls").
var describing = map[string]bool{
	"tiny": true, "small": true, "little": true, "large": true, "huge": true, "simple": true, "quick": true,
	"fast": true, "easy": true, "better": true, "best": true, "great": true, "good": true, "nice": true,
	"modern": true, "lightweight": true, "light": true, "internal": true, "external": true, "online": true,
	"secure": true, "private": true, "public": true, "local": true, "remote": true, "free": true, "open": true,
	"single": true, "multiple": true, "several": true, "various": true, "real-time": true, "realtime": true,
	"daily": true, "weekly": true, "monthly": true, "yearly": true, "basic": true, "full": true, "first": true,
	"last": true, "next": true, "high": true, "cheap": true, "smart": true, "self-hosted": true,
	"friendly": true, "handy": true, "personal": true, "shared": true, "automatic": true,
	"automatically": true, "quickly": true, "easily": true, "simply": true, "really": true, "already": true,
	"lets": true, "helps": true, "tracks": true, "track": true, "manage": true, "manages": true, "keep": true,
	"keeps": true, "send": true, "sends": true, "show": true, "shows": true, "handle": true, "handles": true,
	"give": true, "gives": true, "turn": true, "turns": true, "find": true, "finds": true, "store": true,
	"stores": true, "share": true, "shares": true, "offer": true, "offers": true, "runs": true, "takes": true,
	"built": true, "made": true, "based": true, "new": true, "small-business": true, "generic": true,
	"boring": true, "bland": true, "vague": true, "long": true, "short": true, "catchy": true, "mention": true,
}

// Nouns is Keywords without the words that describe rather than name
// (fewer than n when text has fewer).
func Nouns(text string, n int) []string {
	var out []string
	for _, w := range Keywords(text, 1<<10) {
		if describing[w] || strings.HasSuffix(w, "ful") || strings.HasSuffix(w, "less") || strings.HasSuffix(w, "ous") {
			continue
		}
		out = append(out, w)
		if len(out) == n {
			break
		}
	}
	return out
}

// Noun is the i-th of Nouns(text), or fallback when it has fewer.
func Noun(text string, i int, fallback string) string {
	if k := Nouns(text, i+1); len(k) > i {
		return k[i]
	}
	return fallback
}
