package dispatch

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// leases is the Redis side of dedupe: before claiming attempt n of a delivery a worker takes
// the key lease:<delivery>:<n> with SET NX PX. Duplicate Kafka records of the same attempt
// and racing workers stop here, before they spend a rate-limit token or a database write.
// The database claim (a CAS on status and attempts) is what makes a second provider call
// impossible; the lease is the cheap first filter and keeps working as a filter for a
// worker whose database round trip is slow. While Redis is down the claim alone holds.
type leases struct {
	rdb    *redis.Client
	prefix string
	health *redisHealth
}

var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

func (l *leases) key(id string, attempt int) string {
	return l.prefix + "lease:" + id + ":" + strconv.Itoa(attempt)
}

// leaseKey names one attempt of one delivery.
type leaseKey struct {
	id      string
	attempt int
}

// acquireMany takes the leases ks, one or many, in one round trip (a pipeline of SET NX PX):
// held[i] says whether ks[i] is now this worker's (false for all when ctx ended). skipped=true:
// Redis is down, every lease counts as held and the database claim alone decides.
func (l *leases) acquireMany(ctx context.Context, ks []leaseKey, token string, ttl, timeout time.Duration) (held []bool, skipped bool) {
	held = make([]bool, len(ks))
	if !l.health.usable(time.Now()) {
		for i := range held {
			held[i] = true
		}
		return held, true
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmds := make([]*redis.BoolCmd, len(ks))
	_, err := l.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
		for i, k := range ks {
			cmds[i] = p.SetNX(cctx, l.key(k.id, k.attempt), token, ttl)
		}
		return nil
	})
	if l.health.observe(ctx, err, time.Now()) {
		for i := range held {
			held[i] = true
		}
		return held, true
	}
	if err != nil { // the caller's context ended
		return held, false
	}
	for i, c := range cmds {
		held[i] = c.Val()
	}
	return held, false
}

// releaseMany drops the leases ks this worker still holds, in one round trip. Failure is
// harmless: a lease expires on its own and its attempt number is used up anyway.
func (l *leases) releaseMany(ctx context.Context, ks []leaseKey, token string, timeout time.Duration) {
	if len(ks) == 0 || !l.health.usable(time.Now()) {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := l.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
		for _, k := range ks {
			releaseScript.Eval(cctx, p, []string{l.key(k.id, k.attempt)}, token)
		}
		return nil
	})
	if err == redis.Nil {
		err = nil
	}
	l.health.observe(ctx, err, time.Now())
}
