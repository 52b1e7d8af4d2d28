package fcm

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gojwt "github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
	"github.com/heraldhq/herald/senders/sendertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	keyOnce sync.Once
	key     *rsa.PrivateKey
)

func testKey(t *testing.T) *rsa.PrivateKey {
	keyOnce.Do(func() {
		var err error
		key, err = rsa.GenerateKey(rand.Reader, 2048)
		require.NoError(t, err)
	})
	return key
}

func credentials(t *testing.T, tokenURL string) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(testKey(t))
	require.NoError(t, err)
	b, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "herald-test", "private_key_id": "kid1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "herald@herald-test.iam.gserviceaccount.com", "token_uri": tokenURL,
	})
	require.NoError(t, err)
	return b
}

// tokenEndpoint answers the JWT bearer grant after checking the assertion's signature.
func tokenEndpoint(t *testing.T, fetches *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/token" || r.ParseForm() != nil ||
			r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
			http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
			return
		}
		claims := gojwt.MapClaims{}
		_, err := gojwt.ParseWithClaims(r.PostForm.Get("assertion"), claims, func(*gojwt.Token) (any, error) {
			return &testKey(t).PublicKey, nil
		}, gojwt.WithValidMethods([]string{"RS256"}))
		if err != nil || claims["scope"] != Scope || claims["iss"] != "herald@herald-test.iam.gserviceaccount.com" {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"ya29.test","token_type":"Bearer","expires_in":3600}`))
	})
}

func fcmError(w http.ResponseWriter, status int, canonical, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": status, "status": canonical, "message": "Requested entity was not found.",
		"details": []map[string]string{{"@type": fcmErrorType, "errorCode": code}},
	}})
}

type fixture struct {
	fake    *sendertest.HTTPFake
	fetches atomic.Int32
	bodies  chan []byte
}

func newFixture(t *testing.T, respond func(w http.ResponseWriter, o sendertest.Outcome)) *fixture {
	f := &fixture{bodies: make(chan []byte, 16)}
	f.fake = sendertest.NewHTTPFake(t, sendertest.HTTPFakeConfig{
		Key: func(r *http.Request, body []byte) (string, bool) {
			if r.URL.Path != "/v1/projects/herald-test/messages:send" {
				return "", false
			}
			var req request
			_ = json.Unmarshal(body, &req)
			return req.Message.Data[DataKeyDeliveryID], true
		},
		Respond: func(w http.ResponseWriter, r *http.Request, body []byte, o sendertest.Outcome) {
			if r.Header.Get("Authorization") != "Bearer ya29.test" {
				fcmError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "")
				return
			}
			select {
			case f.bodies <- body:
			default:
			}
			respond(w, o)
		},
		Other: tokenEndpoint(t, &f.fetches),
	})
	return f
}

func standard(w http.ResponseWriter, o sendertest.Outcome) {
	switch o {
	case sendertest.Accept:
		_, _ = w.Write([]byte(`{"name":"projects/herald-test/messages/0:1500415314455276%31bd1c9631bd1c96"}`))
	case sendertest.Reject:
		fcmError(w, http.StatusNotFound, "NOT_FOUND", "UNREGISTERED")
	case sendertest.Unavailable:
		fcmError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "UNAVAILABLE")
	case sendertest.RateLimit:
		w.Header().Set("Retry-After", "11")
		fcmError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED")
	}
}

func (f *fixture) sender(t *testing.T, log *zap.Logger, timeout time.Duration) *Sender {
	s, err := New(Config{CredentialsJSON: credentials(t, f.fake.Server.URL+"/token"), BaseURL: f.fake.Server.URL, Timeout: timeout}, log)
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	sendertest.Run(t, func(t *testing.T, log *zap.Logger, timeout time.Duration) sendertest.Target {
		f := newFixture(t, standard)
		return sendertest.Target{
			Sender: f.sender(t, log, timeout), Fake: f.fake, Channel: herald.ChannelPush, Platform: "FCM",
			RetryAfter: 11 * time.Second,
			Codes: map[sendertest.Outcome]string{sendertest.Reject: "UNREGISTERED", sendertest.Unavailable: "UNAVAILABLE",
				sendertest.RateLimit: "QUOTA_EXCEEDED"},
		}
	})
}

func TestMessageShapeAndTokenReuse(t *testing.T) {
	f := newFixture(t, standard)
	s := f.sender(t, zap.NewNop(), 5*time.Second)
	for range 3 {
		m := sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelPush, Platform: "FCM"})
		res, err := s.Send(context.Background(), m)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(res.ProviderMessageID, "projects/herald-test/messages/"))
	}
	require.Equal(t, int32(1), f.fetches.Load(), "one access token serves every send")
	var req map[string]any
	require.NoError(t, json.Unmarshal(<-f.bodies, &req))
	msg := req["message"].(map[string]any)
	require.Equal(t, map[string]any{"title": "TITLE-secret-title", "body": "BODY-your code is 493817"}, msg["notification"])
	require.Equal(t, "HIGH", msg["android"].(map[string]any)["priority"])
	require.NotEmpty(t, msg["data"].(map[string]any)[DataKeyDeliveryID])
}

func TestClassifyAndInvalidTokens(t *testing.T) {
	for _, tc := range []struct {
		status           int
		canonical, code  string
		want             senders.Class
		removesTheDevice bool
	}{
		{404, "NOT_FOUND", "UNREGISTERED", senders.Permanent, true},
		{403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH", senders.Permanent, true},
		{400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", senders.Permanent, false},
		{429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", senders.Transient, false},
		{503, "UNAVAILABLE", "UNAVAILABLE", senders.Transient, false},
		{500, "INTERNAL", "INTERNAL", senders.Transient, false},
		{401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR", senders.Transient, false},
	} {
		f := newFixture(t, func(w http.ResponseWriter, _ sendertest.Outcome) { fcmError(w, tc.status, tc.canonical, tc.code) })
		m := sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelPush, Platform: "FCM"})
		res, err := f.sender(t, zap.NewNop(), time.Second).Send(context.Background(), m)
		class, se := senders.Classify(err)
		require.Equal(t, tc.want, class, tc.code)
		require.Equal(t, tc.code, se.Code)
		if tc.removesTheDevice {
			require.Equal(t, []string{m.To.PushTokens[0].Token}, res.InvalidTokens)
		} else {
			require.Empty(t, res.InvalidTokens)
		}
	}
}

func TestTokenEndpointFailureIsTransient(t *testing.T) {
	f := newFixture(t, standard)
	creds := credentials(t, f.fake.Server.URL+"/token")
	var sa map[string]string
	require.NoError(t, json.Unmarshal(creds, &sa))
	sa["client_email"] = "someone-else@herald-test.iam.gserviceaccount.com"
	creds, _ = json.Marshal(sa)
	s, err := New(Config{CredentialsJSON: creds, BaseURL: f.fake.Server.URL}, zap.NewNop())
	require.NoError(t, err)
	_, err = s.Send(context.Background(), sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelPush, Platform: "FCM"}))
	class, se := senders.Classify(err)
	require.Equal(t, senders.Transient, class, "%v", err)
	require.Equal(t, "oauth", se.Code)
	require.Empty(t, f.fake.Keys())
}

func TestNoFCMToken(t *testing.T) {
	f := newFixture(t, standard)
	m := sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelPush, Platform: "APNS"})
	_, err := f.sender(t, zap.NewNop(), time.Second).Send(context.Background(), m)
	class, _ := senders.Classify(err)
	require.Equal(t, senders.Permanent, class)
}

func TestConfigValidation(t *testing.T) {
	for name, creds := range map[string]string{
		"not json":       `{`,
		"not an account": `{"type":"authorized_user"}`,
		"bad key":        `{"type":"service_account","project_id":"p","client_email":"a@b","private_key":"nope"}`,
		"no project":     `{"type":"service_account","client_email":"a@b","private_key":"` + strings.ReplaceAll(string(pemKey(t)), "\n", `\n`) + `"}`,
	} {
		_, err := New(Config{CredentialsJSON: []byte(creds)}, zap.NewNop())
		require.Error(t, err, name)
	}
}

func pemKey(t *testing.T) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(testKey(t))
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}
