package llm

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
	"unicode/utf8"
)

// MaxReplyBody bounds what a provider reads of a server's answer.
const MaxReplyBody = 16 << 20

// HTTPPost is one JSON POST of an HTTP provider, tried once.
type HTTPPost struct {
	// Provider is the provider's Name, for messages.
	Provider string
	Client   *http.Client
	URL      string
	Header   http.Header
	Body     []byte
	// Timeout bounds the try, answer included; TimeoutSetting names the
	// setting that sets it (e.g. "OLLAMA_REQUEST_TIMEOUT").
	Timeout        time.Duration
	TimeoutSetting string
	// BaseURLSetting names the setting of the server's address, for
	// failures that a person must fix (unknown host, bad certificate).
	BaseURLSetting string
}

// HTTPReply is a server's answer.
type HTTPReply struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends the request. Errors: ctx's (wrapped) when ctx ends first; a
// *TransientError for a refused or broken connection or a try past its
// timeout; a *ConfigError for an address that cannot work (unknown host,
// certificate refused, bad URL). Any HTTP status is an answer, not an
// error: the caller classifies it.
func (p HTTPPost) Do(ctx context.Context) (*HTTPReply, error) {
	tctx := ctx
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		tctx, cancel = context.WithTimeout(ctx, p.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(tctx, http.MethodPost, p.URL, bytes.NewReader(p.Body))
	if err != nil {
		return nil, &ConfigError{Provider: p.Provider, Setting: p.BaseURLSetting, Message: "bad server URL " + p.URL, Err: err}
	}
	for k, vs := range p.Header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	client := p.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err == nil {
		defer resp.Body.Close()
		var body []byte
		body, err = io.ReadAll(io.LimitReader(resp.Body, MaxReplyBody))
		if err == nil {
			return &HTTPReply{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
		}
	}
	return nil, p.transportError(ctx, tctx, err)
}

func (p HTTPPost) transportError(ctx, tctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", p.Provider, ctx.Err())
	}
	if tctx.Err() != nil || isTimeout(err) {
		msg := fmt.Sprintf("no answer from %s within %s", p.URL, p.Timeout)
		if p.TimeoutSetting != "" {
			msg += " (" + p.TimeoutSetting + ")"
		}
		return &TransientError{Err: fmt.Errorf("%s: %s: %w", p.Provider, msg, context.DeadlineExceeded)}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return &ConfigError{Provider: p.Provider, Setting: p.BaseURLSetting, Message: "unknown host " + dns.Name, Err: err}
	}
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	if errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) {
		return &ConfigError{Provider: p.Provider, Setting: p.BaseURLSetting, Message: "the server's certificate is refused", Err: err}
	}
	return &TransientError{Err: fmt.Errorf("%s: %w", p.Provider, err)}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// NewHTTPClient returns a client for a provider: connections within 10s,
// answers bounded by each request's context (HTTPPost.Timeout).
func NewHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = 10 * time.Second
	tr.MaxIdleConnsPerHost = 16
	return &http.Client{Transport: tr}
}

// Snippet is the start of a server's error body, on one line, for messages.
func Snippet(body []byte) string {
	const n = 300
	s := string(bytes.Join(bytes.Fields(body), []byte(" ")))
	if len(s) > n {
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i] + "…"
	}
	return s
}

// EstimateTokens guesses a text's token count (about four bytes a token)
// for servers that report none.
func EstimateTokens(s string) int {
	if s == "" {
		return 0
	}
	return (len(s) + 3) / 4
}
