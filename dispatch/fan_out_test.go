package dispatch

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/senders"
	"github.com/heraldhq/herald/senders/push"
)

var _ FanOutSender = (*push.Sender)(nil)

// platformFake is a push platform sender that accepts every device and records when each
// call reached it.
type platformFake struct {
	account string
	mu      sync.Mutex
	calls   []admission
}

func (p *platformFake) Provider() string { return p.account }

func (p *platformFake) Send(_ context.Context, _ *senders.Message) (senders.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, admission{at: time.Now()})
	return senders.Result{Provider: p.account}, nil
}

func (p *platformFake) received() []admission {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]admission(nil), p.calls...)
}

// Every device call of a PUSH delivery takes a rate-limit slot of its own platform's account:
// a user with 20 FCM devices against a 10/s FCM limit, and one with 8 iPhones against a 3/s
// APNs limit, never show a provider more than its limit in any one-second window, and both
// deliveries still reach every device in one attempt.
func TestPushFanOutTakesOneSlotPerCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fcm, apns := &platformFake{account: "push:fcm"}, &platformFake{account: "push:apns"}
	ps, err := push.New(push.Config{MaxParallel: 8}, map[string]push.PlatformSender{"FCM": fcm, "APNS": apns}, zap.NewNop())
	require.NoError(t, err)
	cfg := e.config()
	cfg.RateLimits = map[string]int{"push:fcm": 10, "push:apns": 3}
	cfg.RedisTimeout = 2 * time.Second // a stalled test machine must not push the limiter into degraded mode
	e.start(cfg, nil, map[herald.Channel]Sender{herald.ChannelPush: ps})
	e.sweep()

	tokens := map[int64][2]any{601: {20, "FCM"}, 602: {8, "APNS"}}
	var ids []string
	for user, tk := range tokens {
		// One transaction: the sweeper must not pick the delivery up before its tokens exist.
		tx, err := e.pool.Begin(context.Background())
		require.NoError(t, err)
		ids = append(ids, e.insertWith(tx, fixture{Channel: herald.ChannelPush, UserID: user}))
		for i := range tk[0].(int) {
			_, err := tx.Exec(context.Background(), `INSERT INTO push_token (user_id, token, platform) VALUES ($1, $2, $3)`,
				user, fmt.Sprintf("tok-%d-%d", user, i), tk[1])
			require.NoError(t, err)
		}
		require.NoError(t, tx.Commit(context.Background()))
	}
	e.publish(ids...)
	e.waitStatus(60*time.Second, []herald.Status{herald.StatusSent}, ids...)

	require.Len(t, fcm.received(), 20)
	require.Len(t, apns.received(), 8)
	require.LessOrEqual(t, maxInWindow(fcm.received(), time.Second, all), 10, "FCM calls in a 1 s window")
	require.LessOrEqual(t, maxInWindow(apns.received(), time.Second, all), 3, "APNs calls in a 1 s window")
	for _, id := range ids {
		_, n := e.state(id)
		require.Equal(t, 1, n, "one attempt")
	}
}

// A limit on the fan-out sender's own account would limit nothing: New refuses it.
func TestLimitOnFanOutAccountRefused(t *testing.T) {
	ps, err := push.New(push.Config{}, map[string]push.PlatformSender{"FCM": &platformFake{account: "push:fcm"}}, zap.NewNop())
	require.NoError(t, err)
	require.ErrorContains(t, checkFanOutLimits(map[string]int{"push": 5}, map[herald.Channel]Sender{herald.ChannelPush: ps}), `"push"`)
	require.NoError(t, checkFanOutLimits(map[string]int{"push:fcm": 5}, map[herald.Channel]Sender{herald.ChannelPush: ps}))
}

// A fan-out whose first call gets no slot within RateWait is deferred like any delivery,
// without using an attempt; once its first call went out, the other devices wait for their
// slots within the send, and the delivery ends SENT in one attempt. The account's log holds
// a call of another process that keeps the one slot taken until the test lets it go, so the
// first call is refused whatever the machine's speed.
func TestPushFanOutDeferredWithoutAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fcm := &platformFake{account: "push:fcm"}
	ps, err := push.New(push.Config{}, map[string]push.PlatformSender{"FCM": fcm}, zap.NewNop())
	require.NoError(t, err)
	cfg := e.config()
	cfg.RateLimits = map[string]int{"push:fcm": 1}
	cfg.RedisTimeout = 2 * time.Second
	cfg.Lanes[herald.PriorityHigh] = LaneConfig{Topic: e.topics[herald.PriorityHigh],
		Group: cfg.Lanes[herald.PriorityHigh].Group, RateWait: -1} // defer at once
	cfg.RetryPolicies = map[herald.Channel]RetryPolicy{herald.ChannelPush: {MaxAttempts: 1}}
	d := e.start(cfg, nil, map[herald.Channel]Sender{herald.ChannelPush: ps})
	e.sweep()

	tx, err := e.pool.Begin(context.Background())
	require.NoError(t, err)
	id := e.insertWith(tx, fixture{Channel: herald.ChannelPush, UserID: 611})
	_, err = tx.Exec(context.Background(), `INSERT INTO push_token (user_id, token, platform)
		VALUES (611, 't1', 'FCM'), (611, 't2', 'FCM'), (611, 't3', 'FCM')`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(context.Background()))
	hold := holdRateSlot(t, e, "push:fcm")
	e.publish(id)
	heraldtest.WaitFor(t, 30*time.Second, "the delivery deferred past the held slot", func() bool {
		var later bool
		err := e.pool.QueryRow(context.Background(), `SELECT status = 'PENDING' AND next_attempt_at > now() + interval '10 minutes'
			FROM delivery WHERE id = $1`, id).Scan(&later)
		require.NoError(t, err)
		return later
	})
	require.GreaterOrEqual(t, signals(d).count(herald.PriorityHigh, signalDeferred), int64(1), "the held slot deferred it")
	hold(id)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, id)

	_, n := e.state(id)
	require.Equal(t, 1, n, "a deferral used up an attempt")
	require.Len(t, e.attempts(id), 1)
	require.Len(t, fcm.received(), 3)
	require.LessOrEqual(t, maxInWindow(fcm.received(), time.Second, all), 1)
}

// holdRateSlot puts into provider's rate-limit log a call admitted an hour from now (Redis's
// clock), as if another process had taken the slot: nothing is admitted until the returned
// release removes it and makes the deliveries ids, deferred past it, due again.
func holdRateSlot(t *testing.T, e *env, provider string) (release func(ids ...string)) {
	t.Helper()
	ctx := context.Background()
	now, err := e.rdb.Time(ctx).Result()
	require.NoError(t, err)
	key := e.prefix + "rl:{" + provider + "}"
	require.NoError(t, e.rdb.ZAdd(ctx, key, redis.Z{Score: float64(now.Add(time.Hour).UnixMicro()), Member: "held"}).Err())
	return func(ids ...string) {
		require.NoError(t, e.rdb.ZRem(ctx, key, "held").Err())
		_, err := e.pool.Exec(ctx, `UPDATE delivery SET next_attempt_at = now() WHERE id = ANY($1::uuid[]) AND status = 'PENDING'`, ids)
		require.NoError(t, err)
	}
}
