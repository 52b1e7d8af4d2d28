package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
	"github.com/heraldhq/herald/senders/sendertest"
)

func TestDuplicatesLatencyAndControlAPI(t *testing.T) {
	s := start(t, Config{Latency: map[string]Latency{Webhook: {Min: time.Millisecond, Median: 2 * time.Millisecond, P99: 5 * time.Millisecond}}})
	snd := newSender(t, s, Webhook, zap.NewNop(), 5*time.Second)
	m := sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelWebhook, WebhookURL: "http://" + s.Addr() + "/webhook/x"})
	for range 3 {
		_, err := snd.Send(context.Background(), m)
		require.NoError(t, err)
	}
	st := s.Stats()[Webhook]
	require.Equal(t, int64(3), st.Requests)
	require.Equal(t, int64(1), st.Distinct)
	require.Equal(t, int64(2), st.Duplicates)
	for _, r := range s.Records(Webhook) {
		require.GreaterOrEqual(t, r.DelayMs, 1.0, "latency floor")
		require.Equal(t, m.DeliveryID, r.Key)
	}

	base := "http://" + s.Addr()
	resp, err := http.Get(base + "/records?provider=webhook&since=1")
	require.NoError(t, err)
	var page struct {
		Records []Record `json:"records"`
		Next    int64    `json:"next"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
	resp.Body.Close()
	require.Len(t, page.Records, 2)
	require.Equal(t, int64(3), page.Next)

	req, _ := http.NewRequest(http.MethodPut, base+"/faults/webhook", strings.NewReader(`{"unavailable":1,"retryAfter":"4s"}`))
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	_, err = snd.Send(context.Background(), m)
	class, se := senders.Classify(err)
	require.Equal(t, senders.Transient, class)
	require.Equal(t, 4*time.Second, se.RetryAfter)

	req, _ = http.NewRequest(http.MethodPut, base+"/faults/webhook", strings.NewReader(`{"unavailable":0.7,"permanent":0.7}`))
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "rates summing past 1 are refused")

	resp, err = http.Post(base+"/reset", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Empty(t, s.Records(""))
}

func TestParseSpec(t *testing.T) {
	var cfg Config
	require.NoError(t, ParseSpec("all.median=20ms, all.p99=200ms,fcm.unavailable=0.05,twilio.ratelimit=0.1,twilio.retryafter=2s", &cfg))
	require.Equal(t, Latency{Median: 20 * time.Millisecond, P99: 200 * time.Millisecond}, cfg.Latency[APNs])
	require.Equal(t, Faults{Unavailable: 0.05}, cfg.Faults[FCM])
	require.Equal(t, Faults{RateLimit: 0.1, RetryAfter: 2 * time.Second}, cfg.Faults[Twilio])
	for _, bad := range []string{"fcm", "fax.timeout=0.1", "fcm.color=red", "fcm.timeout=x", "fcm.timeout=2", "all.median=1s,all.p99=1ms"} {
		require.Error(t, ParseSpec(bad, &Config{}), bad)
	}
}

func TestConfigValidation(t *testing.T) {
	_, err := New(Config{Addr: "127.0.0.1:0", Faults: map[string]Faults{FCM: {RateLimit: 1.5}}}, zap.NewNop())
	require.Error(t, err)
	_, err = New(Config{Addr: "127.0.0.1:0", DefaultLatency: Latency{Median: time.Second, P99: time.Millisecond}}, zap.NewNop())
	require.Error(t, err)
}
