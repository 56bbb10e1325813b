package views

import (
	"hash/fnv"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// statusLabel is a task status as people read it.
func statusLabel(s string) string {
	switch s {
	case "queued":
		return "Queued"
	case "running":
		return "Running"
	case "waiting":
		return "Waiting for a decision"
	case "succeeded":
		return "Succeeded"
	case "failed":
		return "Failed"
	case "cancelled":
		return "Cancelled"
	}
	return s
}

// shortStatus is the one-word label of a status.
func shortStatus(s string) string {
	if s == "waiting" {
		return "Waiting"
	}
	return statusLabel(s)
}

// stamp is the machine-readable time of a <time> element.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// clock is the time as shown before the script puts it in the reader's zone.
func clock(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("Jan 2 15:04:05") + " UTC"
}

func itoa(n int) string  { return strconv.Itoa(n) }
func i64(n int64) string { return strconv.FormatInt(n, 10) }
func px(n int) string    { return strconv.Itoa(n) }
func shortID(id string) string {
	if i := strings.IndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}

// plural is "1 task", "2 tasks".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func nodeLabel(s string) string { return strings.ReplaceAll(s, "_", " ") }

func diffClass(op string) string {
	switch op {
	case "+":
		return "add"
	case "-":
		return "del"
	}
	return "ctx"
}

func lineNo(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func nodeDesc(d string) string {
	if d == "" {
		return ""
	}
	return ". " + d
}

// gateIcon is a small shield at the right of a gated node box.
func gateIcon(w int) string {
	x := w - 56
	return "M" + itoa(x) + ",11 l6,-3 l6,3 v5 c0,4 -3,6 -6,8 c-3,-2 -6,-4 -6,-8 z"
}

func docClass(contentType string) string {
	switch {
	case strings.Contains(contentType, "markdown"):
		return "markdown"
	case strings.Contains(contentType, "yaml"), strings.Contains(contentType, "json"):
		return "code"
	}
	return "text"
}

func opLabel(op string) string {
	switch op {
	case "+":
		return "added"
	case "-":
		return "removed"
	}
	return "unchanged"
}

// editValue is what the editor starts with: the kept input after a refused
// edit, else the artifact.
func editValue(p PendingForm) string {
	if p.Value != "" {
		return p.Value
	}
	return p.Raw
}

func idleMessage(status string) string {
	switch status {
	case "queued":
		return "Nothing to decide: the task is queued and starts shortly."
	case "running":
		return "Nothing to decide right now: the task is running."
	case "succeeded":
		return "The task succeeded. Nothing left to decide."
	case "failed":
		return "The task failed. Retry it from its last checkpoint, or read the timeline for the cause."
	case "cancelled":
		return "The task was cancelled."
	}
	return "Nothing to decide right now."
}

func opSymbol(op string) string {
	switch op {
	case "+":
		return "+"
	case "-":
		return "−"
	}
	return ""
}

// pluralWord is the words of plural without the number.
func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// avParam and avValue say, in the live URL and on the page, that the
// artifact view follows the task (the feed then sends it as it moves).
func avParam(follows bool) string {
	if follows {
		return "&av=1"
	}
	return ""
}

func avValue(follows bool) string {
	if follows {
		return "1"
	}
	return ""
}

func joinComma(list []string) string { return strings.Join(list, ", ") }

// inboxURL is the inbox with a kind and the work-queue filters.
func inboxURL(kind, claim string, overdue bool) string {
	v := url.Values{}
	if kind != "" {
		v.Set("kind", kind)
	}
	if claim != "" {
		v.Set("claim", claim)
	}
	if overdue {
		v.Set("overdue", "1")
	}
	if len(v) == 0 {
		return "/inbox"
	}
	return "/inbox?" + v.Encode()
}

// deadlineVerb is what a deadline does, before its time: "fails the task
// at", "approved automatically at", "cancels the task at", or "due at"
// (only marks it overdue).
func deadlineVerb(onTimeout string) string {
	switch onTimeout {
	case "fail":
		return "fails the task at"
	case "approve":
		return "approved automatically at"
	case "cancel":
		return "cancels the task at"
	}
	return "due at"
}

// deadlineTitle explains the deadline for a tooltip.
func deadlineTitle(onTimeout string) string {
	switch onTimeout {
	case "fail":
		return "At its deadline the task fails unless someone decides first (retry raises it again)."
	case "approve":
		return "At its deadline it is approved automatically unless someone decides first."
	case "cancel":
		return "At its deadline the task is cancelled unless someone decides first."
	}
	return "Past its deadline it is marked overdue and stays open for a decision."
}

// avatarTones is how many colours the avatars take (CSS .avatar.tone-N).
const avatarTones = 8

// avatarTone is the colour class of a person's avatar: the same for the
// same name on every page and replica.
func avatarTone(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return "tone-" + strconv.Itoa(int(h.Sum32()%avatarTones)+1)
}

// initial is the letter an avatar shows: the name's first letter or
// digit, upper case ("?" for none).
func initial(name string) string {
	for _, r := range name {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return strings.ToUpper(string(r))
		}
	}
	return "?"
}

// orNone is s, or "none" when empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
