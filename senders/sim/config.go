// Package sim is herald's provider simulator (`herald sim`): one process that speaks FCM v1
// (with its OAuth2 token endpoint), an HTTP/2 APNs look-alike, the Twilio Messages API, the
// Vonage SMS API, SendGrid's v3 mail/send, a webhook receiver and an SMTP sink, with a configurable latency distribution and fault
// injection per provider. It records every request with its receive time and idempotency
// key and serves the records as JSON, so tests and benchmarks can count duplicates and
// measure latency.
package sim

import (
	"errors"
	"fmt"
	"time"
)

// Provider names, as used in Config.Faults, Config.Latency and in records.
const (
	FCM      = "fcm"
	APNs     = "apns"
	Twilio   = "twilio"
	Webhook  = "webhook"
	SMTP     = "smtp"
	Vonage   = "vonage"
	SendGrid = "sendgrid"
)

// Providers lists every simulated provider.
var Providers = []string{FCM, APNs, Twilio, Webhook, SMTP, Vonage, SendGrid}

// Config configures the simulator.
type Config struct {
	// Addr is the plain-HTTP listen address serving FCM, its token endpoint, Twilio, Vonage,
	// SendGrid, webhooks and the control API (/records, /stats, /reset, /faults). Default "127.0.0.1:8090".
	Addr string
	// TLSAddr is the HTTPS listen address (HTTP/2) serving APNs and, for senders that insist
	// on TLS, everything else too. Empty disables it. Default "127.0.0.1:8443".
	TLSAddr string
	// CertFile, when set, receives the PEM certificate the TLS listener uses (self-signed,
	// generated at start, valid for 127.0.0.1, ::1 and localhost), for senders to trust.
	CertFile string
	// SMTPAddr is the SMTP sink's listen address (no TLS, any AUTH accepted). Empty
	// disables it. Default "127.0.0.1:2525".
	SMTPAddr string
	// Latency is the response delay per provider; providers not listed use DefaultLatency.
	Latency        map[string]Latency
	DefaultLatency Latency
	// Faults are the error-injection rates per provider; providers not listed get none.
	Faults map[string]Faults
	// WebhookSecret, a "whsec_" secret, when set makes the webhook receiver check the
	// Standard Webhooks signature (webhook-id, webhook-timestamp, webhook-signature) and
	// answer 401 to a bad one. herald signs with the secret of the API client that created
	// the notification: give the secret `herald apikey create` printed for that client.
	WebhookSecret string
	// MaxRecords bounds the kept records; older ones are dropped (and counted). Default 1,000,000.
	MaxRecords int
	// Seed seeds the fault and latency draws; 0 picks one from the clock.
	Seed uint64
	// Receipts, when set, makes Twilio, Vonage and SendGrid send delivery receipts back.
	Receipts *Receipts
}

// Latency is a log-normal delay: half the requests wait less than Median, one in a hundred
// longer than P99, none less than Min. The zero value means no delay.
type Latency struct {
	Min    time.Duration `json:"min"`
	Median time.Duration `json:"median"`
	P99    time.Duration `json:"p99"`
}

// Faults are per-request probabilities (0..1, summing to at most 1) of each injected error.
type Faults struct {
	// RateLimit answers 429 with Retry-After.
	RateLimit float64 `json:"rateLimit"`
	// Unavailable answers 503 with Retry-After (before taking the message).
	Unavailable float64 `json:"unavailable"`
	// Timeout takes the message, then never answers (until the client gives up): the
	// ambiguous case. Such a message counts as delivered.
	Timeout float64 `json:"timeout"`
	// Permanent rejects the recipient (unregistered token, invalid number, 410, 550).
	Permanent float64 `json:"permanent"`
	// RetryAfter is announced with 429 and 503. Default 1s.
	RetryAfter time.Duration `json:"retryAfter"`
}

// DefaultMaxRecords is Config.MaxRecords's default.
const DefaultMaxRecords = 1_000_000

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:8090"
	}
	if c.MaxRecords == 0 {
		c.MaxRecords = DefaultMaxRecords
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
}

// DefaultConfig returns the configuration `herald sim` starts with.
func DefaultConfig() Config {
	return Config{Addr: "127.0.0.1:8090", TLSAddr: "127.0.0.1:8443", SMTPAddr: "127.0.0.1:2525"}
}

func (c *Config) validate() error {
	if c.MaxRecords < 0 {
		return errors.New("sim: MaxRecords must not be negative")
	}
	for p, f := range c.Faults {
		if err := f.validate(); err != nil {
			return fmt.Errorf("sim: faults for %s: %w", p, err)
		}
	}
	for p, l := range c.Latency {
		if err := l.validate(); err != nil {
			return fmt.Errorf("sim: latency for %s: %w", p, err)
		}
	}
	if c.Receipts != nil {
		if err := c.Receipts.validate(); err != nil {
			return err
		}
	}
	return c.DefaultLatency.validate()
}

func (f Faults) validate() error {
	for _, r := range []float64{f.RateLimit, f.Unavailable, f.Timeout, f.Permanent} {
		if r < 0 || r > 1 {
			return errors.New("rates must be between 0 and 1")
		}
	}
	if f.RateLimit+f.Unavailable+f.Timeout+f.Permanent > 1 {
		return errors.New("rates must sum to at most 1")
	}
	if f.RetryAfter < 0 {
		return errors.New("RetryAfter must not be negative")
	}
	return nil
}

func (l Latency) validate() error {
	if l.Min < 0 || l.Median < 0 || l.P99 < 0 {
		return errors.New("latencies must not be negative")
	}
	if l.P99 != 0 && l.P99 < l.Median {
		return errors.New("P99 must not be below Median")
	}
	return nil
}
