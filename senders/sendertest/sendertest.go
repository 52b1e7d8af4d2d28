// Package sendertest is the conformance suite every provider sender passes: a success that
// carries the delivery id as the provider's idempotency key, each error class, a timeout
// after the request left, Retry-After, and no personal data in errors or logs.
//
// A sender's test supplies a Setup that starts a local server speaking the provider's
// protocol (a Fake) and builds the sender pointed at it.
package sendertest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
)

// Sender is what dispatch needs of a provider sender.
type Sender interface {
	Send(ctx context.Context, m *senders.Message) (senders.Result, error)
	Provider() string
}

// Outcome is what a Fake does with the requests it receives.
type Outcome int

const (
	// Accept takes the message.
	Accept Outcome = iota + 1
	// Reject refuses the recipient for good (invalid number, unregistered token, 550).
	Reject
	// Unavailable fails for now (503, SMTP 451).
	Unavailable
	// RateLimit refuses for now with the protocol's rate-limit answer (429 with
	// Retry-After where the protocol has it).
	RateLimit
	// Hang reads the request and never answers until the client gives up.
	Hang
)

// Fake is a local server that speaks one provider's protocol.
type Fake interface {
	// Next makes every following request end in o.
	Next(o Outcome)
	// Keys returns the idempotency key (delivery id) each accepted or refused request
	// carried, in arrival order.
	Keys() []string
}

// Target is a sender under test and the fake it talks to.
type Target struct {
	Sender Sender
	Fake   Fake
	// Channel is the channel the sender serves.
	Channel herald.Channel
	// Platform is the push platform ("FCM", "APNS") for a push sender.
	Platform string
	// WebhookURL is the URL a webhook sender should post to.
	WebhookURL string
	// RetryAfter is the delay the fake announces on RateLimit; zero when the protocol has
	// no such thing.
	RetryAfter time.Duration
	// Codes are the provider codes expected in the *senders.Error of each failing outcome.
	Codes map[Outcome]string
	// Classes overrides the class expected of a failing outcome, for a provider whose
	// protocol says otherwise (Twilio's 5xx may hide an accepted message: Ambiguous).
	Classes map[Outcome]senders.Class
}

// Setup starts a fake and builds a sender pointed at it, logging to log, with timeout as its
// per-send timeout. It registers its own cleanup with t.
type Setup func(t *testing.T, log *zap.Logger, timeout time.Duration) Target

// Run runs the conformance suite.
func Run(t *testing.T, setup Setup) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	// send sends a fresh message and checks that neither the error nor anything logged so
	// far holds the message's personal data.
	send := func(t *testing.T, tg Target, ctx context.Context) (*senders.Message, senders.Result, error) {
		m := NewMessage(tg)
		res, err := tg.Sender.Send(ctx, m)
		checkPrivacy(t, m, err, logs)
		return m, res, err
	}

	t.Run("accept", func(t *testing.T) {
		tg := setup(t, log, 5*time.Second)
		require.NotEmpty(t, tg.Sender.Provider())
		tg.Fake.Next(Accept)
		m, res, err := send(t, tg, context.Background())
		require.NoError(t, err)
		require.Equal(t, tg.Sender.Provider(), res.Provider)
		require.Equal(t, []string{m.DeliveryID}, tg.Fake.Keys(), "delivery id as idempotency key")
	})
	for _, tc := range []struct {
		name    string
		outcome Outcome
		class   senders.Class
	}{
		{"reject", Reject, senders.Permanent},
		{"unavailable", Unavailable, senders.Transient},
		{"rate_limit", RateLimit, senders.Transient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := setup(t, log, 5*time.Second)
			tg.Fake.Next(tc.outcome)
			m, _, err := send(t, tg, context.Background())
			class, se := senders.Classify(err)
			want := tc.class
			if c, ok := tg.Classes[tc.outcome]; ok {
				want = c
			}
			require.Equal(t, want, class, "error: %v", err)
			require.NotNil(t, se)
			if want, ok := tg.Codes[tc.outcome]; ok {
				require.Equal(t, want, se.Code)
			}
			if tc.outcome == RateLimit {
				require.Equal(t, tg.RetryAfter, se.RetryAfter)
			}
			require.Equal(t, []string{m.DeliveryID}, tg.Fake.Keys())
		})
	}
	t.Run("timeout_after_request_left", func(t *testing.T) {
		tg := setup(t, log, 300*time.Millisecond)
		tg.Fake.Next(Hang)
		_, _, err := send(t, tg, context.Background())
		class, se := senders.Classify(err)
		require.Equal(t, senders.Ambiguous, class, "error: %v", err)
		require.NotNil(t, se, "a classified *senders.Error")
	})
	t.Run("canceled_before_send", func(t *testing.T) {
		tg := setup(t, log, 5*time.Second)
		tg.Fake.Next(Accept)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, err := send(t, tg, ctx)
		class, se := senders.Classify(err)
		require.Equal(t, senders.Transient, class, "error: %v", err)
		require.NotNil(t, se)
		require.Empty(t, tg.Fake.Keys(), "nothing reached the provider")
	})
}

