// Package webhook delivers WEBHOOK messages: an HTTPS POST of a JSON body to the recipient's
// URL, signed with HMAC-SHA256 (see Sign and docs/senders.md), with the delivery id as the
// Idempotency-Key header.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/heraldhq/herald/senders"
)

// Header names set on every webhook request.
const (
	HeaderSignature      = "Herald-Signature"
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderDeliveryID     = "Herald-Delivery-Id"
	HeaderAttempt        = "Herald-Attempt"
)

// Config configures the webhook sender.
type Config struct {
	// SigningSecret is the HMAC-SHA256 key every request is signed with. Required.
	SigningSecret string
	// Timeout bounds one send, from connect to the response status. Default 10s.
	Timeout time.Duration
	// AllowHTTP permits plain http:// URLs (local development, the simulator). Default false.
	AllowHTTP bool
	// AllowLoopback permits URLs that resolve to 127.0.0.0/8 or ::1 (tests, the simulator,
	// local development). Default false. Every other non-public address is refused whatever
	// the setting (see publicOnly): a webhook URL is user input and must not reach herald's
	// own network. There is no proxy setting: webhooks never go through a proxy, since the
	// address check would then see the proxy's address instead of the receiver's.
	AllowLoopback bool
	// UserAgent is sent with every request. Default "herald-webhook/1".
	UserAgent string
	// Provider is the provider-account name used for rate limiting. Default "webhook".
	Provider string
	// HTTP tunes the connection pool.
	HTTP senders.HTTPConfig
}

func (c *Config) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.UserAgent == "" {
		c.UserAgent = "herald-webhook/1"
	}
	if c.Provider == "" {
		c.Provider = "webhook"
	}
}

func (c *Config) validate() error {
	if c.SigningSecret == "" {
		return errors.New("webhook: SigningSecret is required")
	}
	if c.Timeout < 0 {
		return errors.New("webhook: Timeout must not be negative")
	}
	return nil
}

// Sender posts webhooks. It is safe for concurrent use.
type Sender struct {
	cfg Config
	senders.HTTPAccount
	log *zap.Logger
	now func() time.Time
}

// New returns a webhook sender.
func New(cfg Config, log *zap.Logger) (*Sender, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.HTTP.DialControl = publicOnly(cfg.AllowLoopback) // and so no proxy: see senders.HTTPConfig
	client, err := senders.NewHTTPClient(cfg.Provider, cfg.HTTP)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return &Sender{
		cfg:         cfg,
		HTTPAccount: senders.HTTPAccount{Client: client, Account: cfg.Provider},
		log:         log.With(zap.String("component", "senders.webhook")),
		now:         time.Now,
	}, nil
}

// Send posts m's JSON to m.To.WebhookURL.
func (s *Sender) Send(ctx context.Context, m *senders.Message) (senders.Result, error) {
	res := senders.Result{Provider: s.cfg.Provider}
	u, err := url.Parse(m.To.WebhookURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && !(s.cfg.AllowHTTP && u.Scheme == "http")) {
		return res, senders.PermanentError("invalid_url", fmt.Errorf("webhook delivery %s: url is not an allowed absolute https url", m.DeliveryID))
	}
	body, err := Body(m)
	if err != nil {
		return res, senders.PermanentError("invalid_content", fmt.Errorf("webhook delivery %s: %w", m.DeliveryID, err))
	}

	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return res, senders.PermanentError("invalid_url", fmt.Errorf("webhook delivery %s: build request failed", m.DeliveryID))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.cfg.UserAgent)
	senders.SetIdempotencyKey(req.Header, m.DeliveryID)
	req.Header.Set(HeaderDeliveryID, m.DeliveryID)
	req.Header.Set(HeaderAttempt, strconv.Itoa(m.Attempt))
	req.Header.Set(HeaderSignature, Sign([]byte(s.cfg.SigningSecret), s.now(), body))

	resp, err := senders.DoHTTP(s.Client, req)
	if err != nil {
		if errors.Is(err, errBlockedAddress) {
			err = senders.PermanentError("blocked_address", fmt.Errorf("webhook delivery %s: %w", m.DeliveryID, errBlockedAddress))
		}
		senders.LogFailure(s.log, m, err)
		return res, fmt.Errorf("webhook delivery %s: %w", m.DeliveryID, err)
	}
	senders.ReadBody(resp)
	res.Code = strconv.Itoa(resp.StatusCode)
	if se := senders.HTTPStatusError(resp.StatusCode, "", senders.ParseRetryAfter(resp.Header.Get("Retry-After"), s.now()), nil); se != nil {
		senders.LogFailure(s.log, m, se)
		return res, fmt.Errorf("webhook delivery %s: %w", m.DeliveryID, se)
	}
	return res, nil
}

// envelope is the body sent when the template gives no webhook JSON.
type envelope struct {
	DeliveryID     string          `json:"deliveryId"`
	NotificationID string          `json:"notificationId"`
	Category       string          `json:"category,omitempty"`
	Template       string          `json:"template,omitempty"`
	Payload        json.RawMessage `json:"payload,omitempty"`
}

// Body returns the request body for m: its rendered webhook JSON, or else an envelope with
// the delivery id, notification id, category, template and payload.
func Body(m *senders.Message) ([]byte, error) {
	if len(m.Content.JSON) > 0 {
		if !json.Valid(m.Content.JSON) {
			return nil, errors.New("webhook content is not valid JSON")
		}
		return m.Content.JSON, nil
	}
	b, err := json.Marshal(envelope{m.DeliveryID, m.NotificationID, m.Category, m.Template, m.Payload})
	if err != nil {
		return nil, errors.New("webhook payload is not valid JSON")
	}
	return b, nil
}
