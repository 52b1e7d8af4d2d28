package dispatch

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/heraldhq/herald"
)

// rateScript is an exact sliding-log limiter over one sorted set per provider account:
// every admitted call is a member scored with the Redis clock (µs). A call of a priority
// whose threshold is T = floor(limit · share) is admitted iff fewer than T calls were
// admitted in (now − window, now]. Since every threshold is at most the limit, no half-open
// window of that length ever holds more than `limit` admissions of all priorities together:
// if it held limit+1, the last of them would have seen `limit` before it and been refused.
// LOW (T = 60 %) can never take the last 40 % of a window, which is what HIGH gets without
// waiting. One EVALSHA per decision; TIME inside the script makes Redis the only clock.
//
// KEYS[1] the log, KEYS[2] the guard; ARGV[1] threshold, ARGV[2] window µs, ARGV[3] member,
// ARGV[4..] ages in µs of calls this process admitted locally while Redis was unreachable.
//
// The guard holds the time until which nothing is admitted. It is created, one window
// ahead, whenever it is missing: at first use, and after Redis restarted or lost its data,
// when calls admitted in degraded mode by other processes are unknown to the log. The
// back-filled ages put this process's own degraded-mode calls into the log.
//
// Returns {1, 0} when admitted, {0, µs to wait} when not.
var rateScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[2])
-- Scores go to Redis as exact integers: a plain Lua number would be cut to 14 digits.
local function us(x) return string.format('%.0f', x) end
local guard = redis.call('GET', KEYS[2])
if not guard then
  guard = now + window
  redis.call('SET', KEYS[2], us(guard))
end
for i = 4, #ARGV do
  redis.call('ZADD', KEYS[1], us(now - tonumber(ARGV[i])), ARGV[3] .. ':' .. i)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', us(now - window))
local wait = tonumber(guard) - now
if wait > 0 then return {0, wait} end
local limit = tonumber(ARGV[1])
local n = redis.call('ZCARD', KEYS[1])
if n < limit then
  redis.call('ZADD', KEYS[1], us(now), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.floor(window / 1000) + 1000)
  return {1, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], n - limit, n - limit, 'WITHSCORES')
return {0, tonumber(oldest[2]) + window - now + 1}
`)

// rateLimiter decides whether a provider call may start now. While Redis is unreachable it
// falls back to a per-process sliding log with limit/processes, after a cool-down of one
// window so that calls admitted through Redis just before the outage have left the window.
type rateLimiter struct {
	rdb     *redis.Client
	prefix  string
	limits  map[string]int
	shares  map[herald.Priority]float64
	window  time.Duration
	procs   int
	timeout time.Duration
	health  *redisHealth
	member  string
	seq     atomic.Uint64

	mu    sync.Mutex
	local map[string][]time.Time // per provider: calls admitted in degraded mode
}

// decision is the limiter's answer.
type decision struct {
	Allowed  bool
	Wait     time.Duration // when refused: how long until a call may be admitted
	Degraded bool          // decided without Redis
	// At is no later than the decision: when the request left for Redis, or the local
	// decision's time. The call must start within the window margin of At (see fresh).
	At time.Time
}

// fresh reports whether a call starting now still falls inside the window the admission
// was counted in. The log counts an admission at its decision time; a call that starts more
// than the margin later (a slow reply, a descheduled goroutine) could crowd a later window,
// so it must not go out on that admission: the admission is wasted, the limit kept.
func (l *rateLimiter) fresh(d decision, now time.Time) bool {
	return now.Sub(d.At) <= l.window-time.Second
}

func (l *rateLimiter) threshold(limit int, p herald.Priority, procs int) int {
	return int(math.Floor(float64(limit) * l.shares[p] / float64(procs)))
}

// allow takes one call of priority p to provider from the budget, or says how long to wait.
func (l *rateLimiter) allow(ctx context.Context, provider string, p herald.Priority) (decision, error) {
	limit, ok := l.limits[provider]
	if !ok {
		return decision{Allowed: true, At: time.Now()}, nil
	}
	now := time.Now()
	if l.health.usable(now) {
		d, err := l.allowRedis(ctx, provider, limit, p, now)
		if !l.health.observe(ctx, err, time.Now()) {
			return d, err
		}
	}
	return l.allowLocal(provider, limit, p, time.Now()), nil
}

func (l *rateLimiter) allowRedis(ctx context.Context, provider string, limit int, p herald.Priority, now time.Time) (decision, error) {
	th := max(1, l.threshold(limit, p, 1))
	args := []any{th, l.window.Microseconds(), l.member + ":" + strconv.FormatUint(l.seq.Add(1), 36)}
	l.mu.Lock()
	var last time.Time // the newest degraded-mode call sent along
	for _, at := range l.local[provider] {
		if age := now.Sub(at); age < l.window {
			args = append(args, age.Microseconds())
		}
		last = at
	}
	l.mu.Unlock()
	key := l.prefix + "rl:{" + provider + "}"
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	res, err := rateScript.Run(cctx, l.rdb, []string{key, key + ":guard"}, args...).Int64Slice()
	if err != nil {
		return decision{}, fmt.Errorf("rate limit %s: %w", provider, err)
	}
	if !last.IsZero() {
		// Forget what Redis now knows; keep calls admitted locally meanwhile (another
		// goroutine still in degraded mode) for the next call to send along.
		l.mu.Lock()
		log := l.local[provider]
		i := 0
		for i < len(log) && !log[i].After(last) {
			i++
		}
		if i == len(log) {
			delete(l.local, provider)
		} else {
			l.local[provider] = log[i:]
		}
		l.mu.Unlock()
	}
	if len(res) != 2 {
		return decision{}, fmt.Errorf("rate limit %s: unexpected reply %v", provider, res)
	}
	if res[0] == 1 {
		return decision{Allowed: true, At: now}, nil
	}
	return decision{Wait: time.Duration(res[1]) * time.Microsecond}, nil
}

func (l *rateLimiter) allowLocal(provider string, limit int, p herald.Priority, now time.Time) decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	if since := l.health.down(); !since.IsZero() {
		if wait := since.Add(l.window).Sub(now); wait > 0 {
			return decision{Wait: wait, Degraded: true}
		}
	}
	th := l.threshold(limit, p, l.procs)
	log := l.local[provider]
	i := 0
	for i < len(log) && now.Sub(log[i]) >= l.window {
		i++
	}
	log = log[i:]
	l.local[provider] = log
	if th < 1 {
		return decision{Wait: l.window, Degraded: true}
	}
	if len(log) < th {
		l.local[provider] = append(log, now)
		return decision{Allowed: true, Degraded: true, At: now}
	}
	return decision{Wait: log[len(log)-th].Add(l.window).Sub(now) + time.Microsecond, Degraded: true}
}
