package apns

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
	"github.com/heraldhq/herald/senders/sendertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	fake   *sendertest.HTTPFake
	key    *ecdsa.PrivateKey
	tokens atomic.Value // last bearer token seen
	h2     atomic.Bool  // every request arrived over HTTP/2
	body   atomic.Value // last payload
}

func apnsError(w http.ResponseWriter, status int, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(`{"reason":"` + reason + `"}`))
}

func newFixture(t *testing.T, respond func(w http.ResponseWriter, o sendertest.Outcome)) *fixture {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	f := &fixture{key: key}
	f.h2.Store(true)
	f.fake = sendertest.NewHTTPFake(t, sendertest.HTTPFakeConfig{
		TLS: true,
		Key: func(r *http.Request, _ []byte) (string, bool) {
			return r.Header.Get("apns-id"), strings.HasPrefix(r.URL.Path, "/3/device/")
		},
		Respond: func(w http.ResponseWriter, r *http.Request, body []byte, o sendertest.Outcome) {
			if r.ProtoMajor != 2 {
				f.h2.Store(false)
			}
			bearer := strings.TrimPrefix(r.Header.Get("authorization"), "bearer ")
			tok, err := jwt.Parse(bearer, func(*jwt.Token) (any, error) { return &key.PublicKey, nil },
				jwt.WithValidMethods([]string{"ES256"}), jwt.WithIssuedAt())
			if err != nil || tok.Header["kid"] != "KEYID12345" || r.Header.Get("apns-topic") != "com.example.app" {
				apnsError(w, http.StatusForbidden, "InvalidProviderToken")
				return
			}
			f.tokens.Store(bearer)
			f.body.Store(body)
			w.Header().Set("apns-id", r.Header.Get("apns-id"))
			respond(w, o)
		},
	})
	return f
}

func standard(w http.ResponseWriter, o sendertest.Outcome) {
	switch o {
	case sendertest.Accept:
		w.WriteHeader(http.StatusOK)
	case sendertest.Reject:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGone)
		_, _ = w.Write([]byte(`{"reason":"Unregistered","timestamp":1700000000000}`))
	case sendertest.Unavailable:
		apnsError(w, http.StatusServiceUnavailable, "ServiceUnavailable")
	case sendertest.RateLimit:
		w.Header().Set("Retry-After", "5")
		apnsError(w, http.StatusTooManyRequests, "TooManyRequests")
	}
}

func (f *fixture) sender(t *testing.T, log *zap.Logger, timeout time.Duration) *Sender {
	der, err := x509.MarshalPKCS8PrivateKey(f.key)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(f.fake.Server.Certificate())
	s, err := New(Config{
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), KeyID: "KEYID12345", TeamID: "TEAMID1234",
		Topic: "com.example.app", BaseURL: f.fake.Server.URL, Timeout: timeout,
		HTTP: senders.HTTPConfig{TLSConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}},
	}, log)
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	sendertest.Run(t, func(t *testing.T, log *zap.Logger, timeout time.Duration) sendertest.Target {
		f := newFixture(t, standard)
		return sendertest.Target{
			Sender: f.sender(t, log, timeout), Fake: f.fake, Channel: herald.ChannelPush, Platform: "APNS",
			RetryAfter: 5 * time.Second,
			Codes: map[sendertest.Outcome]string{sendertest.Reject: "Unregistered", sendertest.Unavailable: "ServiceUnavailable",
				sendertest.RateLimit: "TooManyRequests"},
		}
	})
}

func TestHTTP2PayloadAndTokenReuse(t *testing.T) {
	f := newFixture(t, standard)
	s := f.sender(t, zap.NewNop(), 5*time.Second)
	var first string
	for i := range 3 {
		m := sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelPush, Platform: "APNS"})
		res, err := s.Send(context.Background(), m)
		require.NoError(t, err)
		require.Equal(t, m.DeliveryID, res.ProviderMessageID)
		if i == 0 {
			first = f.tokens.Load().(string)
		}
		require.Equal(t, first, f.tokens.Load(), "the provider token is reused")
	}
	require.True(t, f.h2.Load(), "requests use HTTP/2")
	var p map[string]any
	require.NoError(t, json.Unmarshal(f.body.Load().([]byte), &p))
	require.Equal(t, map[string]any{"alert": map[string]any{"title": "TITLE-secret-title", "body": "BODY-your code is 493817"}}, p["aps"])
}

func TestClassifyAndInvalidTokens(t *testing.T) {
	for _, tc := range []struct {
		status  int
		reason  string
		want    senders.Class
		removes bool
	}{
		{410, "Unregistered", senders.Permanent, true},
		{400, "BadDeviceToken", senders.Permanent, true},
		{400, "DeviceTokenNotForTopic", senders.Permanent, true},
		{413, "PayloadTooLarge", senders.Permanent, false},
		{429, "TooManyRequests", senders.Transient, false},
		{503, "Shutdown", senders.Transient, false},
		{500, "InternalServerError", senders.Transient, false},
		{403, "ExpiredProviderToken", senders.Transient, false},
		{400, "SomethingNew", senders.Permanent, false},
	} {
		f := newFixture(t, func(w http.ResponseWriter, _ sendertest.Outcome) { apnsError(w, tc.status, tc.reason) })
		m := sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelPush, Platform: "APNS"})
		res, err := f.sender(t, zap.NewNop(), time.Second).Send(context.Background(), m)
		class, se := senders.Classify(err)
		require.Equal(t, tc.want, class, tc.reason)
		require.Equal(t, tc.reason, se.Code)
		if tc.removes {
			require.Equal(t, []string{m.To.PushTokens[0].Token}, res.InvalidTokens)
		} else {
			require.Empty(t, res.InvalidTokens)
		}
	}
}

func TestExpiredProviderTokenIsRefreshed(t *testing.T) {
	var calls atomic.Int32
	f := newFixture(t, func(w http.ResponseWriter, _ sendertest.Outcome) {
		if calls.Add(1) == 1 {
			apnsError(w, http.StatusForbidden, "ExpiredProviderToken")
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	s := f.sender(t, zap.NewNop(), time.Second)
	first, err := s.tokens.get()
	require.NoError(t, err)
	s.tokens.now = func() time.Time { return time.Now().Add(-2 * time.Second) } // another iat
	_, err = s.Send(context.Background(), sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelPush, Platform: "APNS"}))
	require.Error(t, err)
	_, err = s.Send(context.Background(), sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelPush, Platform: "APNS"}))
	require.NoError(t, err)
	require.NotEqual(t, first, f.tokens.Load(), "a new provider token after ExpiredProviderToken")
}
