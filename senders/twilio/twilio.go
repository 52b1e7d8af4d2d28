// Package twilio delivers SMS messages through the Twilio Messages API
// (POST {base}/2010-04-01/Accounts/{AccountSID}/Messages.json, form-encoded, basic auth).
package twilio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/heraldhq/herald/senders"
)

// Config configures the Twilio sender.
type Config struct {
	// AccountSID is the account the messages are sent from ("AC..."). Required.
	AccountSID string
	// Username and Password authenticate the API calls: an API key SID and secret, or the
	// AccountSID and its auth token. Username defaults to AccountSID. Password is required.
	Username string
	Password string
	// From is the sender number (E.164) or alphanumeric id. One of From and
	// MessagingServiceSID is required; MessagingServiceSID wins when both are set.
	From                string
	MessagingServiceSID string
	// StatusCallbackURL, when set, is where Twilio posts the status callbacks of each
	// message (herald's <public-url>/providers/twilio/status): every create carries
	// StatusCallback = StatusCallbackURL?deliveryId=<delivery id>, which Twilio's signature
	// covers. Default: none, no callbacks.
	StatusCallbackURL string
	// BaseURL is the API root. Default "https://api.twilio.com"; the simulator's URL in
	// development.
	BaseURL string
	// Timeout bounds one send, from connect to the response status. Default 10s.
	Timeout time.Duration
	// Provider is the provider-account name used for rate limiting. Default "sms:twilio".
	Provider string
	// HTTP tunes the connection pool.
	HTTP senders.HTTPConfig
}

// DefaultBaseURL is the root of Twilio's API.
const DefaultBaseURL = "https://api.twilio.com"

func (c *Config) setDefaults() {
	if c.Username == "" {
		c.Username = c.AccountSID
	}
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Provider == "" {
		c.Provider = "sms:twilio"
	}
}

func (c *Config) validate() error {
	switch {
	case c.AccountSID == "":
		return errors.New("twilio: AccountSID is required")
	case c.Password == "":
		return errors.New("twilio: Password (auth token or API key secret) is required")
	case c.From == "" && c.MessagingServiceSID == "":
		return errors.New("twilio: From or MessagingServiceSID is required")
	case c.Timeout < 0:
		return errors.New("twilio: Timeout must not be negative")
	}
	if _, err := url.Parse(c.BaseURL); err != nil {
		return fmt.Errorf("twilio: BaseURL: %w", err)
	}
	if c.StatusCallbackURL != "" && !senders.IsHTTPURL(c.StatusCallbackURL) {
		return errors.New("twilio: StatusCallbackURL: want an absolute http(s) URL")
	}
	return nil
}

// Sender sends SMS through Twilio. It is safe for concurrent use.
type Sender struct {
	cfg      Config
	endpoint string
	senders.HTTPAccount
	log *zap.Logger
}

// New returns a Twilio sender.
func New(cfg Config, log *zap.Logger) (*Sender, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	client, err := senders.NewHTTPClient(cfg.Provider, cfg.HTTP)
	if err != nil {
		return nil, fmt.Errorf("twilio: %w", err)
	}
	return &Sender{
		cfg: cfg,
		endpoint: strings.TrimRight(cfg.BaseURL, "/") + "/2010-04-01/Accounts/" +
			url.PathEscape(cfg.AccountSID) + "/Messages.json",
		HTTPAccount: senders.HTTPAccount{Client: client, Account: cfg.Provider},
		log:         log.With(zap.String("component", "senders.twilio")),
	}, nil
}

// Send sends m.Content.Text to m.To.Phone.
//
// Twilio's Messages API takes no idempotency key. The delivery id still goes out as an
// Idempotency-Key header (the simulator and proxies use it), but a timeout after the request
// left may mean Twilio sent the SMS: it is returned as Ambiguous.
func (s *Sender) Send(ctx context.Context, m *senders.Message) (senders.Result, error) {
	res := senders.Result{Provider: s.cfg.Provider}
	if m.To.Phone == "" {
		return res, senders.PermanentError("no_phone", fmt.Errorf("twilio delivery %s: recipient has no phone number", m.DeliveryID))
	}
	if m.Content.Text == "" {
		return res, senders.PermanentError("no_content", fmt.Errorf("twilio delivery %s: no sms text", m.DeliveryID))
	}
	form := url.Values{"To": {m.To.Phone}, "Body": {m.Content.Text}}
	if s.cfg.MessagingServiceSID != "" {
		form.Set("MessagingServiceSid", s.cfg.MessagingServiceSID)
	} else {
		form.Set("From", s.cfg.From)
	}
	if s.cfg.StatusCallbackURL != "" {
		form.Set("StatusCallback", StatusCallback(s.cfg.StatusCallbackURL, m.DeliveryID))
	}

	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return res, fmt.Errorf("twilio delivery %s: build request: %w", m.DeliveryID, err)
	}
	req.SetBasicAuth(s.cfg.Username, s.cfg.Password)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	senders.SetIdempotencyKey(req.Header, m.DeliveryID)

	resp, err := senders.DoHTTP(s.Client, req)
	if err != nil {
		senders.LogFailure(s.log, m, err)
		return res, fmt.Errorf("twilio delivery %s: %w", m.DeliveryID, err)
	}
	body := senders.ReadBody(resp)
	res.Code = strconv.Itoa(resp.StatusCode)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		var ok struct {
			SID string `json:"sid"`
		}
		_ = json.Unmarshal(body, &ok)
		res.ProviderMessageID = ok.SID
		return res, nil
	}
	se := classify(resp.StatusCode, body, senders.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()))
	senders.LogFailure(s.log, m, se)
	return res, fmt.Errorf("twilio delivery %s: %w", m.DeliveryID, se)
}

// DeliveryIDParam is the query parameter of the StatusCallback URL that carries the delivery
// id back in Twilio's status callbacks (receipts.DeliveryIDParam).
const DeliveryIDParam = "deliveryId"

// StatusCallback is the StatusCallback URL of delivery deliveryID: base?deliveryId=<id>.
func StatusCallback(base, deliveryID string) string {
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + DeliveryIDParam + "=" + url.QueryEscape(deliveryID)
}
