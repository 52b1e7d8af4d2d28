// Package apns delivers PUSH messages to Apple devices through the APNs provider API
// (HTTP/2, POST {base}/3/device/{token}) with token-based authentication: an ES256 JWT
// signed with the team's .p8 key, reused for TokenTTL.
package apns

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
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
)

// Well-known APNs endpoints.
const (
	Production = "https://api.push.apple.com"
	Sandbox    = "https://api.sandbox.push.apple.com"
)

// Config configures the APNs sender.
type Config struct {
	// KeyPEM is the APNs auth key (.p8 file: a PKCS#8 PEM EC P-256 key). Required.
	KeyPEM []byte
	// KeyID is the 10-character id of the key. Required.
	KeyID string
	// TeamID is the 10-character Apple developer team id. Required.
	TeamID string
	// Topic is the app's bundle id, sent as apns-topic. Required.
	Topic string
	// BaseURL is the API root. Default Production; Sandbox for development builds.
	BaseURL string
	// Timeout bounds one send, from connect to the response status. Default 10s.
	Timeout time.Duration
	// TokenTTL is how long one provider token is reused. Apple rejects tokens older than an
	// hour and refreshes more often than every 20 minutes. Default 50m.
	TokenTTL time.Duration
	// Provider is the provider-account name used for rate limiting. Default "push:apns".
	Provider string
	// HTTP tunes the connection pool (APNs multiplexes many streams on one connection).
	HTTP senders.HTTPConfig
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.BaseURL = cmp.Or(c.BaseURL, Production)
	c.Timeout = cmp.Or(c.Timeout, 10*time.Second)
	c.TokenTTL = cmp.Or(c.TokenTTL, 50*time.Minute)
	c.Provider = cmp.Or(c.Provider, "push:apns")
	return c
}

func (c *Config) validate() error {
	switch {
	case c.KeyID == "" || c.TeamID == "":
		return errors.New("apns: KeyID and TeamID are required")
	case c.Topic == "":
		return errors.New("apns: Topic (the bundle id) is required")
	case c.Timeout < 0:
		return errors.New("apns: Timeout must not be negative")
	case c.TokenTTL < 20*time.Minute || c.TokenTTL > 60*time.Minute:
		return errors.New("apns: TokenTTL must be between 20m and 60m")
	}
	return nil
}

// Sender sends APNs notifications. It is safe for concurrent use.
type Sender struct {
	cfg  Config
	base string
	senders.HTTPAccount
	tokens *providerToken
	log    *zap.Logger
}

// New returns an APNs sender.
func New(cfg Config, log *zap.Logger) (*Sender, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	key, err := jwt.ParseECPrivateKeyFromPEM(cfg.KeyPEM)
	if err != nil {
		return nil, errors.New("apns: KeyPEM is not a PEM EC private key")
	}
	client, err := senders.NewHTTPClient(cfg.Provider, cfg.HTTP)
	if err != nil {
		return nil, fmt.Errorf("apns: %w", err)
	}
	return &Sender{
		cfg:         cfg,
		base:        strings.TrimRight(cfg.BaseURL, "/"),
		HTTPAccount: senders.HTTPAccount{Client: client, Account: cfg.Provider},
		tokens:      &providerToken{key: key, keyID: cfg.KeyID, teamID: cfg.TeamID, ttl: cfg.TokenTTL, now: time.Now},
		log:         log.With(zap.String("component", "senders.apns")),
	}, nil
}

// Send delivers m to the first APNS token in m.To.PushTokens with apns-id set to the
// delivery id. senders/push calls it once per device. A token APNs reports as Unregistered,
// BadDeviceToken or DeviceTokenNotForTopic is returned in Result.InvalidTokens alongside the
// Permanent error.
func (s *Sender) Send(ctx context.Context, m *senders.Message) (senders.Result, error) {
	res := senders.Result{Provider: s.cfg.Provider}
	token := ""
	for _, t := range m.To.PushTokens {
		if strings.EqualFold(t.Platform, "APNS") {
			token = t.Token
			break
		}
	}
	if token == "" {
		return res, senders.PermanentError("no_device", fmt.Errorf("apns delivery %s: recipient has no APNs token", m.DeliveryID))
	}
	body, err := json.Marshal(payload{
		APS:        aps{Alert: alert{Title: m.Content.Title, Body: m.Content.Body}},
		DeliveryID: m.DeliveryID,
	})
	if err != nil {
		return res, senders.PermanentError("invalid_content", fmt.Errorf("apns delivery %s: encode payload", m.DeliveryID))
	}
	bearer, err := s.tokens.get()
	if err != nil {
		return res, senders.TransientError("provider_token", 0, fmt.Errorf("apns delivery %s: sign provider token: %w", m.DeliveryID, err))
	}

	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/3/device/"+url.PathEscape(token), bytes.NewReader(body))
	if err != nil {
		return res, senders.PermanentError("invalid_token", fmt.Errorf("apns delivery %s: build request failed", m.DeliveryID))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("authorization", "bearer "+bearer)
	req.Header.Set("apns-id", m.DeliveryID)
	req.Header.Set("apns-topic", s.cfg.Topic)
	req.Header.Set("apns-push-type", "alert")
	req.Header.Set("apns-priority", priority(m.Priority))

	resp, err := senders.DoHTTP(s.Client, req)
	if err != nil {
		senders.LogFailure(s.log, m, err)
		return res, fmt.Errorf("apns delivery %s: %w", m.DeliveryID, err)
	}
	respBody := senders.ReadBody(resp)
	res.Code = strconv.Itoa(resp.StatusCode)
	if resp.StatusCode == http.StatusOK {
		res.ProviderMessageID = resp.Header.Get("apns-id")
		return res, nil
	}
	se := classify(resp.StatusCode, respBody, senders.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()))
	switch se.Code {
	case "ExpiredProviderToken", "InvalidProviderToken":
		s.tokens.invalidate(bearer)
	}
	if tokenGone(se.Code) {
		res.InvalidTokens = []string{token}
	}
	senders.LogFailure(s.log, m, se)
	return res, fmt.Errorf("apns delivery %s: %w", m.DeliveryID, se)
}

// priority maps herald priorities to apns-priority: 10 delivers immediately, 5 lets the
// device save power.
func priority(p herald.Priority) string {
	if p == herald.PriorityHigh {
		return "10"
	}
	return "5"
}

type payload struct {
	APS        aps    `json:"aps"`
	DeliveryID string `json:"herald_delivery_id"`
}

type aps struct {
	Alert alert `json:"alert"`
}

type alert struct {
	Title string `json:"title,omitempty"`
	Body  string `json:"body,omitempty"`
}
