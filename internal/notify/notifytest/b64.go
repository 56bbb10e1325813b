package notifytest

import (
	"encoding/base64"
	"io"
	"strings"
)

// newBase64 decodes a base64 body whose lines are wrapped.
func newBase64(r io.Reader) io.Reader {
	b, err := io.ReadAll(r)
	if err != nil {
		return strings.NewReader("")
	}
	clean := strings.Map(func(c rune) rune {
		if c == '\r' || c == '\n' || c == ' ' {
			return -1
		}
		return c
	}, string(b))
	out, _ := base64.StdEncoding.DecodeString(clean)
	return strings.NewReader(string(out))
}
