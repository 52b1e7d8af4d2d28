package dispatch

import (
	"context"
	"strconv"
	"sync"
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

	// The leases of used-up attempts, waiting for one DEL (drop).
	dropMu   sync.Mutex
	dropped  []string
	dropping bool           // a flushDropped runs
	flushes  sync.WaitGroup // the running flushDropped, for Run's return
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

// dropBatch bounds the keys of one DEL.
const dropBatch = 1000

// drop deletes the lease of an attempt that is used up: its claim took the row, so no record
// of that attempt can claim it again, and no worker can need the lease any more (a deferral,
// which gives the attempt back, releases it as releaseMany does instead). The drop does not
// wait: the keys of every attempt that ended meanwhile go in one DEL, without the token check,
// which a used-up attempt does not need, where a release per attempt costs a round trip and a
// script run each. A drop Redis never sees is harmless: the lease expires on its own.
func (l *leases) drop(k leaseKey, timeout time.Duration) {
	if !l.health.usable(time.Now()) {
		return
	}
	l.dropMu.Lock()
	l.dropped = append(l.dropped, l.key(k.id, k.attempt))
	start := !l.dropping
	l.dropping = true
	l.dropMu.Unlock()
	if start {
		l.flushes.Go(func() { l.flushDropped(timeout) })
	}
}

// flushDropped deletes the dropped leases until none is waiting, then ends.
func (l *leases) flushDropped(timeout time.Duration) {
	for {
		l.dropMu.Lock()
		keys := l.dropped
		l.dropped = nil
		if len(keys) == 0 {
			l.dropping = false
			l.dropMu.Unlock()
			return
		}
		l.dropMu.Unlock()
		for len(keys) > 0 {
			n := min(len(keys), dropBatch)
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			err := l.rdb.Del(ctx, keys[:n]...).Err()
			cancel()
			l.health.observe(context.Background(), err, time.Now())
			keys = keys[n:]
		}
	}
}
