// Package fcm delivers PUSH messages to Android (and FCM-registered) devices through the
// Firebase Cloud Messaging HTTP v1 API (POST {base}/v1/projects/{project}/messages:send),
// authenticated with a service account through the OAuth2 JWT bearer grant.
package fcm

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

	gojwt "github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/jwt"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
)

// Scope is the OAuth2 scope FCM v1 requires.
const Scope = "https://www.googleapis.com/auth/firebase.messaging"

// DataKeyDeliveryID is the key of the delivery id in every message's data map; apps use it
// to drop a duplicate notification.
const DataKeyDeliveryID = "herald_delivery_id"

// Config configures the FCM sender.
type Config struct {
	// CredentialsJSON is the service-account key file (JSON, "type": "service_account").
	// Required.
	CredentialsJSON []byte
	// ProjectID is the Firebase project. Default: project_id of the credentials.
	ProjectID string
	// BaseURL is the API root. Default "https://fcm.googleapis.com".
	BaseURL string
	// TokenURL is the OAuth2 token endpoint. Default: token_uri of the credentials, else
	// "https://oauth2.googleapis.com/token".
	TokenURL string
	// Timeout bounds one send, from connect to the response status. Default 10s. A token
	// fetch is bounded by its own 10s.
	Timeout time.Duration
	// Provider is the provider-account name used for rate limiting. Default "push:fcm".
	Provider string
	// HTTP tunes the connection pool.
	HTTP senders.HTTPConfig
}

// DefaultBaseURL is the root of FCM's HTTP v1 API.
const DefaultBaseURL = "https://fcm.googleapis.com"

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults(sa serviceAccount) Config {
	c.ProjectID = cmp.Or(c.ProjectID, sa.ProjectID)
	c.BaseURL = cmp.Or(c.BaseURL, DefaultBaseURL)
	c.TokenURL = cmp.Or(c.TokenURL, sa.TokenURI, "https://oauth2.googleapis.com/token")
	c.Timeout = cmp.Or(c.Timeout, 10*time.Second)
	c.Provider = cmp.Or(c.Provider, "push:fcm")
	return c
}

func (c *Config) validate() error {
	if c.ProjectID == "" {
		return errors.New("fcm: ProjectID is required (none in the credentials)")
	}
	if c.Timeout < 0 {
		return errors.New("fcm: Timeout must not be negative")
	}
	return nil
}

// serviceAccount is the part of a service-account key file herald reads.
type serviceAccount struct {
	Type         string `json:"type"`
	ProjectID    string `json:"project_id"`
	PrivateKeyID string `json:"private_key_id"`
	PrivateKey   string `json:"private_key"`
	ClientEmail  string `json:"client_email"`
	TokenURI     string `json:"token_uri"`
}

// Sender sends FCM v1 messages. It is safe for concurrent use.
type Sender struct {
	cfg      Config
	endpoint string
	senders.HTTPAccount
	tokens oauth2.TokenSource
	log    *zap.Logger
}

// New returns an FCM sender. It fetches no token until the first Send.
func New(cfg Config, log *zap.Logger) (*Sender, error) {
	var sa serviceAccount
	if err := json.Unmarshal(cfg.CredentialsJSON, &sa); err != nil {
		return nil, errors.New("fcm: CredentialsJSON is not a service-account key file")
	}
	if sa.Type != "service_account" || sa.ClientEmail == "" || sa.PrivateKey == "" {
		return nil, errors.New("fcm: CredentialsJSON needs type service_account, client_email and private_key")
	}
	if _, err := gojwt.ParseRSAPrivateKeyFromPEM([]byte(sa.PrivateKey)); err != nil {
		return nil, errors.New("fcm: the credentials' private_key is not a PEM RSA key")
	}
	cfg = cfg.withDefaults(sa)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	client, err := senders.NewHTTPClient(cfg.Provider, cfg.HTTP)
	if err != nil {
		return nil, fmt.Errorf("fcm: %w", err)
	}
	tokenClient := *client
	tokenClient.Timeout = 10 * time.Second
	jc := &jwt.Config{
		Email:        sa.ClientEmail,
		PrivateKey:   []byte(sa.PrivateKey),
		PrivateKeyID: sa.PrivateKeyID,
		Scopes:       []string{Scope},
		TokenURL:     cfg.TokenURL,
	}
	return &Sender{
		cfg:         cfg,
		endpoint:    strings.TrimRight(cfg.BaseURL, "/") + "/v1/projects/" + url.PathEscape(cfg.ProjectID) + "/messages:send",
		HTTPAccount: senders.HTTPAccount{Client: client, Account: cfg.Provider},
		tokens:      jc.TokenSource(context.WithValue(context.Background(), oauth2.HTTPClient, &tokenClient)),
		log:         log.With(zap.String("component", "senders.fcm")),
	}, nil
}

