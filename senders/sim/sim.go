package sim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	gosmtp "github.com/emersion/go-smtp"
	"go.uber.org/zap"
)

// Sim is the provider simulator.
type Sim struct {
	cfg     Config
	log     *zap.Logger
	dice    *dice
	records *store
	closing chan struct{}
	certPEM []byte
	handler http.Handler
	// receiptClient posts the receipts; receipts counts the goroutines sending them.
	receiptClient *http.Client
	receipts      sync.WaitGroup

	httpLn, tlsLn, smtpLn net.Listener
	tlsCert               tls.Certificate
}

// New builds the simulator and binds its listeners (so that Addr and friends are known
// before Run, and port 0 works). Run serves them; call it, or the listeners stay open.
func New(cfg Config, log *zap.Logger) (*Sim, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Sim{
		cfg:           cfg,
		log:           log.With(zap.String("component", "sim")),
		dice:          newDice(cfg),
		records:       newStore(cfg.MaxRecords),
		closing:       make(chan struct{}),
		receiptClient: &http.Client{Timeout: 5 * time.Second},
	}
	s.handler = s.routes()
	var err error
	closeAll := func() {
		for _, l := range []net.Listener{s.httpLn, s.tlsLn, s.smtpLn} {
			if l != nil {
				_ = l.Close()
			}
		}
	}
	if s.httpLn, err = net.Listen("tcp", cfg.Addr); err != nil {
		return nil, fmt.Errorf("sim: listen %s: %w", cfg.Addr, err)
	}
	if cfg.TLSAddr != "" {
		if s.tlsCert, s.certPEM, err = selfSigned(); err != nil {
			closeAll()
			return nil, fmt.Errorf("sim: certificate: %w", err)
		}
		if cfg.CertFile != "" {
			if err := os.WriteFile(cfg.CertFile, s.certPEM, 0o644); err != nil {
				closeAll()
				return nil, fmt.Errorf("sim: write %s: %w", cfg.CertFile, err)
			}
		}
		if s.tlsLn, err = net.Listen("tcp", cfg.TLSAddr); err != nil {
			closeAll()
			return nil, fmt.Errorf("sim: listen %s: %w", cfg.TLSAddr, err)
		}
	}
	if cfg.SMTPAddr != "" {
		if s.smtpLn, err = net.Listen("tcp", cfg.SMTPAddr); err != nil {
			closeAll()
			return nil, fmt.Errorf("sim: listen %s: %w", cfg.SMTPAddr, err)
		}
	}
	return s, nil
}

// Addr is the plain-HTTP address (FCM, token endpoint, Twilio, webhooks, control API).
func (s *Sim) Addr() string { return s.httpLn.Addr().String() }

// TLSAddr is the HTTPS/HTTP-2 address (APNs and everything else), "" when disabled.
func (s *Sim) TLSAddr() string {
	if s.tlsLn == nil {
		return ""
	}
	return s.tlsLn.Addr().String()
}

// SMTPAddr is the SMTP sink's address, "" when disabled.
func (s *Sim) SMTPAddr() string {
	if s.smtpLn == nil {
		return ""
	}
	return s.smtpLn.Addr().String()
}

// CertPEM is the TLS listener's self-signed certificate, for clients to trust.
func (s *Sim) CertPEM() []byte { return s.certPEM }

// Handler serves every HTTP endpoint; Run serves it on Addr and TLSAddr.
func (s *Sim) Handler() http.Handler { return s.handler }

// Records returns the records of provider ("" for all), oldest first.
func (s *Sim) Records(provider string) []Record {
	recs, _ := s.records.list(provider, 0, int(^uint(0)>>1))
	return recs
}

// Stats returns per-provider counts, duplicates included.
func (s *Sim) Stats() map[string]Stats { return s.records.snapshot() }

// Reset forgets every record.
func (s *Sim) Reset() { s.records.reset() }

// SetFaults replaces provider's fault rates.
func (s *Sim) SetFaults(provider string, f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	s.dice.setFaults(provider, f)
	return nil
}

// SetLatency replaces provider's latency distribution.
func (s *Sim) SetLatency(provider string, l Latency) error {
	if err := l.validate(); err != nil {
		return err
	}
	s.dice.setLatency(provider, l)
	return nil
}

// Run serves until ctx is done, then closes every listener and connection (requests held
// open by a timeout fault are released) and returns.
func (s *Sim) Run(ctx context.Context) error {
	httpSrv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	var tlsSrv *http.Server
	var smtpSrv *gosmtp.Server
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	serve := func(name string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
				errs <- fmt.Errorf("sim: serve %s: %w", name, err)
			}
		}()
	}
	serve("http", func() error { return httpSrv.Serve(s.httpLn) })
	fields := []zap.Field{zap.String("http", s.Addr())}
	if s.tlsLn != nil {
		tlsSrv = &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second,
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{s.tlsCert}, MinVersion: tls.VersionTLS12}}
		serve("https", func() error { return tlsSrv.ServeTLS(s.tlsLn, "", "") })
		fields = append(fields, zap.String("https", s.TLSAddr()))
	}
	if s.smtpLn != nil {
		smtpSrv = s.newSMTPServer()
		serve("smtp", func() error { return smtpSrv.Serve(s.smtpLn) })
		fields = append(fields, zap.String("smtp", s.SMTPAddr()))
	}
	s.log.Info("provider simulator listening", fields...)

	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	close(s.closing)
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = httpSrv.Shutdown(shutdownCtx)
	_ = s.httpLn.Close()
	if tlsSrv != nil {
		_ = tlsSrv.Shutdown(shutdownCtx)
		_ = s.tlsLn.Close()
	}
	if smtpSrv != nil {
		_ = smtpSrv.Close()
		_ = s.smtpLn.Close() // Close may run before Serve registered the listener
	}
	wg.Wait()
	s.receipts.Wait()
	return err
}
