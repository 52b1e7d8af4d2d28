package smtp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-sasl"
	gosmtp "github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/senders/sendertest"
)

// sink is an in-test SMTP server (STARTTLS, AUTH PLAIN) implementing sendertest.Fake.
type sink struct {
	addr    string
	clientT *tls.Config
	release chan struct{}

	mu         sync.Mutex
	outcome    sendertest.Outcome
	keys       []string
	messages   []*mail.Message
	rcptReject bool
}

func newSink(t *testing.T) *sink {
	// Borrow httptest's certificate for 127.0.0.1 and a client config that trusts it.
	hs := httptest.NewUnstartedServer(http.NotFoundHandler())
	hs.StartTLS()
	serverTLS := hs.TLS.Clone()
	roots := x509.NewCertPool()
	roots.AddCert(hs.Certificate())
	hs.Close()

	s := &sink{outcome: sendertest.Accept, release: make(chan struct{}),
		clientT: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}}
	srv := gosmtp.NewServer(gosmtp.BackendFunc(func(*gosmtp.Conn) (gosmtp.Session, error) {
		return &session{sink: s}, nil
	}))
	srv.Domain = "sink.test"
	srv.TLSConfig = serverTLS
	srv.ErrorLog = discardLogger{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s.addr = l.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		_ = l.Close() // Close may run before Serve registered l
		<-done
	})
	t.Cleanup(func() { close(s.release) })
	return s
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...interface{}) {}
func (discardLogger) Println(...interface{})        {}

func (s *sink) hostPort() (string, int) {
	host, port, _ := net.SplitHostPort(s.addr)
	p := 0
	for _, c := range port {
		p = p*10 + int(c-'0')
	}
	return host, p
}

func (s *sink) Next(o sendertest.Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outcome = o
}

func (s *sink) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

func (s *sink) Messages() []*mail.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*mail.Message(nil), s.messages...)
}

type session struct {
	sink   *sink
	authed bool
}

func (se *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (se *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != "herald" || pass != "secret" {
			return errors.New("bad credentials")
		}
		se.authed = true
		return nil
	}), nil
}

func (se *session) Mail(string, *gosmtp.MailOptions) error {
	if !se.authed {
		return &gosmtp.SMTPError{Code: 530, EnhancedCode: gosmtp.EnhancedCode{5, 7, 0}, Message: "authentication required"}
	}
	return nil
}

func (se *session) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	se.sink.mu.Lock()
	defer se.sink.mu.Unlock()
	if se.sink.rcptReject {
		return &gosmtp.SMTPError{Code: 550, EnhancedCode: gosmtp.EnhancedCode{5, 1, 1}, Message: "no such user " + to}
	}
	return nil
}

func (se *session) Data(r io.Reader) error {
	msg, err := mail.ReadMessage(r)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(msg.Body)
	msg.Body = strings.NewReader(string(body))
	id := strings.Trim(msg.Header.Get("Message-Id"), "<>")
	id, _, _ = strings.Cut(id, "@")
	s := se.sink
	s.mu.Lock()
	s.keys = append(s.keys, id)
	o := s.outcome
	s.mu.Unlock()
	switch o {
	case sendertest.Hang:
		<-s.release
		return nil
	case sendertest.Reject:
		return &gosmtp.SMTPError{Code: 554, EnhancedCode: gosmtp.EnhancedCode{5, 7, 1}, Message: "rejected for " + msg.Header.Get("To")}
	case sendertest.Unavailable:
		return &gosmtp.SMTPError{Code: 451, EnhancedCode: gosmtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
	case sendertest.RateLimit:
		return &gosmtp.SMTPError{Code: 450, EnhancedCode: gosmtp.EnhancedCode{4, 7, 1}, Message: "rate limited"}
	}
	s.mu.Lock()
	s.messages = append(s.messages, msg)
	s.mu.Unlock()
	return nil
}

func (se *session) Reset()        {}
func (se *session) Logout() error { return nil }
