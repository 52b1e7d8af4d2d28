// Package vonage delivers SMS messages through the Vonage SMS API
// (POST {base}/sms/json, form-encoded, credentials in the form).
package vonage

import (
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

	"go.uber.org/zap"

	"github.com/heraldhq/herald/senders"
)

// Config configures the Vonage sender.
type Config struct {
	// APIKey and APISecret authenticate the calls (sent as the api_key and api_secret form
	// fields, never in the URL). Both required.
	APIKey    string
	APISecret string
	// From is the sender: a number (E.164, with or without "+") or an alphanumeric id of at
	// most 11 characters. Required.
	From string
	// CallbackURL, when set, is sent as `callback`: where Vonage posts the delivery receipts
	// of each message (herald's <public-url>/providers/vonage/dlr). Default: none, the
	// account's default receipt URL applies.
	CallbackURL string
	// BaseURL is the API root. Default "https://rest.nexmo.com"; the simulator's URL in
	// development.
	BaseURL string
	// Timeout bounds one send, from connect to the response body. Default 10s.
	Timeout time.Duration
	// Provider is the provider-account name used for rate limiting. Default "sms:vonage".
	Provider string
	// HTTP tunes the connection pool.
	HTTP senders.HTTPConfig
}

// DefaultBaseURL is the SMS API's root.
const DefaultBaseURL = "https://rest.nexmo.com"

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.BaseURL = cmp.Or(c.BaseURL, DefaultBaseURL)
	c.Timeout = cmp.Or(c.Timeout, 10*time.Second)
	c.Provider = cmp.Or(c.Provider, "sms:vonage")
	return c
}

func (c *Config) validate() error {
	switch {
	case c.APIKey == "":
		return errors.New("vonage: APIKey is required")
	case c.APISecret == "":
		return errors.New("vonage: APISecret is required")
	case c.From == "":
		return errors.New("vonage: From is required")
	case c.Timeout < 0:
		return errors.New("vonage: Timeout must not be negative")
	}
	if !senders.IsHTTPURL(c.BaseURL) {
		return fmt.Errorf("vonage: BaseURL %q: want an http(s) URL", c.BaseURL)
	}
	if c.CallbackURL != "" {
		if !senders.IsHTTPURL(c.CallbackURL) {
			return errors.New("vonage: CallbackURL: want an absolute http(s) URL")
		}
	}
	return nil
}

// Sender sends SMS through Vonage. It is safe for concurrent use.
type Sender struct {
	cfg      Config
	endpoint string
	senders.HTTPAccount
	log *zap.Logger
}

// New returns a Vonage sender.
func New(cfg Config, log *zap.Logger) (*Sender, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	client, err := senders.NewHTTPClient(cfg.Provider, cfg.HTTP)
	if err != nil {
		return nil, fmt.Errorf("vonage: %w", err)
	}
	return &Sender{
		cfg:         cfg,
		endpoint:    strings.TrimRight(cfg.BaseURL, "/") + "/sms/json",
		HTTPAccount: senders.HTTPAccount{Client: client, Account: cfg.Provider},
		log:         log.With(zap.String("component", "senders.vonage")),
	}, nil
}

// response is the SMS API's answer: one entry per part of a (possibly concatenated) SMS.
// Numbers come as JSON strings ("0"); error-text may quote the number and is never copied.
type response struct {
	Messages []struct {
		Status    flexInt `json:"status"`
		MessageID string  `json:"message-id"`
	} `json:"messages"`
}

// flexInt reads a JSON number or a string holding one.
type flexInt int

func (n *flexInt) UnmarshalJSON(b []byte) error {
	v, err := strconv.Atoi(strings.Trim(string(b), `"`))
	*n = flexInt(v)
	return err
}

// Send sends m.Content.Text to m.To.Phone.
//
// The SMS API takes no idempotency key: the delivery id goes out as client-ref, which Vonage
// echoes in the delivery receipt. A timeout after the request left may mean Vonage queued
// the SMS: it is returned as Ambiguous.
func (s *Sender) Send(ctx context.Context, m *senders.Message) (senders.Result, error) {
	res := senders.Result{Provider: s.cfg.Provider}
	if m.To.Phone == "" {
		return res, senders.PermanentError("no_phone", fmt.Errorf("vonage delivery %s: recipient has no phone number", m.DeliveryID))
	}
	if m.Content.Text == "" {
		return res, senders.PermanentError("no_content", fmt.Errorf("vonage delivery %s: no sms text", m.DeliveryID))
	}
	form := url.Values{
		"api_key": {s.cfg.APIKey}, "api_secret": {s.cfg.APISecret},
		"from": {strings.TrimPrefix(s.cfg.From, "+")}, "to": {strings.TrimPrefix(m.To.Phone, "+")},
		"text": {m.Content.Text}, "client-ref": {m.DeliveryID},
	}
	if needsUnicode(m.Content.Text) {
		form.Set("type", "unicode")
	}
	if s.cfg.CallbackURL != "" {
		form.Set("callback", s.cfg.CallbackURL)
	}

	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return res, fmt.Errorf("vonage delivery %s: build request: %w", m.DeliveryID, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")

	resp, err := senders.DoHTTP(s.Client, req)
	if err != nil {
		senders.LogFailure(s.log, m, err)
		return res, fmt.Errorf("vonage delivery %s: %w", m.DeliveryID, err)
	}
	body := senders.ReadBody(resp)
	res.Code = strconv.Itoa(resp.StatusCode)
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		se := classifyHTTP(resp.StatusCode, senders.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()))
		senders.LogFailure(s.log, m, se)
		return res, fmt.Errorf("vonage delivery %s: %w", m.DeliveryID, se)
	}
	id, se := outcome(body)
	if se != nil {
		senders.LogFailure(s.log, m, se)
		return res, fmt.Errorf("vonage delivery %s: %w", m.DeliveryID, se)
	}
	res.Code, res.ProviderMessageID = "0", id
	return res, nil
}

// outcome reads a 200 answer. Every part accepted (status 0): the first part's message-id.
// Every part refused: the first refusal's class. Some parts accepted and others refused:
// part of the SMS is on its way and a retry would send those parts again, so Ambiguous. An
// answer herald cannot read may hide a queued message: Ambiguous.
func outcome(body []byte) (string, *senders.Error) {
	var r response
	if err := json.Unmarshal(body, &r); err != nil || len(r.Messages) == 0 {
		return "", senders.AmbiguousError("bad_response", errors.New("vonage: unreadable 200 answer: the message may have been queued"))
	}
	var refused *senders.Error
	accepted := 0
	for _, p := range r.Messages {
		if p.Status == 0 {
			accepted++
			continue
		}
		if refused == nil {
			refused = classifyStatus(int(p.Status))
		}
	}
	switch {
	case refused == nil:
		return r.Messages[0].MessageID, nil
	case accepted > 0:
		return "", senders.AmbiguousError(refused.Code, fmt.Errorf("vonage: %d of %d parts queued, then %w", accepted, len(r.Messages), refused.Err))
	}
	return "", refused
}

// needsUnicode reports whether text needs Vonage's unicode type: anything outside printable
// ASCII (and line breaks) would otherwise arrive garbled. Some of it (é, £) fits GSM-7; the
// unicode type only costs more parts for those.
func needsUnicode(text string) bool {
	for _, r := range text {
		if (r < 0x20 && r != '\n' && r != '\r') || r > 0x7e || r == '`' {
			return true
		}
	}
	return false
}
