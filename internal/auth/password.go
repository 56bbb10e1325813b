package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Password limits.
const (
	MinPassword = 8
	MaxPassword = 1024
)

// argon2id parameters of new hashes (OWASP's 19 MiB, 2 passes, 1 lane).
// Verification reads them from the hash, so they may change later.
const (
	argonMemory  = 19 * 1024
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// hashSlots bounds the password hashes computed at once: each takes
// argonMemory, and a burst of logins must not take the process's memory.
var hashSlots = make(chan struct{}, 4)

var b64 = base64.RawStdEncoding

// CheckPassword checks a new password: 8 to 1024 characters of valid
// UTF-8.
func CheckPassword(pw string) error {
	switch n := utf8.RuneCountInString(pw); {
	case !utf8.ValidString(pw):
		return &InvalidError{Field: "password", Message: "is not valid UTF-8"}
	case n < MinPassword:
		return &InvalidError{Field: "password", Message: fmt.Sprintf("needs at least %d characters", MinPassword)}
	case len(pw) > MaxPassword:
		return &InvalidError{Field: "password", Message: fmt.Sprintf("is longer than %d bytes", MaxPassword)}
	}
	return nil
}

// HashPassword returns the argon2id hash of pw in the PHC string format:
// $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>.
func HashPassword(pw string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	hashSlots <- struct{}{}
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	<-hashSlots
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

var errBadHash = errors.New("auth: unreadable password hash")

// VerifyPassword reports whether pw matches hash, in constant time. An
// unreadable hash matches nothing.
func VerifyPassword(hash, pw string) bool {
	p, salt, key, err := parseHash(hash)
	if err != nil || len(pw) > MaxPassword {
		return false
	}
	hashSlots <- struct{}{}
	got := argon2.IDKey([]byte(pw), salt, p.time, p.memory, p.threads, uint32(len(key)))
	<-hashSlots
	return subtle.ConstantTimeCompare(got, key) == 1
}

type argonParams struct {
	memory  uint32
	time    uint32
	threads uint8
}

func parseHash(hash string) (argonParams, []byte, []byte, error) {
	var p argonParams
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return p, nil, nil, errBadHash
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return p, nil, nil, errBadHash
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.memory, &p.time, &p.threads); err != nil {
		return p, nil, nil, errBadHash
	}
	// Bounds, so a stored hash cannot make verification run away.
	if p.memory < 8 || p.memory > 1<<20 || p.time < 1 || p.time > 16 || p.threads < 1 || p.threads > 16 {
		return p, nil, nil, errBadHash
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return p, nil, nil, errBadHash
	}
	key, err := b64.DecodeString(parts[5])
	if err != nil || len(key) < 16 || len(key) > 64 {
		return p, nil, nil, errBadHash
	}
	return p, salt, key, nil
}

// dummyHash is verified against when a login names no user, so that a
// missing user takes as long as a wrong password.
var dummyHash = sync.OnceValue(func() string {
	h, err := HashPassword("gatehouse-no-such-user")
	if err != nil {
		panic(err)
	}
	return h
})
