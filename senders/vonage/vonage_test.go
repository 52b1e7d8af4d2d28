package vonage

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
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

// part is one entry of the SMS API's "messages" array.
func part(status int, id string) map[string]string {
	p := map[string]string{"to": "15005550006", "status": fmt.Sprint(status)}
	if status == 0 {
		p["message-id"], p["remaining-balance"], p["message-price"], p["network"] = id, "15.5", "0.0333", "23410"
	} else {
		p["error-text"] = "Number 15005550006 refused" // quotes the number, as Vonage may
	}
	return p
}

func answer(w http.ResponseWriter, parts ...map[string]string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"message-count": fmt.Sprint(len(parts)), "messages": parts})
}

// fake is a local SMS API: it checks the credentials and the fields as Vonage does
// (status 2 for a missing one, 4 for bad credentials) and keeps the last form.
type fake struct {
	*sendertest.HTTPFake
	mu   sync.Mutex
	last url.Values
}

func (f *fake) form() url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func newFake(t *testing.T, respond func(w http.ResponseWriter, o sendertest.Outcome)) *fake {
	f := &fake{}
	f.HTTPFake = sendertest.NewHTTPFake(t, sendertest.HTTPFakeConfig{
		Key: func(r *http.Request, body []byte) (string, bool) {
			if r.URL.Path != "/sms/json" || r.Method != http.MethodPost {
				return "", false
			}
			form, _ := url.ParseQuery(string(body))
			return form.Get("client-ref"), true
		},
		Respond: func(w http.ResponseWriter, r *http.Request, body []byte, o sendertest.Outcome) {
			form, err := url.ParseQuery(string(body))
			require.NoError(t, err)
			f.mu.Lock()
			f.last = form
			f.mu.Unlock()
			switch {
			case r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" || r.URL.RawQuery != "":
				answer(w, part(3, ""))
			case form.Get("to") == "" || form.Get("from") == "" || form.Get("text") == "":
				answer(w, part(2, ""))
			case form.Get("api_key") != "key1" || form.Get("api_secret") != "secret1":
				answer(w, part(4, ""))
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
		answer(w, part(0, "0C000000217B7F02"))
	case sendertest.Reject:
		answer(w, part(7, ""))
	case sendertest.Unavailable:
		w.WriteHeader(http.StatusServiceUnavailable)
	case sendertest.RateLimit:
		answer(w, part(1, ""))
	}
}

func newSender(t *testing.T, cfg Config, base string, log *zap.Logger, timeout time.Duration) *Sender {
	cfg.APIKey, cfg.APISecret, cfg.BaseURL, cfg.Timeout = "key1", "secret1", base, timeout
	if cfg.From == "" {
		cfg.From = "+15005550001"
	}
	s, err := New(cfg, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	sendertest.Run(t, func(t *testing.T, log *zap.Logger, timeout time.Duration) sendertest.Target {
		f := newFake(t, standard)
		return sendertest.Target{
			Sender: newSender(t, Config{}, f.Server.URL, log, timeout), Fake: f, Channel: herald.ChannelSMS,
			Codes: map[sendertest.Outcome]string{sendertest.Reject: "7", sendertest.Unavailable: "503", sendertest.RateLimit: "1"},
		}
	})
}

func TestRequestFields(t *testing.T) {
	f := newFake(t, standard)
	m := sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelSMS})
	s := newSender(t, Config{CallbackURL: "https://herald.example.com/providers/vonage/dlr"}, f.Server.URL, zap.NewNop(), time.Second)
	res, err := s.Send(context.Background(), m)
	require.NoError(t, err)
	require.Equal(t, senders.Result{Provider: "sms:vonage", ProviderMessageID: "0C000000217B7F02", Code: "0"}, res)
	form := f.form()
	require.Equal(t, "15005550006", form.Get("to"), "E.164 without the plus")
	require.Equal(t, "15005550001", form.Get("from"))
	require.Equal(t, m.Content.Text, form.Get("text"))
	require.Equal(t, m.DeliveryID, form.Get("client-ref"))
	require.Equal(t, "https://herald.example.com/providers/vonage/dlr", form.Get("callback"))
	require.False(t, form.Has("type"), "plain ASCII is sent as text")

	// No public URL: no callback; an alphanumeric sender as given; unicode text typed so.
	s = newSender(t, Config{From: "Herald"}, f.Server.URL, zap.NewNop(), time.Second)
	m.Content.Text = "Ihr Code: 493817 — gültig 5 Minuten"
	_, err = s.Send(context.Background(), m)
	require.NoError(t, err)
	form = f.form()
	require.False(t, form.Has("callback"))
	require.Equal(t, "Herald", form.Get("from"))
	require.Equal(t, "unicode", form.Get("type"))

	// Bad credentials are Vonage's status 4: Transient, the operator's to fix.
	bad, err := New(Config{APIKey: "key1", APISecret: "wrong", From: "x", BaseURL: f.Server.URL}, zap.NewNop())
	require.NoError(t, err)
	defer bad.Close()
	_, err = bad.Send(context.Background(), m)
	class, se := senders.Classify(err)
	require.Equal(t, senders.Transient, class)
	require.Equal(t, "4", se.Code)
}

func TestClassifyStatuses(t *testing.T) {
	for status, want := range map[int]senders.Class{
		1: senders.Transient, 2: senders.Permanent, 3: senders.Permanent, 4: senders.Transient,
		5: senders.Transient, 6: senders.Permanent, 7: senders.Permanent, 8: senders.Transient,
		9: senders.Transient, 10: senders.Transient, 11: senders.Transient, 12: senders.Permanent,
		14: senders.Transient, 15: senders.Permanent, 22: senders.Permanent, 23: senders.Transient,
		29: senders.Permanent, 32: senders.Transient, 33: senders.Permanent,
		99: senders.Transient, // unpublished: still "not queued"
	} {
		f := newFake(t, func(w http.ResponseWriter, _ sendertest.Outcome) { answer(w, part(status, "")) })
		_, err := newSender(t, Config{}, f.Server.URL, zap.NewNop(), time.Second).Send(context.Background(), sendertest.NewMessage(sendertest.Target{}))
		class, se := senders.Classify(err)
		require.Equal(t, want, class, "status %d", status)
		require.Equal(t, fmt.Sprint(status), se.Code)
		require.NotContains(t, err.Error(), "15005550006", "error-text is never copied")
	}
}

func TestClassifyHTTP(t *testing.T) {
	for _, tc := range []struct {
		status     int
		retryAfter string
		want       senders.Class
	}{
		{429, "7", senders.Transient},
		{503, "2", senders.Transient},
		{401, "", senders.Transient},
		{500, "", senders.Ambiguous},
		{502, "", senders.Ambiguous},
		{504, "", senders.Ambiguous},
		{404, "", senders.Permanent},
		{400, "", senders.Permanent},
	} {
		f := newFake(t, func(w http.ResponseWriter, _ sendertest.Outcome) {
			if tc.retryAfter != "" {
				w.Header().Set("Retry-After", tc.retryAfter)
			}
			w.WriteHeader(tc.status)
		})
		_, err := newSender(t, Config{}, f.Server.URL, zap.NewNop(), time.Second).Send(context.Background(), sendertest.NewMessage(sendertest.Target{}))
		class, se := senders.Classify(err)
		require.Equal(t, tc.want, class, "http %d", tc.status)
		require.Equal(t, fmt.Sprint(tc.status), se.Code)
		if tc.retryAfter != "" {
			require.Equal(t, tc.retryAfter+"s", se.RetryAfter.String())
		}
	}
}

// A long text is split into parts, each with its own status and message-id.
func TestConcatenatedParts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts []map[string]string
		class senders.Class // 0: accepted
		code  string
	}{
		{"all accepted", []map[string]string{part(0, "ID-1"), part(0, "ID-2")}, 0, ""},
		{"second throttled", []map[string]string{part(0, "ID-1"), part(1, "")}, senders.Ambiguous, "1"},
		{"all refused", []map[string]string{part(7, ""), part(7, "")}, senders.Permanent, "7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, _ sendertest.Outcome) { answer(w, tc.parts...) })
			res, err := newSender(t, Config{}, f.Server.URL, zap.NewNop(), time.Second).Send(context.Background(), sendertest.NewMessage(sendertest.Target{}))
			if tc.class == 0 {
				require.NoError(t, err)
				require.Equal(t, "ID-1", res.ProviderMessageID)
				return
			}
			class, se := senders.Classify(err)
			require.Equal(t, tc.class, class)
			require.Equal(t, tc.code, se.Code)
		})
	}
}

