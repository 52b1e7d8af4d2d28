// Package sendgrid delivers EMAIL messages through SendGrid's v3 Mail Send API
// (POST {base}/v3/mail/send, JSON, bearer API key).
//
// The request is written by hand rather than with github.com/sendgrid/sendgrid-go. That
// library takes the base URL and a context, but its Client.SendWithContext sends through the
// package-level sendgrid.DefaultClient: giving it herald's own pooled, traced http.Client
// (senders.NewHTTPClient) would mean replacing a global shared by the whole process, and its
// transport errors would bypass senders.DoHTTP, which tells a timeout before the request was
// written (Transient) from one after it (Ambiguous). herald makes one call with a small JSON
// body; the library would be a dependency for that alone.
package sendgrid

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/heraldhq/herald/senders"
)

// Config configures the SendGrid sender.
type Config struct {
	// APIKey is a SendGrid API key with the mail.send permission ("SG...."). Required.
	APIKey string
	// From is the sender, e.g. "Herald <no-reply@example.com>"; its address must be a
	// verified sender identity of the account. Required.
	From string
	// BaseURL is the API root. Default "https://api.sendgrid.com" (the EU region:
	// "https://api.eu.sendgrid.com"); the simulator's URL in development.
	BaseURL string
	// Timeout bounds one send, from connect to the response body. Default 10s.
	Timeout time.Duration
	// Provider is the provider-account name used for rate limiting. Default "email:sendgrid".
	Provider string
	// HTTP tunes the connection pool.
	HTTP senders.HTTPConfig
}

// DefaultBaseURL is the v3 API's root.
const DefaultBaseURL = "https://api.sendgrid.com"

// DeliveryIDArg is the custom_args member that carries the delivery id. SendGrid takes no
// idempotency key; it echoes custom_args in every Event Webhook event of the message.
const DeliveryIDArg = "herald_delivery_id"

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.BaseURL = cmp.Or(c.BaseURL, DefaultBaseURL)
	c.Timeout = cmp.Or(c.Timeout, 10*time.Second)
	c.Provider = cmp.Or(c.Provider, "email:sendgrid")
	return c
}

func (c *Config) validate() (*mail.Address, error) {
	switch {
	case c.APIKey == "":
		return nil, errors.New("sendgrid: APIKey is required")
	case c.From == "":
		return nil, errors.New("sendgrid: From is required")
	case c.Timeout < 0:
		return nil, errors.New("sendgrid: Timeout must not be negative")
	}
	if !senders.IsHTTPURL(c.BaseURL) {
		return nil, fmt.Errorf("sendgrid: BaseURL %q: want an http(s) URL", c.BaseURL)
	}
	from, err := mail.ParseAddress(c.From)
	if err != nil {
		return nil, fmt.Errorf("sendgrid: From %q: %w", c.From, err)
	}
	return from, nil
}

// Sender sends e-mail through SendGrid. It is safe for concurrent use.
type Sender struct {
	cfg      Config
	from     address
	endpoint string
	senders.HTTPAccount
	log *zap.Logger
}

// New returns a SendGrid sender.
func New(cfg Config, log *zap.Logger) (*Sender, error) {
	cfg = cfg.withDefaults()
	from, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	client, err := senders.NewHTTPClient(cfg.Provider, cfg.HTTP)
	if err != nil {
		return nil, fmt.Errorf("sendgrid: %w", err)
	}
	return &Sender{
		cfg:         cfg,
		from:        address{Email: from.Address, Name: from.Name},
		endpoint:    strings.TrimRight(cfg.BaseURL, "/") + "/v3/mail/send",
		HTTPAccount: senders.HTTPAccount{Client: client, Account: cfg.Provider},
		log:         log.With(zap.String("component", "senders.sendgrid")),
	}, nil
}

// The v3 mail/send body, as much of it as herald uses.
type (
	mailSend struct {
		Personalizations []personalization `json:"personalizations"`
		From             address           `json:"from"`
		Subject          string            `json:"subject"`
		Content          []content         `json:"content"`
		CustomArgs       map[string]string `json:"custom_args"`
	}
	personalization struct {
		To []address `json:"to"`
	}
	address struct {
		Email string `json:"email"`
		Name  string `json:"name,omitempty"`
	}
	content struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	}
)

// Send sends m to m.To.Email with the rendered subject and the text and HTML parts the
// template has (text/plain first, as SendGrid requires).
//
// The delivery id goes out in custom_args; a timeout after the request left may mean
// SendGrid queued the message: it is returned as Ambiguous.
func (s *Sender) Send(ctx context.Context, m *senders.Message) (senders.Result, error) {
	res := senders.Result{Provider: s.cfg.Provider}
	if m.To.Email == "" {
		return res, senders.PermanentError("no_email", fmt.Errorf("sendgrid delivery %s: recipient has no e-mail address", m.DeliveryID))
	}
	if m.Content.Text == "" && m.Content.HTML == "" {
		return res, senders.PermanentError("no_content", fmt.Errorf("sendgrid delivery %s: no text or html part", m.DeliveryID))
	}
	body := mailSend{
		Personalizations: []personalization{{To: []address{{Email: m.To.Email}}}},
		From:             s.from,
		Subject:          m.Content.Subject,
		CustomArgs:       map[string]string{DeliveryIDArg: m.DeliveryID},
	}
	if m.Content.Text != "" {
		body.Content = append(body.Content, content{Type: "text/plain", Value: m.Content.Text})
	}
	if m.Content.HTML != "" {
		body.Content = append(body.Content, content{Type: "text/html", Value: m.Content.HTML})
	}
	b, err := json.Marshal(body)
	if err != nil {
		return res, fmt.Errorf("sendgrid delivery %s: encode: %w", m.DeliveryID, err)
	}

	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(b))
	if err != nil {
		return res, fmt.Errorf("sendgrid delivery %s: build request: %w", m.DeliveryID, err)
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.APIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")

	resp, err := senders.DoHTTP(s.Client, req)
	if err != nil {
		senders.LogFailure(s.log, m, err)
		return res, fmt.Errorf("sendgrid delivery %s: %w", m.DeliveryID, err)
	}
	answer := senders.ReadBody(resp)
	res.Code = strconv.Itoa(resp.StatusCode)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		res.ProviderMessageID = resp.Header.Get("X-Message-Id")
		return res, nil
	}
	se := classify(resp.StatusCode, answer, resp.Header, time.Now())
	senders.LogFailure(s.log, m, se)
	return res, fmt.Errorf("sendgrid delivery %s: %w", m.DeliveryID, se)
}
