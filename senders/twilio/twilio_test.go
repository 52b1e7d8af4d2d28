package twilio

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
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

const path = "/2010-04-01/Accounts/ACtest/Messages.json"

// twilioError writes Twilio's error body.
func twilioError(w http.ResponseWriter, status, code int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": code, "status": status,
		"message": "The 'To' number +15005550006 is not valid", "more_info": fmt.Sprintf("https://www.twilio.com/docs/errors/%d", code)})
}

func newFake(t *testing.T, respond func(w http.ResponseWriter, o sendertest.Outcome)) *sendertest.HTTPFake {
	return sendertest.NewHTTPFake(t, sendertest.HTTPFakeConfig{
		Key: func(r *http.Request, body []byte) (string, bool) {
			if r.URL.Path != path {
				return "", false
			}
			return r.Header.Get("Idempotency-Key"), true
		},
		Respond: func(w http.ResponseWriter, r *http.Request, body []byte, o sendertest.Outcome) {
			user, pass, ok := r.BasicAuth()
			form, err := url.ParseQuery(string(body))
			if !ok || user != "ACtest" || pass != "token" || err != nil || form.Get("To") == "" ||
				form.Get("From") != "+15005550001" || form.Get("Body") == "" {
				twilioError(w, http.StatusBadRequest, 21604)
				return
			}
			respond(w, o)
		},
	})
}

func standard(w http.ResponseWriter, o sendertest.Outcome) {
	switch o {
	case sendertest.Accept:
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"sid":"SM123","status":"queued"}`))
	case sendertest.Reject:
		twilioError(w, http.StatusBadRequest, 21211)
	case sendertest.Unavailable:
		twilioError(w, http.StatusServiceUnavailable, 20503)
	case sendertest.RateLimit:
		w.Header().Set("Retry-After", "3")
		twilioError(w, http.StatusTooManyRequests, 20429)
	}
}

func newSender(t *testing.T, base string, log *zap.Logger, timeout time.Duration) *Sender {
	s, err := New(Config{AccountSID: "ACtest", Password: "token", From: "+15005550001", BaseURL: base, Timeout: timeout}, log)
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	sendertest.Run(t, func(t *testing.T, log *zap.Logger, timeout time.Duration) sendertest.Target {
		fake := newFake(t, standard)
		return sendertest.Target{
			Sender: newSender(t, fake.Server.URL, log, timeout), Fake: fake, Channel: herald.ChannelSMS,
			RetryAfter: 3 * time.Second,
			Codes: map[sendertest.Outcome]string{sendertest.Reject: "21211", sendertest.Unavailable: "20503",
				sendertest.RateLimit: "20429"},
			Classes: map[sendertest.Outcome]senders.Class{sendertest.Unavailable: senders.Ambiguous},
		}
	})
}

func TestProviderMessageID(t *testing.T) {
	fake := newFake(t, standard)
	res, err := newSender(t, fake.Server.URL, zap.NewNop(), time.Second).Send(context.Background(), sendertest.NewMessage(sendertest.Target{}))
	require.NoError(t, err)
	require.Equal(t, "SM123", res.ProviderMessageID)
	require.Equal(t, "201", res.Code)
}

func TestClassifyCodes(t *testing.T) {
	for _, tc := range []struct {
		status, code int
		want         senders.Class
	}{
		{400, 21211, senders.Permanent},
		{400, 21610, senders.Permanent},
		{400, 21614, senders.Permanent},
		{400, 21612, senders.Permanent},
		{429, 20429, senders.Transient},
		{429, 0, senders.Transient},
		{401, 20003, senders.Transient},
		{500, 20500, senders.Ambiguous},
		{503, 20503, senders.Ambiguous},
		{502, 0, senders.Ambiguous},
		{504, 0, senders.Ambiguous},
		{400, 99999, senders.Permanent},
		{404, 20404, senders.Permanent},
	} {
		fake := newFake(t, func(w http.ResponseWriter, _ sendertest.Outcome) {
			if tc.code == 0 {
				w.WriteHeader(tc.status)
				return
			}
			twilioError(w, tc.status, tc.code)
		})
		_, err := newSender(t, fake.Server.URL, zap.NewNop(), time.Second).Send(context.Background(), sendertest.NewMessage(sendertest.Target{}))
		class, se := senders.Classify(err)
		require.Equal(t, tc.want, class, "%d/%d", tc.status, tc.code)
		if tc.code != 0 {
			require.Equal(t, fmt.Sprint(tc.code), se.Code)
		}
		require.NotContains(t, err.Error(), "+15005550006")
	}
}

func TestConfigValidation(t *testing.T) {
	_, err := New(Config{AccountSID: "AC1", Password: "x"}, zap.NewNop())
	require.Error(t, err)
	_, err = New(Config{AccountSID: "AC1", From: "+1"}, zap.NewNop())
	require.Error(t, err)
	s, err := New(Config{AccountSID: "AC1", Password: "x", MessagingServiceSID: "MG1"}, zap.NewNop())
	require.NoError(t, err)
	require.Equal(t, "sms:twilio", s.Provider())
}

// TestStatusCallback: with StatusCallbackURL, every create asks for status callbacks at that
// URL with the delivery id as its deliveryId parameter; without it, none is asked for.
func TestStatusCallback(t *testing.T) {
	got := make(chan url.Values, 2)
	srv := httptestServer(t, func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		got <- r.PostForm
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"sid":"SM1"}`))
	})
	cfg := Config{AccountSID: "ACtest", Password: "token", From: "+15005550001", BaseURL: srv,
		StatusCallbackURL: "https://herald.example.com/providers/twilio/status"}
	s, err := New(cfg, zap.NewNop())
	require.NoError(t, err)
	m := sendertest.NewMessage(sendertest.Target{})
	_, err = s.Send(context.Background(), m)
	require.NoError(t, err)
	cb, err := url.Parse((<-got).Get("StatusCallback"))
	require.NoError(t, err)
	require.Equal(t, "herald.example.com", cb.Host)
	require.Equal(t, "/providers/twilio/status", cb.Path)
	require.Equal(t, m.DeliveryID, cb.Query().Get(DeliveryIDParam))

	cfg.StatusCallbackURL = ""
	s, err = New(cfg, zap.NewNop())
	require.NoError(t, err)
	_, err = s.Send(context.Background(), m)
	require.NoError(t, err)
	require.False(t, (<-got).Has("StatusCallback"))
}

func httptestServer(t *testing.T, h http.HandlerFunc) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
