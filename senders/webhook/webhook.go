// Package webhook delivers WEBHOOK messages: an HTTPS POST of a JSON body to the recipient's
// URL, signed per the Standard Webhooks specification with the secret(s) of the API client
// that created the notification (see Sign and docs/security.md), with the delivery id as
// webhook-id and as the Idempotency-Key header.
package webhook

import (
	"bytes"
	"cmp"
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

// Header names set on every webhook request, besides the Standard Webhooks ones.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderDeliveryID     = "Herald-Delivery-Id"
	HeaderAttempt        = "Herald-Attempt"
)

// Config configures the webhook sender.
type Config struct {
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

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.Timeout = cmp.Or(c.Timeout, 10*time.Second)
	c.UserAgent = cmp.Or(c.UserAgent, "herald-webhook/1")
	c.Provider = cmp.Or(c.Provider, "webhook")
	return c
}

func (c *Config) validate() error {
	if c.Timeout < 0 {
		return errors.New("webhook: Timeout must not be negative")
	}
	return nil
}

// Secrets looks up the signing secrets of an API client: its current "whsec_" secret first,
// then its previous one while a rotation window is open. An unknown client has none (an
// empty list, no error); an error means the lookup failed and a retry may succeed.
type Secrets interface {
	WebhookSecrets(ctx context.Context, clientID string) ([]string, error)
}

// Sender posts webhooks. It is safe for concurrent use.
type Sender struct {
	cfg Config
	senders.HTTPAccount
	secrets Secrets
	log     *zap.Logger
	now     func() time.Time
}

// New returns a webhook sender that signs with the secrets of each message's API client.
func New(cfg Config, secrets Secrets, log *zap.Logger) (*Sender, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if secrets == nil {
		return nil, errors.New("webhook: nil Secrets")
	}
	cfg.HTTP.DialControl = publicOnly(cfg.AllowLoopback) // and so no proxy: see senders.HTTPConfig
	client, err := senders.NewHTTPClient(cfg.Provider, cfg.HTTP)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return &Sender{
		cfg:         cfg,
		HTTPAccount: senders.HTTPAccount{Client: client, Account: cfg.Provider},
		secrets:     secrets,
		log:         log.With(zap.String("component", "senders.webhook")),
		now:         time.Now,
	}, nil
}

// Send posts m's JSON to m.To.WebhookURL, signed with the secrets of m.ClientID.
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
	secrets, err := s.secrets.WebhookSecrets(ctx, m.ClientID)
	if err != nil {
		return res, senders.TransientError("secret_lookup", 0, fmt.Errorf("webhook delivery %s: signing secrets of client %s: %w", m.DeliveryID, m.ClientID, err))
	}
	if len(secrets) == 0 {
		return res, senders.PermanentError("no_signing_secret", fmt.Errorf("webhook delivery %s: client %q has no signing secret", m.DeliveryID, m.ClientID))
	}
	now := s.now()
	sig, err := Sign(secrets, m.DeliveryID, now, body)
	if err != nil {
		return res, senders.PermanentError("no_signing_secret", fmt.Errorf("webhook delivery %s: signing secret of client %s: %w", m.DeliveryID, m.ClientID, err))
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
	req.Header.Set(HeaderWebhookID, m.DeliveryID)
	req.Header.Set(HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(HeaderWebhookSignature, sig)

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
