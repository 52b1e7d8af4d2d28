package sendgrid

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
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

func sgErrors(w http.ResponseWriter, status int, field any, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]any{{"field": field, "message": message, "help": nil}}})
}

// fake is a local v3 mail/send endpoint: it checks the bearer key and the body as SendGrid
// does (400 with an errors array) and keeps the last body.
type fake struct {
	*sendertest.HTTPFake
	mu   sync.Mutex
	last mailSend
}

func (f *fake) body() mailSend {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func newFake(t *testing.T, respond func(w http.ResponseWriter, o sendertest.Outcome)) *fake {
	f := &fake{}
	f.HTTPFake = sendertest.NewHTTPFake(t, sendertest.HTTPFakeConfig{
		Key: func(r *http.Request, body []byte) (string, bool) {
			if r.URL.Path != "/v3/mail/send" || r.Method != http.MethodPost {
				return "", false
			}
			var m mailSend
			_ = json.Unmarshal(body, &m)
			return m.CustomArgs[DeliveryIDArg], true
		},
		Respond: func(w http.ResponseWriter, r *http.Request, body []byte, o sendertest.Outcome) {
			var m mailSend
			err := json.Unmarshal(body, &m)
			f.mu.Lock()
			f.last = m
			f.mu.Unlock()
			switch {
			case r.Header.Get("Authorization") != "Bearer SG.test-key":
				sgErrors(w, http.StatusUnauthorized, nil, "The provided authorization grant is invalid, expired, or revoked")
			case err != nil || r.Header.Get("Content-Type") != "application/json":
				sgErrors(w, http.StatusBadRequest, nil, "Bad Request")
			case len(m.Personalizations) != 1 || len(m.Personalizations[0].To) != 1 || m.From.Email == "" ||
				m.Subject == "" || len(m.Content) == 0 || (len(m.Content) > 1 && m.Content[0].Type != "text/plain"):
				sgErrors(w, http.StatusBadRequest, "personalizations", "invalid request")
			default:
				respond(w, o)
			}
		},
	})
	return f
}

func standard(w http.ResponseWriter, o sendertest.Outcome) {
	switch o {
	case sendertest.Accept:
		w.Header().Set("X-Message-Id", "W1TrA3yVR4a5dnS1lC2J7g")
		w.WriteHeader(http.StatusAccepted)
	case sendertest.Reject:
		sgErrors(w, http.StatusBadRequest, "personalizations.0.to.0.email", "ada.personal@example.org does not contain a valid address.")
	case sendertest.Unavailable:
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusServiceUnavailable)
	case sendertest.RateLimit:
		w.Header().Set("X-RateLimit-Limit", "600")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(9*time.Second).Unix(), 10))
		w.Header().Set("Retry-After", "4") // wins; X-RateLimit-Reset alone: TestClassify
		sgErrors(w, http.StatusTooManyRequests, nil, "too many requests")
	}
}

func newSender(t *testing.T, base string, log *zap.Logger, timeout time.Duration) *Sender {
	s, err := New(Config{APIKey: "SG.test-key", From: "Herald <no-reply@herald.example>", BaseURL: base, Timeout: timeout}, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	sendertest.Run(t, func(t *testing.T, log *zap.Logger, timeout time.Duration) sendertest.Target {
		f := newFake(t, standard)
		return sendertest.Target{
			Sender: newSender(t, f.Server.URL, log, timeout), Fake: f, Channel: herald.ChannelEmail,
			RetryAfter: 4 * time.Second,
			Codes:      map[sendertest.Outcome]string{sendertest.Reject: "400", sendertest.Unavailable: "503", sendertest.RateLimit: "429"},
		}
	})
}

func TestRequestBody(t *testing.T) {
	f := newFake(t, standard)
	m := sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelEmail})
	res, err := newSender(t, f.Server.URL, zap.NewNop(), time.Second).Send(context.Background(), m)
	require.NoError(t, err)
	require.Equal(t, senders.Result{Provider: "email:sendgrid", ProviderMessageID: "W1TrA3yVR4a5dnS1lC2J7g", Code: "202"}, res)
	require.Equal(t, mailSend{
		Personalizations: []personalization{{To: []address{{Email: m.To.Email}}}},
		From:             address{Email: "no-reply@herald.example", Name: "Herald"},
		Subject:          m.Content.Subject,
		Content:          []content{{"text/plain", m.Content.Text}, {"text/html", m.Content.HTML}},
		CustomArgs:       map[string]string{DeliveryIDArg: m.DeliveryID},
	}, f.body())

	// A template with an HTML part only sends that part; one with neither is not sent.
	m.Content.Text = ""
	_, err = newSender(t, f.Server.URL, zap.NewNop(), time.Second).Send(context.Background(), m)
	require.NoError(t, err)
	require.Equal(t, []content{{"text/html", m.Content.HTML}}, f.body().Content)
	m.Content.HTML = ""
	_, err = newSender(t, f.Server.URL, zap.NewNop(), time.Second).Send(context.Background(), m)
	class, se := senders.Classify(err)
	require.Equal(t, senders.Permanent, class)
	require.Equal(t, "no_content", se.Code)
}

