package runner

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
)

// OwnerName names this process in task leases (Config.Owner): host, pid
// and a random suffix, so two processes on one host never share a name.
func OwnerName() string {
	host, _ := os.Hostname()
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
