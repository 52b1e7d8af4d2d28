package adapt

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Board is the signal's home in Redis: one hash, one field per reporter (a dispatch process
// reporting HIGH's latency, a relay reporting its lag), each value stamped with the Redis clock
// so that a reporter that stops (HIGH quiet, a process gone) drops out after the freshness
// window without anyone deleting it. One round trip per report and per read.
type Board struct {
	rdb   *redis.Client
	key   string
	fresh time.Duration
}

// Kinds of report on the board.
const (
	kindHigh  = "high"
	kindRelay = "relay"
)

// NewBoard returns the board under prefix (herald.DefaultRedisPrefix in production); a report
// counts for fresh after it was written.
func NewBoard(rdb *redis.Client, prefix string, fresh time.Duration) *Board {
	return &Board{rdb: rdb, key: prefix + "adapt:signal", fresh: fresh}
}

// reportScript writes one reporter's field: "<kind> <value µs> <Redis time ms>". The hash
// lives a few freshness windows past its last write.
var reportScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. now)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]) * 4)
return 1`)

// readScript returns {high reports, largest HIGH latency µs, relay reports, largest relay lag
// µs} over the fresh fields, and deletes the stale ones.
var readScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
local out = {high = {0, 0}, relay = {0, 0}}
for i = 1, #all, 2 do
  local kind, v, at = string.match(all[i + 1], '^(%a+) (%d+) (%d+)$')
  if kind == nil or now - tonumber(at) > tonumber(ARGV[1]) then
    redis.call('HDEL', KEYS[1], all[i])
  elseif out[kind] then
    out[kind][1] = out[kind][1] + 1
    out[kind][2] = math.max(out[kind][2], tonumber(v))
  end
end
return {out.high[1], out.high[2], out.relay[1], out.relay[2]}`)

// ReportHigh writes reporter's recent HIGH latency.
func (b *Board) ReportHigh(ctx context.Context, reporter string, latency time.Duration) error {
	return b.report(ctx, kindHigh+":"+reporter, kindHigh, latency)
}

// ReportRelayLag writes the relay's lag.
func (b *Board) ReportRelayLag(ctx context.Context, reporter string, lag time.Duration) error {
	return b.report(ctx, kindRelay+":"+reporter, kindRelay, lag)
}

func (b *Board) report(ctx context.Context, field, kind string, d time.Duration) error {
	err := reportScript.Run(ctx, b.rdb, []string{b.key}, field, kind, max(d.Microseconds(), 0),
		b.fresh.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("report %s signal: %w", kind, err)
	}
	return nil
}

// Read returns the worst of the fresh reports.
func (b *Board) Read(ctx context.Context) (Signal, error) {
	v, err := readScript.Run(ctx, b.rdb, []string{b.key}, b.fresh.Milliseconds()).Int64Slice()
	if err != nil {
		return Signal{}, fmt.Errorf("read adaptive signal: %w", err)
	}
	if len(v) != 4 {
		return Signal{}, fmt.Errorf("read adaptive signal: %d values", len(v))
	}
	return Signal{HighReports: int(v[0]), HighLatency: time.Duration(v[1]) * time.Microsecond,
		RelayReports: int(v[2]), RelayLag: time.Duration(v[3]) * time.Microsecond}, nil
}