func TestClassify(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		status int
		header http.Header
		want   senders.Class
		after  time.Duration
	}{
		{400, nil, senders.Permanent, 0},
		{403, nil, senders.Permanent, 0},
		{413, nil, senders.Permanent, 0},
		{404, nil, senders.Permanent, 0},
		{401, nil, senders.Transient, 0},
		{429, http.Header{"X-Ratelimit-Reset": {"1700000030"}}, senders.Transient, 30 * time.Second},
		{429, http.Header{"Retry-After": {"5"}, "X-Ratelimit-Reset": {"1700000030"}}, senders.Transient, 5 * time.Second},
		{429, http.Header{"X-Ratelimit-Reset": {"1600000000"}}, senders.Transient, 0},
		{429, nil, senders.Transient, 0},
		{503, http.Header{"Retry-After": {"3"}}, senders.Transient, 3 * time.Second},
		{500, nil, senders.Ambiguous, 0},
		{502, nil, senders.Ambiguous, 0},
		{504, nil, senders.Ambiguous, 0},
	} {
		h := tc.header
		if h == nil {
			h = http.Header{}
		}
		se := classify(tc.status, []byte(`{"errors":[{"field":"from.email","message":"The from address does not match a verified Sender Identity"}]}`), h, now)
		require.Equal(t, tc.want, se.Class, "%d", tc.status)
		require.Equal(t, fmt.Sprint(tc.status), se.Code)
		require.Equal(t, tc.after, se.RetryAfter, "%d %v", tc.status, tc.header)
		require.Contains(t, se.Error(), "from.email: The from address does not match a verified Sender Identity")
	}
}

func TestDetailRedactsAddresses(t *testing.T) {
	require.Equal(t, ": personalizations.0.to.0.email: <address> does not contain a valid address.",
		detail([]byte(`{"errors":[{"field":"personalizations.0.to.0.email","message":"ada@example.org does not contain a valid address."}]}`)))
	require.Equal(t, ": too many requests", detail([]byte(`{"errors":[{"field":null,"message":"too many requests"}]}`)))
	require.Equal(t, "", detail([]byte(`<html>502</html>`)))
	long := detail([]byte(fmt.Sprintf(`{"errors":[{"message":%q}]}`, string(make([]byte, 500)))))
	require.LessOrEqual(t, len(long), maxDetail+len(": …"))
}

func TestBadCredentialsAreTransient(t *testing.T) {
	f := newFake(t, standard)
	s, err := New(Config{APIKey: "SG.revoked", From: "no-reply@herald.example", BaseURL: f.Server.URL}, zap.NewNop())
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Send(context.Background(), sendertest.NewMessage(sendertest.Target{}))
	class, se := senders.Classify(err)
	require.Equal(t, senders.Transient, class)
	require.Equal(t, "401", se.Code)
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{From: "a@b.c"},
		{APIKey: "k"},
		{APIKey: "k", From: "not an address"},
		{APIKey: "k", From: "a@b.c", BaseURL: "api.sendgrid.com"},
	} {
		_, err := New(cfg, zap.NewNop())
		require.Error(t, err, "%+v", cfg)
	}
	s, err := New(Config{APIKey: "k", From: "a@b.c"}, zap.NewNop())
	require.NoError(t, err)
	require.Equal(t, "email:sendgrid", s.Provider())
	require.Equal(t, DefaultBaseURL+"/v3/mail/send", s.endpoint)
}
