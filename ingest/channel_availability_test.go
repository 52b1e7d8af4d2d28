package ingest

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/campaign"
)

// An installation that delivers EMAIL and PUSH only (no SMS provider): SMS is suppressed
// channel_unavailable like an opted-out channel, and a request for SMS alone is refused.
func TestUnavailableChannelIsSuppressed(t *testing.T) {
	e := newEnvWith(t, Config{Channels: []herald.Channel{herald.ChannelEmail, herald.ChannelPush}}, zaptest.NewLogger(t))
	e.template("otp", "security", "EMAIL", "SMS")
	e.user(1, map[string]any{"email": "u1@example.com", "phone": "+15551230001"})

	a := e.accepted("k1", `{"userId": 1, "template": "otp", "channels": ["EMAIL", "SMS"]}`)
	require.Equal(t, map[string]string{"EMAIL": "PENDING"}, channelsOf(a["deliveries"]))
	require.Equal(t, map[string]string{"SMS": "channel_unavailable"}, channelsOf(a["suppressed"]))
	notes, deliveries := e.rows()
	require.Equal(t, [2]int{1, 1}, [2]int{notes, deliveries}, "no delivery row for SMS")

	// The unavailable channel wins over the user's own opt-out: it is the installation's.
	res := e.do(http.MethodPut, "/api/users/1/preferences", map[string]any{"optOuts": []map[string]any{{"channel": "SMS"}}}, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	a = e.accepted("k2", `{"userId": 1, "template": "otp", "channels": ["EMAIL", "SMS"]}`)
	require.Equal(t, map[string]string{"SMS": "channel_unavailable"}, channelsOf(a["suppressed"]))

	// Only unavailable channels: 422, nothing written.
	res = e.post("k3", `{"userId": 1, "template": "otp", "channels": ["SMS"]}`)
	p := requireProblem(t, res, http.StatusUnprocessableEntity, "channel_unavailable")
	require.Equal(t, "channels", p["errors"].([]any)[0].(map[string]any)["field"])
	notes, deliveries = e.rows()
	require.Equal(t, [2]int{2, 2}, [2]int{notes, deliveries}, "the refused request wrote nothing")
	var keys int
	require.NoError(t, e.pool.QueryRow(t.Context(), `SELECT count(*) FROM idempotency_key WHERE idempotency_key = 'k3'`).Scan(&keys))
	require.Zero(t, keys)

	// A channel the template lacks is still the client's error (400), checked first.
	res = e.post("k4", `{"userId": 1, "template": "otp", "channels": ["PUSH"]}`)
	requireProblem(t, res, http.StatusBadRequest, "validation_failed")
}

// The default (no Channels): every channel is available, as before.
func TestEveryChannelAvailableByDefault(t *testing.T) {
	e := newEnv(t)
	e.template("otp", "security", "SMS")
	e.user(1, map[string]any{"phone": "+15551230001"})
	a := e.accepted("k1", `{"userId": 1, "template": "otp", "channels": ["SMS"]}`)
	require.Equal(t, map[string]string{"SMS": "PENDING"}, channelsOf(a["deliveries"]))
}

// A campaign counts channel_unavailable among its suppressed pairs; one asking only for
// unavailable channels is refused at create.
func TestCampaignCountsUnavailableChannel(t *testing.T) {
	e := newEnvWith(t, Config{Channels: []herald.Channel{herald.ChannelEmail}}, zaptest.NewLogger(t))
	e.template("promo", "marketing", "SMS", "EMAIL")
	const users = 100
	e.directory(users)

	res := e.postCampaign("c0", map[string]any{"name": "sms only", "template": "promo", "channels": []string{"SMS"},
		"audience": map[string]any{"segment": map[string]any{}}})
	requireProblem(t, res, http.StatusUnprocessableEntity, "channel_unavailable")
	require.Equal(t, [4]int{}, e.campaignRows(), "nothing written")

	res = e.postCampaign("c1", map[string]any{"name": "winter sale", "template": "promo", "channels": []string{"SMS", "EMAIL"},
		"audience": map[string]any{"segment": map[string]any{}}})
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	id := res.json(t)["id"].(string)
	e.runExpander(campaign.ExpanderConfig{Channels: []herald.Channel{herald.ChannelEmail}})
	c := e.waitCampaign(id, "ACTIVE", time.Minute)
	require.Equal(t, map[string]any{"channel_unavailable": float64(users)}, c["suppressed"])
	require.Equal(t, map[string]int{"EMAIL": users}, requireOneDeliveryPerChannel(t, e, id))
}