// checkPrivacy fails t if err or any log entry holds personal data of m.
func checkPrivacy(t *testing.T, m *senders.Message, err error, logs *observer.ObservedLogs) {
	t.Helper()
	personal := personalData(m)
	if err != nil {
		for _, p := range personal {
			require.NotContains(t, err.Error(), p, "error text holds personal data")
		}
	}
	for _, e := range logs.All() {
		text := e.Message
		for k, v := range e.ContextMap() {
			b, _ := json.Marshal(v)
			text += " " + k + "=" + string(b)
		}
		for _, p := range personal {
			require.NotContains(t, text, p, "log entry holds personal data")
		}
	}
}

// ClientID is the API client of every message NewMessage returns.
const ClientID = "0192f2c1-5b4e-7000-8000-00000000c11e"

// NewMessage returns a message for tg's channel with every personal field filled in with
// recognisable values, and a fresh UUID as its delivery id.
func NewMessage(tg Target) *senders.Message {
	platform := tg.Platform
	if platform == "" {
		platform = "FCM"
	}
	id := uuid.NewString()
	return &senders.Message{
		DeliveryID:     id,
		NotificationID: uuid.NewString(),
		ClientID:       ClientID,
		Channel:        tg.Channel,
		Priority:       herald.PriorityHigh,
		Attempt:        1,
		Category:       "otp",
		Template:       "otp",
		Locale:         "en",
		Payload:        json.RawMessage(`{"code":"PAYLOAD-493817"}`),
		To: senders.Recipient{
			UserID:     42,
			Email:      "ada.personal@example.org",
			Phone:      "+15005550006",
			PushTokens: []senders.PushToken{{Token: "devtoken" + strings.ReplaceAll(id, "-", ""), Platform: platform}},
			WebhookURL: tg.WebhookURL,
		},
		Content: senders.Content{
			Title:   "TITLE-secret-title",
			Body:    "BODY-your code is 493817",
			Subject: "SUBJECT-your code",
			Text:    "TEXT-your code is 493817",
			HTML:    "<p>HTML-your code is 493817</p>",
			JSON:    json.RawMessage(`{"code":"JSON-493817"}`),
		},
	}
}

// personalData lists the strings of m that must never appear in an error or a log.
func personalData(m *senders.Message) []string {
	out := []string{m.To.Email, m.To.Phone, m.Content.Title, m.Content.Body, m.Content.Subject,
		m.Content.Text, m.Content.HTML, string(m.Content.JSON), "493817"}
	if m.To.WebhookURL != "" {
		out = append(out, m.To.WebhookURL)
	}
	for _, pt := range m.To.PushTokens {
		out = append(out, pt.Token)
	}
	return out
}

// WebhookSecret is the signing secret (Standard Webhooks "whsec_" form, 32 bytes) that
// WebhookSecrets gives ClientID.
const WebhookSecret = "whsec_c2VuZGVydGVzdC13ZWJob29rLXNlY3JldC0zMmI="

// WebhookSecrets is the webhook sender's secret lookup from a map of client id to secrets;
// nil gives ClientID WebhookSecret.
type WebhookSecrets map[string][]string

// WebhookSecrets returns the client's secrets, none for an unknown client.
func (s WebhookSecrets) WebhookSecrets(_ context.Context, clientID string) ([]string, error) {
	if s == nil {
		s = WebhookSecrets{ClientID: {WebhookSecret}}
	}
	return s[clientID], nil
}
