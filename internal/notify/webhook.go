package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Standard Webhooks 1.0 (https://www.standardwebhooks.com): the secret,
// the signature and the headers.

// secretPrefix marks a webhook signing secret.
const secretPrefix = "whsec_"

// WebhookTimeout bounds one delivery attempt.
const WebhookTimeout = 15 * time.Second

// NewSecret is a fresh signing secret: whsec_ and the standard base64 of
// 32 random bytes.
func NewSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("notify: no randomness: " + err.Error())
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// Sign is the webhook-signature header of body sent as message id at ts:
// v1,<base64(HMAC-SHA256(key, id.ts.body))> with the key decoded from the
// secret.
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.", id, ts.Unix())
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}

// URLError refuses a webhook URL: the reason names what is wrong.
type URLError struct{ Reason string }

func (e *URLError) Error() string { return e.Reason }

// CheckURL checks a webhook URL when it is added: http or https with a
// host, and, unless allowPrivate, a host whose every address is public
// (resolved now; deliveries check again after their own resolution).
func CheckURL(ctx context.Context, raw string, allowPrivate bool) error {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" || u.Hostname() == "" {
		return &URLError{fmt.Sprintf("%q is not a URL such as https://example.com/hooks/gatehouse", raw)}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return &URLError{fmt.Sprintf("%q: want an http:// or https:// URL", raw)}
	}
	if u.User != nil {
		return &URLError{fmt.Sprintf("%q: credentials in the URL are not allowed (the signature authenticates)", u.Redacted())}
	}
	if allowPrivate {
		return nil
	}
	host := u.Hostname()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return &URLError{fmt.Sprintf("%s does not resolve: %v", host, err)}
		}
		addrs = ips
	}
	for _, a := range addrs {
		if reason := private(a); reason != "" {
			return &URLError{fmt.Sprintf("%s resolves to %s, a %s address; webhooks reach only public addresses "+
				"unless GATEHOUSE_WEBHOOK_ALLOW_PRIVATE=true", host, a.Unmap(), reason)}
		}
	}
	return nil
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// private names the kind of a non-public address, "" for a public one.
func private(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate(), cgnat.Contains(a):
		return "private"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	}
	return ""
}

// guardedDialer refuses connections to non-public addresses after DNS
// resolution (the address actually dialled), so a name that resolved to
// a public address when added cannot be pointed inward later.
func guardedDialer(allowPrivate bool) *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("webhook address %q: %w", address, err)
			}
			if reason := private(ap.Addr()); reason != "" {
				return fmt.Errorf("refused to connect to %s, a %s address (GATEHOUSE_WEBHOOK_ALLOW_PRIVATE is off)", ap.Addr().Unmap(), reason)
			}
			return nil
		}
	}
	return d
}

// WebhookBody builds a delivery's body: {"type","timestamp","data"}.
type WebhookBody func(event string, at time.Time, s *Subject) (json.RawMessage, error)

// Webhooks is the webhook channel.
type Webhooks struct {
	store  Store
	body   WebhookBody
	client *http.Client

	// Endpoints are read once a second at most: a burst of deliveries to
	// one endpoint costs one read, and a removal or a 410 elsewhere is
	// seen within a second (the row's own delivery then fails as gone).
	mu    sync.Mutex
	cache map[string]cachedEndpoint
}

type cachedEndpoint struct {
	ep *Endpoint
	at time.Time
}

const endpointCacheTTL = time.Second

func (w *Webhooks) endpoint(ctx context.Context, id string) (*Endpoint, error) {
	w.mu.Lock()
	c, ok := w.cache[id]
	w.mu.Unlock()
	if ok && time.Since(c.at) < endpointCacheTTL {
		return c.ep, nil
	}
	ep, err := w.store.Endpoint(ctx, id)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.cache[id] = cachedEndpoint{ep: ep, at: time.Now()}
	w.mu.Unlock()
	return ep, nil
}

// forget drops an endpoint from the cache (it was just disabled).
func (w *Webhooks) forget(id string) {
	w.mu.Lock()
	delete(w.cache, id)
	w.mu.Unlock()
}

// NewWebhooks returns the webhook channel: body builds the payloads,
// allowPrivate lifts the SSRF guard (GATEHOUSE_WEBHOOK_ALLOW_PRIVATE).
func NewWebhooks(store Store, body WebhookBody, allowPrivate bool) *Webhooks {
	return &Webhooks{store: store, body: body, cache: map[string]cachedEndpoint{}, client: guardedClient(allowPrivate)}
}

// guardedClient is the HTTP client of webhook deliveries: no proxy, the
// SSRF guard on every dial, WebhookTimeout, redirects not followed.
func guardedClient(allowPrivate bool) *http.Client {
	tr := &http.Transport{
		// No proxy: it would dial in our place, past the guard.
		Proxy:                 nil,
		DialContext:           guardedDialer(allowPrivate).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: WebhookTimeout,
	}
	return &http.Client{Transport: tr, Timeout: WebhookTimeout,
		// A redirect is an answer, not a delivery: the receiver must
		// be configured with its real URL.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Send implements Channel.
func (w *Webhooks) Send(ctx context.Context, d *Delivery, s *Subject) Outcome {
	ep, err := w.endpoint(ctx, d.EndpointID)
	if errors.Is(err, ErrNotFound) {
		return Outcome{Err: errors.New("the endpoint was removed"), Permanent: true}
	}
	if err != nil {
		return Outcome{Err: err}
	}
	if ep.DisabledAt != nil {
		return Outcome{Err: fmt.Errorf("the endpoint is disabled (%s)", ep.DisabledReason), Permanent: true}
	}
	body := d.Payload
	if len(body) == 0 {
		if body, err = w.body(d.Event, d.CreatedAt, s); err != nil {
			return Outcome{Err: fmt.Errorf("building the body: %w", err)}
		}
	}
	out := post(ctx, w.client, ep.URL, ep.Secret, d.ID, body)
	if out.Disable != "" {
		w.forget(ep.ID)
	}
	return out
}

// post sends one signed attempt of a Standard Webhooks delivery: body to
// url, signed with secret under the delivery's id.
func post(ctx context.Context, client *http.Client, url, secret, id string, body []byte) Outcome {
	out := Outcome{Payload: body}
	now := time.Now()
	sig, err := Sign(secret, id, now, body)
	if err != nil {
		out.Err, out.Permanent = err, true
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, WebhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		out.Err, out.Permanent = err, true
		return out
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Gatehouse-Webhooks/1.0")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := client.Do(req)
	if err != nil {
		out.Err = err
		return out
	}
	defer resp.Body.Close()
	// Read a little so the connection can be reused; the rest is not ours.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	out.StatusCode = resp.StatusCode
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		out.OK = true
	case resp.StatusCode == http.StatusGone:
		out.Err = errors.New("410 Gone: the endpoint is disabled")
		out.Permanent, out.Disable = true, "the receiver answered 410 Gone at "+now.UTC().Format(time.RFC3339)
	case resp.StatusCode == http.StatusTooManyRequests:
		out.Err = errors.New("429 Too Many Requests")
		out.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), now)
	default:
		out.Err = fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return out
}

// retryAfter reads a Retry-After header: seconds or an HTTP date; 0 when
// absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return max(time.Duration(n)*time.Second, time.Second)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// CheckEvents checks an --events list: every name one of EventTypes.
func CheckEvents(events []string) error {
	for _, e := range events {
		if !slices.Contains(EventTypes, e) {
			return fmt.Errorf("unknown event %q (want %s)", e, strings.Join(EventTypes, ", "))
		}
	}
	return nil
}
