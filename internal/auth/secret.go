package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// Prefixes of the secrets this package hands out, so that a leaked one is
// recognisable (secret scanners, logs).
const (
	tokenPrefix   = "gatehouse_"
	sessionPrefix = "ghs_"
)

// randomSecret is 32 random bytes, base64url without padding.
func randomSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("auth: no randomness: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// RandomToken is 256 random bits as 43 characters of base64url.
func RandomToken() string { return randomSecret() }

// RandomPassword is a password for generated accounts: 24 random characters.
func RandomPassword() string {
	var b [18]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("auth: no randomness: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// newSecretKey is a fresh key for a session's CSRF tokens.
func newSecretKey() []byte {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("auth: no randomness: " + err.Error())
	}
	return b
}

// HashSecret is what the store keeps of a token or session secret: its
// SHA-256. The secrets are 256 random bits, so a plain hash is enough.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// looksLikeToken reports whether s has the shape of an API token.
func looksLikeToken(s string) bool {
	return strings.HasPrefix(s, tokenPrefix) && len(s) == len(tokenPrefix)+43
}

// looksLikeSession reports whether s has the shape of a session secret.
func looksLikeSession(s string) bool {
	return strings.HasPrefix(s, sessionPrefix) && len(s) == len(sessionPrefix)+43
}

// CSRFToken derives the CSRF token of a session from its secret key: an
// HMAC, so the token proves knowledge of the session without being the
// session's cookie.
func CSRFToken(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("gatehouse csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// CheckCSRF reports whether token is the session's CSRF token, in constant
// time.
func CheckCSRF(key []byte, token string) bool {
	if len(key) == 0 || token == "" {
		return false
	}
	want := CSRFToken(key)
	return subtle.ConstantTimeCompare([]byte(want), []byte(token)) == 1
}