// Send delivers m to the first FCM token in m.To.PushTokens. senders/push calls it once per
// device. A token FCM reports as UNREGISTERED or SENDER_ID_MISMATCH is returned in
// Result.InvalidTokens alongside the Permanent error.
func (s *Sender) Send(ctx context.Context, m *senders.Message) (senders.Result, error) {
	res := senders.Result{Provider: s.cfg.Provider}
	token := firstToken(m, "FCM")
	if token == "" {
		return res, senders.PermanentError("no_device", fmt.Errorf("fcm delivery %s: recipient has no FCM token", m.DeliveryID))
	}
	body, err := json.Marshal(request{Message: message{
		Token:        token,
		Notification: &notification{Title: m.Content.Title, Body: m.Content.Body},
		Data:         map[string]string{DataKeyDeliveryID: m.DeliveryID, "herald_notification_id": m.NotificationID},
		Android:      &android{Priority: androidPriority(m.Priority)},
	}})
	if err != nil {
		return res, senders.PermanentError("invalid_content", fmt.Errorf("fcm delivery %s: encode message", m.DeliveryID))
	}
	if err := ctx.Err(); err != nil {
		return res, senders.TransientError("canceled", 0, fmt.Errorf("fcm delivery %s: %w", m.DeliveryID, err))
	}
	tok, err := s.tokens.Token()
	if err != nil {
		err = senders.TransientError("oauth", 0, fmt.Errorf("fcm delivery %s: fetch oauth2 token: %s", m.DeliveryID, tokenErrorText(err)))
		senders.LogFailure(s.log, m, err)
		return res, err
	}

	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return res, fmt.Errorf("fcm delivery %s: build request: %w", m.DeliveryID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	tok.SetAuthHeader(req)
	resp, err := senders.DoHTTP(s.Client, req)
	if err != nil {
		senders.LogFailure(s.log, m, err)
		return res, fmt.Errorf("fcm delivery %s: %w", m.DeliveryID, err)
	}
	respBody := senders.ReadBody(resp)
	res.Code = strconv.Itoa(resp.StatusCode)
	if resp.StatusCode == http.StatusOK {
		var ok struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(respBody, &ok)
		res.ProviderMessageID = ok.Name
		return res, nil
	}
	se := classify(resp.StatusCode, respBody, senders.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()))
	if tokenGone(se.Code) {
		res.InvalidTokens = []string{token}
	}
	senders.LogFailure(s.log, m, se)
	return res, fmt.Errorf("fcm delivery %s: %w", m.DeliveryID, se)
}

func firstToken(m *senders.Message, platform string) string {
	for _, t := range m.To.PushTokens {
		if strings.EqualFold(t.Platform, platform) {
			return t.Token
		}
	}
	return ""
}

func androidPriority(p herald.Priority) string {
	if p == herald.PriorityHigh {
		return "HIGH"
	}
	return "NORMAL"
}

// tokenErrorText describes a token-fetch failure without the endpoint's response body.
func tokenErrorText(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		if re.ErrorCode != "" {
			return fmt.Sprintf("token endpoint status %d (%s)", re.Response.StatusCode, re.ErrorCode)
		}
		return fmt.Sprintf("token endpoint status %d", re.Response.StatusCode)
	}
	return "token endpoint unreachable"
}

type request struct {
	Message message `json:"message"`
}

type message struct {
	Token        string            `json:"token"`
	Notification *notification     `json:"notification,omitempty"`
	Data         map[string]string `json:"data,omitempty"`
	Android      *android          `json:"android,omitempty"`
}

type notification struct {
	Title string `json:"title,omitempty"`
	Body  string `json:"body,omitempty"`
}

type android struct {
	Priority string `json:"priority,omitempty"`
}
