// Package notifytest has test servers for the notification channels: a
// real SMTP server on loopback (github.com/emersion/go-smtp) that keeps
// what it receives.
//
// Test support: it imports nothing of the module.
package notifytest

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// Message is one received email.
type Message struct {
	From   string
	To     []string
	Raw    []byte
	Header mail.Header
	// Text and HTML are the decoded parts.
	Text, HTML string
}

// SMTPServer is a real SMTP server on 127.0.0.1.
type SMTPServer struct {
	Host string
	Port int

	mu   sync.Mutex
	msgs []Message
	srv  *smtp.Server
}

// NewSMTPServer starts a server, stopped at the end of the test.
func NewSMTPServer(t testing.TB) *SMTPServer {
	t.Helper()
	s := &SMTPServer{}
	s.srv = smtp.NewServer(backend{s})
	s.srv.Domain = "localhost"
	s.srv.ReadTimeout, s.srv.WriteTimeout = 10*time.Second, 10*time.Second
	s.srv.MaxMessageBytes = 4 << 20
	s.srv.MaxRecipients = 10
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().(*net.TCPAddr)
	s.Host, s.Port = "127.0.0.1", a.Port
	go func() { _ = s.srv.Serve(l) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// Messages returns what arrived so far.
func (s *SMTPServer) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Wait waits until at least n messages arrived (within d) and returns them.
func (s *SMTPServer) Wait(t testing.TB, n int, d time.Duration) []Message {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if m := s.Messages(); len(m) >= n {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d messages after %s, want %d", len(s.Messages()), d, n)
	return nil
}

type backend struct{ s *SMTPServer }

func (b backend) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{s: b.s}, nil }

type session struct {
	s    *SMTPServer
	from string
	to   []string
}

func (x *session) Reset()        { x.from, x.to = "", nil }
func (x *session) Logout() error { return nil }
func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	x.from = from
	return nil
}
func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	x.to = append(x.to, to)
	return nil
}

func (x *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m := Message{From: x.from, To: append([]string(nil), x.to...), Raw: raw}
	pm, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	m.Header = pm.Header
	if err := parts(pm.Header.Get("Content-Type"), pm.Header.Get("Content-Transfer-Encoding"), pm.Body, &m); err != nil {
		return err
	}
	x.s.mu.Lock()
	x.s.msgs = append(x.s.msgs, m)
	x.s.mu.Unlock()
	return nil
}

// parts decodes the text and HTML parts of a (multipart) body.
func parts(ctype, enc string, body io.Reader, m *Message) error {
	mt, params, err := mime.ParseMediaType(ctype)
	if err != nil {
		return err
	}
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := parts(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p, m); err != nil {
				return err
			}
		}
	}
	var r io.Reader = body
	switch strings.ToLower(enc) {
	case "quoted-printable":
		r = quotedprintable.NewReader(body)
	case "base64":
		r = newBase64(body)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	switch mt {
	case "text/plain":
		m.Text = string(b)
	case "text/html":
		m.HTML = string(b)
	}
	return nil
}
