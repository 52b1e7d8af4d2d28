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

// acquire takes the lease for attempt of id. held=false means another worker holds it.
// skipped=true means Redis is down and the caller proceeds on the database claim alone.
func (l *leases) acquire(ctx context.Context, id string, attempt int, token string, ttl time.Duration, timeout time.Duration) (held, skipped bool) {
	now := time.Now()
	if !l.health.usable(now) {
		return true, true
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ok, err := l.rdb.SetNX(cctx, l.key(id, attempt), token, ttl).Result()
	if l.health.observe(ctx, err, time.Now()) {
		return true, true
	}
	if err != nil { // the caller's context ended
		return false, false
	}
	return ok, false
}

// release drops the lease if this worker still holds it. Failure is harmless: the lease
// expires on its own and its attempt number is used up anyway.
func (l *leases) release(ctx context.Context, id string, attempt int, token string, timeout time.Duration) {
	if !l.health.usable(time.Now()) {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := releaseScript.Run(cctx, l.rdb, []string{l.key(id, attempt)}, token).Err()
	if err == redis.Nil {
		err = nil
	}
	l.health.observe(ctx, err, time.Now())
}
