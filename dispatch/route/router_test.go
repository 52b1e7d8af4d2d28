package route

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
	"github.com/heraldhq/herald/senders"
)

// outage is a provider switch: while down, every call answers 503 (a transient error).
type outage struct{ down atomic.Bool }

func (o *outage) behave(context.Context, *senders.Message, int) (senders.Result, error) {
	if o.down.Load() {
		return senders.Result{}, senders.TransientError("503", 0, errors.New("service unavailable"))
	}
	return senders.Result{}, nil
}

// pair is a router over a primary (weight 100) and a standby (weight 0) SMS account.
type pair struct {
	r                *Router
	s                *Sender
	primary, standby *dispatch.MemorySender
	out              *outage
	rdb              *redis.Client
}

func newPair(t *testing.T, cfg Config, rdb *redis.Client, prefix string) *pair {
	t.Helper()
	p := &pair{out: &outage{}, rdb: rdb}
	p.primary = &dispatch.MemorySender{ProviderName: "sms:twilio", Behave: p.out.behave}
	p.standby = &dispatch.MemorySender{ProviderName: "sms:vonage"}
	cfg.RedisPrefix = prefix
	r, err := New(cfg, rdb, map[herald.Channel][]Account{herald.ChannelSMS: {
		{Sender: p.primary, Weight: 100}, {Sender: p.standby, Weight: 0}}}, zaptest.NewLogger(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	p.r, p.s = r, r.Sender(herald.ChannelSMS)
	return p
}

// fast is a routing config whose windows suit a test: steps every 30 ms, probes every 150 ms.
func fast() Config {
	return Config{Window: 5 * time.Second, MinFailures: 3, FailureRatio: 0.5, Steps: 4,
		StepInterval: 30 * time.Millisecond, ProbeInterval: 150 * time.Millisecond}
}

var seq atomic.Int64

// send routes and sends one attempt of priority prio and returns the account it went to.
func (p *pair) send(t *testing.T, prio herald.Priority, lastAccount, lastOutcome string) string {
	t.Helper()
	id := "d" + strconv.FormatInt(seq.Add(1), 10)
	a := dispatch.RouteAttempt{DeliveryID: id, Channel: herald.ChannelSMS, Priority: prio, Attempt: 1,
		LastAccount: lastAccount, LastOutcome: lastOutcome}
	snd := p.s.Route(context.Background(), a)
	_, _ = snd.Send(context.Background(), &senders.Message{DeliveryID: id, Channel: herald.ChannelSMS, Priority: prio})
	return snd.Provider()
}

// levels reads the accounts' levels from Redis.
func (p *pair) levels(t *testing.T) []int {
	t.Helper()
	lv, err := p.r.st.levels(context.Background(), p.s.keys)
	require.NoError(t, err)
	return lv
}

// watchSteps sends NORMAL attempts until the primary's level is last, and returns each level
// it saw, starting with the current one, with the time the health script stored with it
// (Redis's clock), not the time the test happened to see it.
func (p *pair) watchSteps(t *testing.T, what string, last int) (seen []int, stepped []time.Duration) {
	t.Helper()
	seen, stepped = []int{p.levels(t)[0]}, []time.Duration{0}
	heraldtest.WaitForEvery(t, 10*time.Second, 2*time.Millisecond, what, func() bool {
		p.send(t, herald.PriorityNormal, "", "")
		if lv := p.levels(t)[0]; lv != seen[len(seen)-1] {
			at, err := p.rdb.HGet(context.Background(), p.s.keys[0], "stepped").Int64()
			require.NoError(t, err)
			seen, stepped = append(seen, lv), append(stepped, time.Duration(at)*time.Microsecond)
		}
		return seen[len(seen)-1] == last
	})
	return seen, stepped
}

// A burst of 503s moves the primary's traffic to the standby one step at a time (never all
// at once), and once the primary answers again, half-open probes give the steps back one by
// one until the configured weights hold again.
func TestOutageStepsDownAndProbesStepBack(t *testing.T) {
	t.Parallel()
	rdb, prefix := stacktest.Redis(t)
	cfg := fast()
	p := newPair(t, cfg, rdb, prefix)

	p.out.down.Store(true)
	seen, stepped := p.watchSteps(t, "the primary to reach its last step", cfg.Steps)
	require.Equal(t, []int{0, 1, 2, 3, 4}, seen, "one step at a time")
	for i := 2; i < len(stepped); i++ {
		require.GreaterOrEqual(t, stepped[i]-stepped[i-1], cfg.StepInterval,
			"steps at most one per StepInterval")
	}
	require.InDeltaSlice(t, []float64{0, 1}, shares(p.s.weights, p.levels(t), cfg.Steps), 1e-9)
	// At the last step only probes reach the primary, at most one per ProbeInterval (the first
	// may be due at once: the probe clock runs from the first step down).
	const sends = 20
	begin, toPrimary := time.Now(), 0
	for range sends {
		if p.send(t, herald.PriorityNormal, "", "") == "sms:twilio" {
			toPrimary++
		}
	}
	probes := 1 + int(time.Since(begin)/cfg.ProbeInterval)
	require.LessOrEqual(t, toPrimary, probes, "at the last step only probes reach the primary")
	require.Less(t, toPrimary, sends, "the standby takes the traffic")

	// Still down: the probes fail and the primary stays at its last step.
	probesBefore := len(p.primary.Calls())
	heraldtest.WaitForEvery(t, 5*time.Second, 2*time.Millisecond, "two failed probes", func() bool {
		p.send(t, herald.PriorityNormal, "", "")
		return len(p.primary.Calls()) >= probesBefore+2
	})
	require.Equal(t, cfg.Steps, p.levels(t)[0])

	// Recovered: each probe that succeeds gives back one step.
	p.out.down.Store(false)
	seen, stepped = p.watchSteps(t, "the primary back at its weight", 0)
	require.Equal(t, []int{4, 3, 2, 1, 0}, seen, "one step back per successful probe")
	// The probes are claimed at least ProbeInterval apart; their outcomes are recorded a
	// call later, so one gap can look shorter than another, not all of them together.
	require.GreaterOrEqual(t, stepped[len(stepped)-1]-stepped[1], 3*cfg.ProbeInterval-50*time.Millisecond,
		"one probe per ProbeInterval")
	require.InDeltaSlice(t, []float64{1, 0}, shares(p.s.weights, p.levels(t), cfg.Steps), 1e-9)
	for range 50 {
		require.Equal(t, "sms:twilio", p.send(t, herald.PriorityNormal, "", ""))
	}
}

// Two routers on one Redis (two herald processes) see one health: what one learns moves the
// other's traffic, and across both only one attempt per probe interval is the probe.
func TestTwoRoutersShareHealth(t *testing.T) {
	t.Parallel()
	rdb, prefix := stacktest.Redis(t)
	cfg := fast()
	a, b := newPair(t, cfg, rdb, prefix), newPair(t, cfg, rdb, prefix)
	a.out.down.Store(true)
	b.out.down.Store(true)
	heraldtest.WaitForEvery(t, 10*time.Second, 2*time.Millisecond, "router a to step the primary down to its last step", func() bool {
		a.send(t, herald.PriorityLow, "", "")
		return a.levels(t)[0] == cfg.Steps
	})
	require.Empty(t, b.primary.Calls(), "router b has not called anyone yet")
	// Router b routes by what router a learnt: its attempts go to the standby, but for at
	// most one half-open probe (the first may have fallen due while a stepped down, on a
	// loaded machine; the next is a ProbeInterval later).
	toStandby := 0
	for range 5 {
		if b.send(t, herald.PriorityLow, "", "") == "sms:vonage" {
			toStandby++
		}
	}
	require.GreaterOrEqual(t, toStandby, 4, "router b routes by what router a learnt")

	// Both keep routing for about six probe intervals: together they make one probe per interval.
	start, before := time.Now(), len(a.primary.Calls())
	for time.Since(start) < 6*cfg.ProbeInterval {
		a.send(t, herald.PriorityLow, "", "")
		b.send(t, herald.PriorityLow, "", "")
	}
	probes := len(a.primary.Calls()) - before + len(b.primary.Calls())
	require.GreaterOrEqual(t, probes, 4)
	require.LessOrEqual(t, probes, 7, "one probe per interval across both routers")

	// Router b sees the recovery through its own probe as router a would.
	b.out.down.Store(false)
	heraldtest.WaitForEvery(t, 10*time.Second, 2*time.Millisecond, "router b's probes to bring the primary back", func() bool {
		b.send(t, herald.PriorityLow, "", "")
		return b.levels(t)[0] == 0
	})
	require.Equal(t, "sms:twilio", a.send(t, herald.PriorityLow, "", ""))
}

// Retries: after a transient error the retry leaves the account, whatever the priority and
// even from a healthy primary; after an ambiguous outcome only HIGH moves by default, NORMAL
// and LOW stay on the account that may have sent the message, even while it is failing.
func TestRetryRouting(t *testing.T) {
	t.Parallel()
	rdb, prefix := stacktest.Redis(t)
	cfg := fast()
	p := newPair(t, cfg, rdb, prefix)
	for _, prio := range herald.Priorities {
		require.Equal(t, "sms:vonage", p.send(t, prio, "sms:twilio", "TRANSIENT"), prio)
		require.Equal(t, "sms:twilio", p.send(t, prio, "sms:vonage", "TRANSIENT"), prio)
	}
	require.Equal(t, "sms:vonage", p.send(t, herald.PriorityHigh, "sms:twilio", "AMBIGUOUS"))
	require.Equal(t, "sms:twilio", p.send(t, herald.PriorityNormal, "sms:twilio", "AMBIGUOUS"))
	require.Equal(t, "sms:twilio", p.send(t, herald.PriorityLow, "sms:twilio", "AMBIGUOUS"))
	// An attempt the reaper logged (account unknown) goes by the shares.
	require.Equal(t, "sms:twilio", p.send(t, herald.PriorityNormal, "", "AMBIGUOUS"))

	retry := func(prio herald.Priority, outcome string) bool {
		return p.s.RetryAtOnce(dispatch.RouteAttempt{Priority: prio, LastAccount: "sms:twilio", LastOutcome: outcome})
	}
	require.True(t, retry(herald.PriorityHigh, "TRANSIENT"))
	require.True(t, retry(herald.PriorityHigh, "AMBIGUOUS"), "HIGH's ambiguous retry moves, at once")
	require.False(t, retry(herald.PriorityNormal, "TRANSIENT"))
	require.False(t, retry(herald.PriorityLow, "TRANSIENT"))

	// The primary at its last step: NORMAL's ambiguous retry still stays there.
	p.out.down.Store(true)
	heraldtest.WaitForEvery(t, 10*time.Second, 2*time.Millisecond, "the primary's last step", func() bool {
		p.send(t, herald.PriorityLow, "", "")
		return p.levels(t)[0] == cfg.Steps
	})
	require.Equal(t, "sms:twilio", p.send(t, herald.PriorityNormal, "sms:twilio", "AMBIGUOUS"))
	// Nowhere else to go: the standby at its last step too, so HIGH's retry waits its backoff.
	_, err := rdb.HSet(context.Background(), p.s.keys[1], "level", cfg.Steps, "probe_at", "99999999999999999").Result()
	require.NoError(t, err)
	p.send(t, herald.PriorityLow, "", "") // refresh the router's view
	require.False(t, p.s.RetryAtOnce(dispatch.RouteAttempt{Priority: herald.PriorityHigh, LastAccount: "sms:twilio",
		LastOutcome: "TRANSIENT"}))
}

// A due probe goes to NORMAL or LOW work; HIGH takes it only when no other priority did for a
// whole probe interval, so that an OTP is not the first to try a failing provider.
func TestHighTakesOnlyOverdueProbes(t *testing.T) {
	t.Parallel()
	rdb, prefix := stacktest.Redis(t)
	cfg := fast()
	cfg.ProbeInterval = time.Minute
	p := newPair(t, cfg, rdb, prefix)
	p.out.down.Store(true) // a failed probe leaves the level as it is
	ctx := context.Background()
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	due := func(ago time.Duration) {
		_, err := rdb.HSet(ctx, p.s.keys[0], "level", cfg.Steps,
			"probe_at", strconv.FormatInt(now.Add(-ago).UnixMicro(), 10)).Result()
		require.NoError(t, err)
	}
	due(time.Second) // due a second ago
	for range 20 {
		require.Equal(t, "sms:vonage", p.send(t, herald.PriorityHigh, "", ""), "HIGH leaves a fresh probe to others")
	}
	require.Equal(t, "sms:twilio", p.send(t, herald.PriorityLow, "", ""), "LOW takes the due probe")
	require.Equal(t, "sms:vonage", p.send(t, herald.PriorityLow, "", ""), "one probe per interval")
	due(2 * time.Minute) // nobody probed for two intervals
	require.Equal(t, "sms:twilio", p.send(t, herald.PriorityHigh, "", ""), "HIGH takes an overdue probe")
}
