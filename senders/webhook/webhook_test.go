package webhook

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
	"github.com/heraldhq/herald/senders/sendertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func setup(t *testing.T, log *zap.Logger, timeout time.Duration) sendertest.Target {
	fake := sendertest.NewHTTPFake(t, sendertest.HTTPFakeConfig{
		Key: func(r *http.Request, _ []byte) (string, bool) {
			return r.Header.Get(HeaderIdempotencyKey), r.URL.Path == "/hook"
		},
		Respond: func(w http.ResponseWriter, r *http.Request, body []byte, o sendertest.Outcome) {
			if err := Verify(sendertest.WebhookSecret, r.Header, body, time.Now(), time.Minute); err != nil {
				http.Error(w, "bad signature", http.StatusUnauthorized)
				return
			}
			switch o {
			case sendertest.Accept:
				w.WriteHeader(http.StatusNoContent)
			case sendertest.Reject:
				w.WriteHeader(http.StatusGone)
			case sendertest.Unavailable:
				w.WriteHeader(http.StatusServiceUnavailable)
			case sendertest.RateLimit:
				w.Header().Set("Retry-After", "7")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		},
	})
	s, err := New(Config{Timeout: timeout, AllowHTTP: true, AllowLoopback: true}, sendertest.WebhookSecrets(nil), log)
	require.NoError(t, err)
	return sendertest.Target{
		Sender: s, Fake: fake, Channel: herald.ChannelWebhook,
		WebhookURL: fake.Server.URL + "/hook",
		RetryAfter: 7 * time.Second,
		Codes:      map[sendertest.Outcome]string{sendertest.Reject: "410", sendertest.Unavailable: "503", sendertest.RateLimit: "429"},
	}
}

func TestConformance(t *testing.T) { sendertest.Run(t, setup) }

func TestStatusClassification(t *testing.T) {
	for status, want := range map[int]senders.Class{
		400: senders.Permanent, 401: senders.Permanent, 404: senders.Permanent, 408: senders.Transient,
		429: senders.Transient, 500: senders.Transient, 502: senders.Transient, 302: senders.Permanent,
	} {
		srv := sendertest.NewHTTPFake(t, sendertest.HTTPFakeConfig{
			Key: func(*http.Request, []byte) (string, bool) { return "", true },
			Respond: func(w http.ResponseWriter, _ *http.Request, _ []byte, _ sendertest.Outcome) {
				if status == 302 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(status)
			},
		})
		s, err := New(Config{AllowHTTP: true, AllowLoopback: true}, sendertest.WebhookSecrets(nil), zap.NewNop())
		require.NoError(t, err)
		m := sendertest.NewMessage(sendertest.Target{WebhookURL: srv.Server.URL})
		_, err = s.Send(context.Background(), m)
		class, _ := senders.Classify(err)
		require.Equal(t, want, class, "status %d", status)
	}
}

func TestRefusesUnsafeURLs(t *testing.T) {
	fake := sendertest.NewHTTPFake(t, sendertest.HTTPFakeConfig{
		Key:     func(*http.Request, []byte) (string, bool) { return "", true },
		Respond: func(w http.ResponseWriter, _ *http.Request, _ []byte, _ sendertest.Outcome) {},
	})
	strict, err := New(Config{AllowHTTP: true}, sendertest.WebhookSecrets(nil), zap.NewNop())
	require.NoError(t, err)
	noHTTP, err := New(Config{AllowLoopback: true}, sendertest.WebhookSecrets(nil), zap.NewNop())
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		s    *Sender
		url  string
		code string
	}{
		"loopback":   {strict, fake.Server.URL, "blocked_address"},
		"plain_http": {noHTTP, fake.Server.URL, "invalid_url"},
		"relative":   {noHTTP, "/hook", "invalid_url"},
	} {
		m := sendertest.NewMessage(sendertest.Target{WebhookURL: tc.url})
		_, err := tc.s.Send(context.Background(), m)
		class, se := senders.Classify(err)
		require.Equal(t, senders.Permanent, class, name)
		require.Equal(t, tc.code, se.Code, name)
	}
	require.Empty(t, fake.Keys(), "no request reached the server")
}

func TestBodyEnvelope(t *testing.T) {
	m := sendertest.NewMessage(sendertest.Target{})
	m.Content.JSON = nil
	b, err := Body(m)
	require.NoError(t, err)
	require.JSONEq(t, `{"deliveryId":"`+m.DeliveryID+`","notificationId":"`+m.NotificationID+
		`","category":"otp","template":"otp","payload":{"code":"PAYLOAD-493817"}}`, string(b))
}

type failingSecrets struct{}

func (failingSecrets) WebhookSecrets(context.Context, string) ([]string, error) {
	return nil, errors.New("database unavailable")
}

// TestSigningSecretMissing: a client without a secret ends the delivery (permanent); a
// failed lookup is retried (transient). Neither sends anything.
func TestSigningSecretMissing(t *testing.T) {
	fake := sendertest.NewHTTPFake(t, sendertest.HTTPFakeConfig{
		Key:     func(*http.Request, []byte) (string, bool) { return "", true },
		Respond: func(w http.ResponseWriter, _ *http.Request, _ []byte, _ sendertest.Outcome) {},
	})
	for name, tc := range map[string]struct {
		secrets Secrets
		class   senders.Class
		code    string
	}{
		"unknown client": {sendertest.WebhookSecrets{}, senders.Permanent, "no_signing_secret"},
		"bad secret":     {sendertest.WebhookSecrets{sendertest.ClientID: {"not base64!"}}, senders.Permanent, "no_signing_secret"},
		"lookup failed":  {failingSecrets{}, senders.Transient, "secret_lookup"},
	} {
		s, err := New(Config{AllowHTTP: true, AllowLoopback: true}, tc.secrets, zap.NewNop())
		require.NoError(t, err)
		_, err = s.Send(context.Background(), sendertest.NewMessage(sendertest.Target{WebhookURL: fake.Server.URL}))
		class, se := senders.Classify(err)
		require.Equal(t, tc.class, class, name)
		require.Equal(t, tc.code, se.Code, name)
		require.NoError(t, s.Close())
	}
	require.Empty(t, fake.Keys(), "nothing was sent")
	_, err := New(Config{}, nil, zap.NewNop())
	require.Error(t, err)
}
