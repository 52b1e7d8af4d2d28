package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders/sendertest"
	"github.com/heraldhq/herald/senders/webhook"
)

// A webhook whose URL points at a non-public address, through the real webhook sender with
// its production defaults, ends FAILED after one attempt with code blocked_address: the
// refusal is permanent, so it is neither retried nor allowed to reach the address.
func TestBlockedWebhookFailsAfterOneAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, err := webhook.New(webhook.Config{Timeout: 2 * time.Second}, sendertest.WebhookSecrets{e.clientID: {sendertest.WebhookSecret}}, zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	cfg := e.config()
	cfg.RetryPolicies = map[herald.Channel]RetryPolicy{herald.ChannelWebhook: {Base: 10 * time.Millisecond, Max: 50 * time.Millisecond, MaxAttempts: 4}}
	e.start(cfg, nil, map[herald.Channel]Sender{herald.ChannelWebhook: s})
	e.sweep()

	urls := []string{"https://100.64.0.1/hook", "https://169.254.169.254/latest/meta-data/", "https://[::ffff:10.0.0.1]/hook"}
	var ids []string
	for i, u := range urls {
		user := int64(900 + i)
		_, err := e.pool.Exec(context.Background(), `INSERT INTO user_contact (user_id, webhook_url) VALUES ($1, $2)`, user, u)
		require.NoError(t, err)
		ids = append(ids, e.insert(fixture{Channel: herald.ChannelWebhook, UserID: user}))
	}
	e.publish(ids...)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusFailed}, ids...)
	for i, id := range ids {
		_, n := e.state(id)
		require.Equal(t, 1, n, urls[i])
		as := e.attempts(id)
		require.Len(t, as, 1, urls[i])
		require.Equal(t, "PERMANENT", as[0].Outcome, urls[i])
		require.Equal(t, "blocked_address", *as[0].Code, urls[i])
		require.Nil(t, as[0].NextAttempt)
	}
}
