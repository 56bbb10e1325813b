package notify

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// ActionToken is a fresh action link token (256 random bits, base64url)
// and the SHA-256 that is stored of it.
func ActionToken() (token string, hash []byte) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("notify: no randomness: " + err.Error())
	}
	token = base64.RawURLEncoding.EncodeToString(b[:])
	return token, TokenHash(token)
}

// TokenHash is what is stored of an action link token.
func TokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// KindLabel names an interrupt kind for people.
func KindLabel(kind string) string {
	switch kind {
	case "prd", "sdd":
		return strings.ToUpper(kind)
	case "":
		return "Decision"
	}
	// A kind is ^[a-z][a-z0-9_]{0,39}$: "deploy_check" reads "Deploy check".
	return strings.ToUpper(kind[:1]) + strings.ReplaceAll(kind[1:], "_", " ")
}

// Summary bounds: a message shows the start of the artifact.
const (
	summaryLines = 40
	summaryChars = 4000
)

// Summarize is the start of an artifact for a message, and whether it was cut.
func Summarize(content string) (string, bool) {
	lines := strings.Split(strings.TrimRight(content, "\n"), "\n")
	cut := false
	if len(lines) > summaryLines {
		lines, cut = lines[:summaryLines], true
	}
	out := strings.Join(lines, "\n")
	if len(out) > summaryChars {
		out, cut = strings.ToValidUTF8(out[:summaryChars], ""), true
	}
	return out, cut
}
