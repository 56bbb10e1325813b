package notify

import (
	"context"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestSignMatchesReference: our signature is the reference library's, and
// the library verifies our headers.
func TestSignMatchesReference(t *testing.T) {
	t.Parallel()
	secret := NewSecret()
	if !strings.HasPrefix(secret, "whsec_") || len(secret) != len("whsec_")+44 {
		t.Fatalf("secret %q", secret)
	}
	ref, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"interrupt.raised","data":{"x":"ü <&>"}}`)
	now := time.Now()
	ours, err := Sign(secret, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", now, body)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := ref.Sign("msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", now, body)
	if err != nil || ours != theirs {
		t.Fatalf("ours %q, reference %q (%v)", ours, theirs, err)
	}
	h := http.Header{}
	h.Set("webhook-id", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W")
	h.Set("webhook-timestamp", itoa(now.Unix()))
	h.Set("webhook-signature", ours)
	if err := ref.Verify(body, h); err != nil {
		t.Fatalf("reference refuses: %v", err)
	}
	// A changed body or another secret fails.
	if err := ref.Verify(append(body, ' '), h); err == nil {
		t.Error("changed body verified")
	}
	other, _ := standardwebhooks.NewWebhook(NewSecret())
	if err := other.Verify(body, h); err == nil {
		t.Error("another secret verified")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestPrivateAddresses(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1": "loopback", "::1": "loopback", "10.0.0.1": "private", "172.16.3.4": "private",
		"192.168.1.1": "private", "100.64.0.1": "private", "169.254.169.254": "link-local", "fe80::1": "link-local",
		"0.0.0.0": "unspecified", "::ffff:127.0.0.1": "loopback", "fd00::1": "private", "239.1.2.3": "multicast",
		"93.184.216.34": "", "2606:4700::1111": "",
	} {
		if got := private(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%s: %q, want %q", addr, got, want)
		}
	}
}

// TestGuardedDialerRefusesAfterResolution: a name that resolves to
// loopback is refused when dialled, not only when added.
func TestGuardedDialerRefusesAfterResolution(t *testing.T) {
	t.Parallel()
	d := guardedDialer(false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := d.DialContext(ctx, "tcp", "localhost:9")
	if err == nil || !strings.Contains(err.Error(), "loopback address") {
		t.Fatalf("dial localhost: %v", err)
	}
	if err := CheckURL(ctx, "http://localhost:9/x", false); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("check localhost: %v", err)
	}
	if err := CheckURL(ctx, "http://localhost:9/x", true); err != nil {
		t.Fatalf("check localhost with allowPrivate: %v", err)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "120": 2 * time.Minute, "0": time.Second, "soon": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("%q: %s, want %s", v, got, want)
		}
	}
}

func TestBackoffSchedule(t *testing.T) {
	t.Parallel()
	s := NewSender(Config{Scale: 0.5})
	for n, base := range DefaultSchedule {
		got := s.backoff(n+1, 0)
		lo, hi := time.Duration(float64(base)*0.5*0.8), time.Duration(float64(base)*0.5*1.2)
		if got < lo || got > hi {
			t.Errorf("after attempt %d: %s, want within [%s, %s]", n+1, got, lo, hi)
		}
	}
	if got := s.backoff(1, 42*time.Second); got != 42*time.Second {
		t.Errorf("Retry-After: %s", got)
	}
}
