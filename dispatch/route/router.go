// Package route spreads a channel's deliveries over several provider accounts ("sms:twilio",
// "sms:vonage") by their configured weights and their health, which every herald process
// shares through Redis. An account whose calls fail in a burst gives up its share a step at a
// time, to the healthy accounts with a weight or, failing those, to the standbys (weight 0);
// a half-open probe, one real attempt per interval, decides when it gets each step back. A
// retry after a transient error goes to another account, at once for the priorities whose
// policy says so (HIGH); a retry after an ambiguous outcome moves only where the priority's
// policy allows. See docs/dispatch.md, "Provider routing".
//
// A Router gives dispatch one dispatch.RoutedSender per channel; each attempt's account is
// picked right after its claim, before its rate-limit decision, so that every account keeps
// its own rate limit, metrics and error classification.
package route

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/dispatch"
)

// Account is one provider account of a channel.
type Account struct {
	// Sender calls the account's provider; its Provider() names the account ("sms:twilio"):
	// the rate-limit key, the metrics label and the attempt log's provider.
	Sender dispatch.Sender
	// Weight is the account's share of first attempts while every account is healthy,
	// relative to the others' weights. 0 makes it a standby: it takes traffic only while the
	// weighted accounts are unhealthy, and retries that leave a failing account.
	Weight int
}

// Router routes the deliveries of every channel with accounts.
type Router struct {
	cfg      Config
	st       *store
	log      *zap.Logger
	m        *metrics
	channels map[herald.Channel]*Sender
	down     atomic.Int64 // until when (Unix ns) Redis is not asked, after a failure
}

// New validates cfg and accounts (per channel, at least one, at least one with a weight, no
// account twice, no fan-out sender) and builds a Router on rdb.
func New(cfg Config, rdb *redis.Client, accounts map[herald.Channel][]Account, log *zap.Logger) (*Router, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if rdb == nil || log == nil {
		return nil, errors.New("route: redis client and logger are required")
	}
	r := &Router{cfg: cfg, st: &store{rdb: rdb, timeout: cfg.RedisTimeout, cfg: cfg},
		log: log.With(zap.String("component", "route")), channels: map[herald.Channel]*Sender{}}
	for ch, accs := range accounts {
		s, err := r.newSender(ch, accs)
		if err != nil {
			return nil, err
		}
		r.channels[ch] = s
	}
	m, err := newMetrics(r)
	if err != nil {
		return nil, fmt.Errorf("route metrics: %w", err)
	}
	r.m = m
	return r, nil
}

// Sender returns the routed sender of ch (nil when ch has no accounts): give it to dispatch
// as the channel's sender.
func (r *Router) Sender(ch herald.Channel) *Sender { return r.channels[ch] }

// Senders returns the routed sender of every channel with accounts, on top of others (the
// senders of the channels that are not routed).
func (r *Router) Senders(others map[herald.Channel]dispatch.Sender) map[herald.Channel]dispatch.Sender {
	out := make(map[herald.Channel]dispatch.Sender, len(others)+len(r.channels))
	for ch, s := range others {
		out[ch] = s
	}
	for ch, s := range r.channels {
		out[ch] = s
	}
	return out
}

// Close unregisters the metrics callback.
func (r *Router) Close() error { return r.m.close() }

// usable reports whether Redis may be asked now.
func (r *Router) usable() bool { return time.Now().UnixNano() >= r.down.Load() }

// failed notes a Redis failure: the router keeps off Redis for RedisRetry. The first of a
// series is logged.
func (r *Router) failed(err error) {
	until := time.Now().Add(r.cfg.RedisRetry).UnixNano()
	if prev := r.down.Swap(until); prev < time.Now().UnixNano()-int64(r.cfg.RedisRetry) {
		r.log.Warn("routing health unavailable: routing by what was last known", zap.Error(err))
	}
}

// view is what a process last learnt of a channel's health.
type view struct {
	mu     sync.Mutex
	levels []int
}

func (v *view) get() []int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]int(nil), v.levels...)
}

// set keeps a copy of levels: setOne changes the view in place, while the caller goes on
// reading its own slice.
func (v *view) set(levels []int) {
	v.mu.Lock()
	v.levels = append(v.levels[:0:0], levels...)
	v.mu.Unlock()
}

func (v *view) setOne(i, level int) {
	v.mu.Lock()
	v.levels[i] = level
	v.mu.Unlock()
}

var rnd = rand.Float64