func TestUnreadableAnswerIsAmbiguous(t *testing.T) {
	for _, body := range []string{`not json`, `{"message-count":"0","messages":[]}`} {
		f := newFake(t, func(w http.ResponseWriter, _ sendertest.Outcome) { _, _ = w.Write([]byte(body)) })
		_, err := newSender(t, Config{}, f.Server.URL, zap.NewNop(), time.Second).Send(context.Background(), sendertest.NewMessage(sendertest.Target{}))
		class, se := senders.Classify(err)
		require.Equal(t, senders.Ambiguous, class, body)
		require.Equal(t, "bad_response", se.Code)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{APISecret: "s", From: "x"},
		{APIKey: "k", From: "x"},
		{APIKey: "k", APISecret: "s"},
		{APIKey: "k", APISecret: "s", From: "x", BaseURL: "rest.nexmo.com"},
		{APIKey: "k", APISecret: "s", From: "x", CallbackURL: "/providers/vonage/dlr"},
	} {
		_, err := New(cfg, zap.NewNop())
		require.Error(t, err, "%+v", cfg)
	}
	s, err := New(Config{APIKey: "k", APISecret: "s", From: "Herald"}, zap.NewNop())
	require.NoError(t, err)
	require.Equal(t, "sms:vonage", s.Provider())
	require.Equal(t, DefaultBaseURL+"/sms/json", s.endpoint)
}
