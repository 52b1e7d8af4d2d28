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
// with threshold T over a share window of k windows (see shareWindow) is admitted iff fewer
// than T calls of all priorities were admitted in (now − k·window, now]. Normally k = 1 and
// T = floor(limit · share). Since every threshold is at most the limit, no half-open window
// ever holds more than `limit` admissions of all priorities together: if it held limit+1,
// the last of them would have seen `limit` before it and been refused. LOW (T = 60 %) can
// never take the last 40 % of a window, which is what HIGH gets without waiting. When
// limit · share < 1 (a limit of 1/s: LOW's 0.6 calls), the share is kept over k windows
// instead: T = 1 call, and only if no call at all went out in the last k windows, so a
// saturating HIGH takes every slot while an idle provider still lets LOW through.
// One EVALSHA per decision; TIME inside the script makes Redis the only clock.
//
// KEYS[1] the log, KEYS[2] the guard; ARGV[1] threshold, ARGV[2] window µs, ARGV[3] member,
// ARGV[4] the priority's share window µs, ARGV[5] how long the log keeps calls (the longest
// share window of any priority), µs; ARGV[6..] ages in µs of calls this process admitted
// locally while Redis was unreachable.
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
local span = tonumber(ARGV[4])
local keep = tonumber(ARGV[5])
-- Scores go to Redis as exact integers: a plain Lua number would be cut to 14 digits.
local function us(x) return string.format('%.0f', x) end
local guard = redis.call('GET', KEYS[2])
if not guard then
  guard = now + window
  redis.call('SET', KEYS[2], us(guard))
end
for i = 6, #ARGV do
  redis.call('ZADD', KEYS[1], us(now - tonumber(ARGV[i])), ARGV[3] .. ':' .. i)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', us(now - keep))
local wait = tonumber(guard) - now
if wait > 0 then return {0, wait} end
local limit = tonumber(ARGV[1])
local from = '(' .. us(now - span)
local n = redis.call('ZCOUNT', KEYS[1], from, '+inf')
if n < limit then
  redis.call('ZADD', KEYS[1], us(now), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.floor(keep / 1000) + 1000)
  return {1, 0}
end
local oldest = redis.call('ZRANGEBYSCORE', KEYS[1], from, '+inf', 'WITHSCORES', 'LIMIT', n - limit, 1)
return {0, tonumber(oldest[2]) + span - now + 1}
`)

// primeScript creates a provider's guard, one window ahead, when it is missing, as rateScript
// does at first use. KEYS[1] the guard; ARGV[1] the window, µs. Returns 1 when it created it.
var primeScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('SET', KEYS[1], string.format('%.0f', now + tonumber(ARGV[1])))
return 1`)

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

// shareWindow returns the threshold of priority p and the number of windows it applies over.
// With limit · share ≥ 1 that is floor(limit · share) calls per window. Below one call per
// window (LOW's 0.6 of a 1/s limit) the share is kept over the fewest windows k in which it
// makes a whole call: one call per k windows, counted against the calls of every priority,
// so LOW and NORMAL never take a slot HIGH used in those k windows.
func shareWindow(limit int, share float64) (threshold, windows int) {
	x := float64(limit) * share
	if x >= 1 {
		return int(math.Floor(x)), 1
	}
	k := int(math.Ceil(1 / x))
	for math.Floor(x*float64(k)) < 1 {
		k++ // float rounding
	}
	return 1, k
}

// keepWindows is how many windows of calls the log of a provider must keep: the longest
// share window of any priority.
func (l *rateLimiter) keepWindows(limit int) int {
	k := 1
	for _, share := range l.shares {
		_, w := shareWindow(limit, share)
		k = max(k, w)
	}
	return k
}

// prime creates the guard of every provider with a limit that has none yet, as its first call
// would (rateScript), so that the window the guard holds back passes while the process starts
// instead of in front of that first call. It matters for an account that is first called long
// after the start: a standby (dispatch/route) on the primary's first outage would otherwise
// hold the first retries moved to it for a whole window. The guarantee is the same as at first
// use: nothing is admitted for one window after the guard is made. Redis unreachable: the
// guard is made at first use, as before.
func (l *rateLimiter) prime(ctx context.Context) {
	if !l.health.usable(time.Now()) {
		return
	}
	for provider := range l.limits {
		cctx, cancel := context.WithTimeout(ctx, l.timeout)
		err := primeScript.Run(cctx, l.rdb, []string{l.prefix + "rl:{" + provider + "}:guard"}, l.window.Microseconds()).Err()
		cancel()
		if l.health.observe(ctx, err, time.Now()) {
			return
		}
	}
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
	th, span := shareWindow(limit, l.shares[p])
	args := []any{th, l.window.Microseconds(), l.member + ":" + strconv.FormatUint(l.seq.Add(1), 36),
		int64(span) * l.window.Microseconds(), int64(l.keepWindows(limit)) * l.window.Microseconds()}
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
