package ingest

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
)

// An OTP pool's API (Priorities HIGH) accepts HIGH notifications and refuses a NORMAL or LOW
// notification, and any campaign, with 422 priority_not_accepted, writing nothing; the
// default accepts every priority.
func TestAPIAcceptsItsPrioritiesOnly(t *testing.T) {
	e := newEnvWith(t, Config{Priorities: []herald.Priority{herald.PriorityHigh}}, zaptest.NewLogger(t))
	e.template("otp", "security", "SMS")
	e.user(1, map[string]any{"phone": "+15551230001"})

	a := e.accepted("k1", `{"userId": 1, "template": "otp", "priority": "HIGH", "channels": ["SMS"]}`)
	require.Equal(t, map[string]string{"SMS": "PENDING"}, channelsOf(a["deliveries"]))
	for i, body := range []string{
		`{"userId": 1, "template": "otp", "priority": "NORMAL", "channels": ["SMS"]}`,
		`{"userId": 1, "template": "otp", "channels": ["SMS"]}`, // NORMAL, the default
		`{"userId": 1, "template": "otp", "priority": "LOW", "channels": ["SMS"]}`,
	} {
		res := e.post("refused-"+string(rune('a'+i)), body)
		p := requireProblem(t, res, http.StatusUnprocessableEntity, "priority_not_accepted")
		require.Contains(t, p["detail"], "accepts HIGH only")
	}
	notes, deliveries := e.rows()
	require.Equal(t, [2]int{1, 1}, [2]int{notes, deliveries}, "the refused requests wrote nothing")
	var keys int
	require.NoError(t, e.pool.QueryRow(t.Context(), `SELECT count(*) FROM idempotency_key WHERE idempotency_key LIKE 'refused-%'`).Scan(&keys))
	require.Zero(t, keys)

	res := e.postCampaign("c1", map[string]any{"name": "winter sale", "template": "otp", "channels": []string{"SMS"},
		"audience": map[string]any{"segment": map[string]any{}}})
	requireProblem(t, res, http.StatusUnprocessableEntity, "priority_not_accepted")
	require.Equal(t, [4]int{0, 0, 1, 1}, e.campaignRows(), "no campaign written: the one HIGH notification only")

	// Bad input is still judged first: a body that cannot be decoded is a 400.
	requireProblem(t, e.post("k2", `{"userId": 1, "template": "otp", "priority": "URGENT"}`), http.StatusBadRequest, "validation_failed")

	all := newEnv(t)
	all.template("otp", "security", "SMS")
	all.user(1, map[string]any{"phone": "+15551230001"})
	for _, p := range herald.Priorities {
		all.accepted("k-"+string(p), `{"userId": 1, "template": "otp", "priority": "`+string(p)+`", "channels": ["SMS"]}`)
	}
}

// Priorities names each priority once.
func TestConfigPrioritiesAreValid(t *testing.T) {
	for _, ps := range [][]herald.Priority{{"URGENT"}, {herald.PriorityHigh, herald.PriorityHigh}} {
		c := Config{Priorities: ps}.withDefaults(4)
		require.ErrorContains(t, c.validate(), "Priorities", "%v", ps)
	}
	c := Config{}.withDefaults(4)
	require.NoError(t, c.validate())
	require.Equal(t, herald.Priorities, c.Priorities, "every priority by default")
	require.True(t, Config{Priorities: []herald.Priority{herald.PriorityHigh}}.HighOnly())
	require.False(t, Config{}.HighOnly())
	require.False(t, Config{Priorities: []herald.Priority{herald.PriorityHigh, herald.PriorityNormal}}.HighOnly())
}
