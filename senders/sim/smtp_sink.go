package sim

import (
	"crypto/tls"
	"io"
	"net/mail"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	gosmtp "github.com/emersion/go-smtp"
)

// newSMTPServer is the SMTP sink: STARTTLS offered (with the TLS listener's certificate,
// when TLS is enabled) but not required, any AUTH PLAIN accepted, every message
// recorded under the local part of its Message-ID (<delivery-id@domain>) and discarded.
// Faults answer 450 (rate limit), 451 (unavailable) or 550 (permanent) to the message data;
// a timeout takes the message and never replies.
func (s *Sim) newSMTPServer() *gosmtp.Server {
	srv := gosmtp.NewServer(gosmtp.BackendFunc(func(*gosmtp.Conn) (gosmtp.Session, error) {
		return &smtpSession{sim: s}, nil
	}))
	srv.Domain = "sim.herald"
	srv.AllowInsecureAuth = true
	srv.ReadTimeout = time.Minute
	srv.WriteTimeout = time.Minute
	srv.MaxMessageBytes = 10 << 20
	srv.ErrorLog = nopLogger{}
	if s.certPEM != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{s.tlsCert}, MinVersion: tls.VersionTLS12}
	}
	return srv
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...interface{}) {}
func (nopLogger) Println(...interface{})        {}

type smtpSession struct{ sim *Sim }

func (*smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (*smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(string, string, string) error { return nil }), nil
}
func (*smtpSession) Mail(string, *gosmtp.MailOptions) error { return nil }
func (*smtpSession) Rcpt(string, *gosmtp.RcptOptions) error { return nil }
func (*smtpSession) Reset()                                 {}
func (*smtpSession) Logout() error                          { return nil }

func (ss *smtpSession) Data(r io.Reader) error {
	received := time.Now()
	key := ""
	if msg, err := mail.ReadMessage(r); err == nil {
		key, _, _ = strings.Cut(strings.Trim(msg.Header.Get("Message-Id"), "<> "), "@")
		_, _ = io.Copy(io.Discard, msg.Body)
	}
	_, _ = io.Copy(io.Discard, r)
	s := ss.sim
	o, delay, _ := s.dice.roll(SMTP)
	code := map[Outcome]int{Accepted: 250, RateLimited: 450, Unavailable: 451, Rejected: 550}[o]
	s.records.add(Record{Provider: SMTP, Key: key, ReceivedAt: received, Outcome: o, Status: code, DelayMs: float64(delay) / 1e6})
	wait := delay
	if o == TimedOut {
		wait = 2 * time.Minute // longer than any client timeout
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.closing:
		}
	}
	switch o {
	case RateLimited:
		return &gosmtp.SMTPError{Code: 450, EnhancedCode: gosmtp.EnhancedCode{4, 7, 1}, Message: "simulated rate limit"}
	case Unavailable:
		return &gosmtp.SMTPError{Code: 451, EnhancedCode: gosmtp.EnhancedCode{4, 3, 0}, Message: "simulated outage"}
	case Rejected:
		return &gosmtp.SMTPError{Code: 550, EnhancedCode: gosmtp.EnhancedCode{5, 1, 1}, Message: "simulated unknown user"}
	}
	return nil
}
