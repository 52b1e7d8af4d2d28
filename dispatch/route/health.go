package route

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// An account's health is one Redis hash, shared by every herald process:
//
//	level     0 healthy … Steps: how many steps of its weight it has given up
//	win       start of the current outcome window (Redis clock, µs)
//	ok, fail  outcomes counted in that window
//	stepped   when level last changed (µs)
//	probe_at  when the next half-open probe is due (µs)
//
// The hashes of a channel's accounts share a hash tag ({sms}), so one script can read them
// all. Every script reads the clock with TIME: Redis is the only clock, as for the rate
// limiter.

// recordScript counts one outcome of one account and moves its level: a burst of failures
// (at least MinFailures in the window, and at least FailureRatio of its outcomes) steps it
// down one level, at most once per StepInterval, and schedules its first probe; a probe that
// succeeded, in a window without a burst, steps it up one level; a probe that failed leaves
// it where it is. A step starts a new window. One EVALSHA per provider call.
//
// KEYS[1] the account's hash. ARGV[1] 1 failed / 0 ok, ARGV[2] window µs, ARGV[3] min
// failures, ARGV[4] failure ratio, ARGV[5] step interval µs, ARGV[6] steps, ARGV[7] 1 if the
// call was a probe, ARGV[8] probe interval µs, ARGV[9] key TTL ms.
//
// Returns {level, changed (1/0)}.
var recordScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function us(x) return string.format('%.0f', x) end
local v = redis.call('HMGET', KEYS[1], 'level', 'win', 'ok', 'fail', 'stepped')
local level = tonumber(v[1]) or 0
local win = tonumber(v[2]) or 0
local ok = tonumber(v[3]) or 0
local fail = tonumber(v[4]) or 0
local stepped = tonumber(v[5]) or 0
local failed = ARGV[1] == '1'
local steps = tonumber(ARGV[6])
if now - win >= tonumber(ARGV[2]) then
  win, ok, fail = now, 0, 0
end
if failed then fail = fail + 1 else ok = ok + 1 end
local burst = fail >= tonumber(ARGV[3]) and fail >= tonumber(ARGV[4]) * (ok + fail)
local changed = 0
if burst and level < steps and now - stepped >= tonumber(ARGV[5]) then
  if level == 0 then
    redis.call('HSET', KEYS[1], 'probe_at', us(now + tonumber(ARGV[8])))
  end
  level, changed = level + 1, 1
elseif ARGV[7] == '1' and not failed and not burst and level > 0 then
  level, changed = level - 1, 1
end
if changed == 1 then
  win, ok, fail, stepped = now, 0, 0, now
end
redis.call('HSET', KEYS[1], 'level', level, 'win', us(win), 'ok', ok, 'fail', fail, 'stepped', us(stepped))
redis.call('PEXPIRE', KEYS[1], ARGV[9])
return {level, changed}
`)

// decideScript reads the levels of a channel's accounts and, when a degraded account's
// half-open probe is due, claims it: the account's probe_at moves one ProbeInterval ahead,
// so across every process exactly one attempt per interval is the probe. An attempt that
// must avoid an account (its retry after a failure there) never probes it. late delays the
// probes this attempt may take (HIGH takes a probe only when no other priority took it for
// a whole interval). One EVALSHA per routing decision.
//
// KEYS: the accounts' hashes, in the channel's order. ARGV[1] probe interval µs, ARGV[2]
// index of the account to avoid (1-based, 0 none), ARGV[3] late µs, ARGV[4] key TTL ms.
//
// Returns {probed account (1-based, 0 none), level of each account...}.
var decideScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local avoid = tonumber(ARGV[2])
local late = tonumber(ARGV[3])
local out = {0}
local probe_at = {}
for i = 1, #KEYS do
  local v = redis.call('HMGET', KEYS[i], 'level', 'probe_at')
  out[i + 1] = tonumber(v[1]) or 0
  probe_at[i] = tonumber(v[2]) or 0
end
for i = 1, #KEYS do
  if out[i + 1] > 0 and i ~= avoid and now >= probe_at[i] + late then
    redis.call('HSET', KEYS[i], 'probe_at', string.format('%.0f', now + tonumber(ARGV[1])))
    redis.call('PEXPIRE', KEYS[i], ARGV[4])
    out[1] = i
    break
  end
end
return out
`)

// store runs the scripts for one Router.
type store struct {
	rdb     *redis.Client
	timeout time.Duration
	cfg     Config
}

// record counts one outcome of the account at key and returns its new level.
func (s *store) record(ctx context.Context, key string, failed, probe bool) (level int, changed bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	c := s.cfg
	res, err := recordScript.Run(cctx, s.rdb, []string{key}, b2i(failed), c.Window.Microseconds(), c.MinFailures,
		strconv.FormatFloat(c.FailureRatio, 'f', -1, 64), c.StepInterval.Microseconds(), c.Steps, b2i(probe),
		c.ProbeInterval.Microseconds(), c.StateTTL.Milliseconds()).Int64Slice()
	if err != nil {
		return 0, false, fmt.Errorf("route record %s: %w", key, err)
	}
	if len(res) != 2 {
		return 0, false, fmt.Errorf("route record %s: unexpected reply %v", key, res)
	}
	return int(res[0]), res[1] == 1, nil
}

// decide reads the levels of keys and claims a due probe; probe is the index of the probed
// account, -1 for none.
func (s *store) decide(ctx context.Context, keys []string, avoid int, late time.Duration) (probe int, levels []int, err error) {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	res, err := decideScript.Run(cctx, s.rdb, keys, s.cfg.ProbeInterval.Microseconds(), avoid+1, late.Microseconds(),
		s.cfg.StateTTL.Milliseconds()).Int64Slice()
	if err != nil {
		return -1, nil, fmt.Errorf("route decide %v: %w", keys, err)
	}
	if len(res) != len(keys)+1 {
		return -1, nil, fmt.Errorf("route decide %v: unexpected reply %v", keys, res)
	}
	levels = make([]int, len(keys))
	for i := range keys {
		levels[i] = int(res[i+1])
	}
	return int(res[0]) - 1, levels, nil
}

// levels reads the levels of keys without claiming anything (the metrics).
func (s *store) levels(ctx context.Context, keys []string) ([]int, error) {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.HGet(cctx, k, "level")
	}
	if _, err := pipe.Exec(cctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("route levels %v: %w", keys, err)
	}
	out := make([]int, len(keys))
	for i, c := range cmds {
		n, err := c.Int()
		if err != nil && err != redis.Nil {
			return nil, fmt.Errorf("route levels %s: %w", keys[i], err)
		}
		out[i] = n
	}
	return out, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
