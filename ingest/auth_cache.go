package ingest

import (
	"sync"
	"time"
)

// authCache remembers recently seen valid API keys (by their SHA-256) with their client and
// scopes, so that a busy client costs one database lookup per TTL instead of one per
// request. A revoked key therefore keeps working in a process for up to the TTL. Unknown keys are never cached: a flood of
// wrong keys cannot grow it, and the cache is bounded besides.
type authCache struct {
	ttl time.Duration
	max int

	mu      sync.Mutex
	entries map[[32]byte]authEntry
}

type authEntry struct {
	principal
	expires time.Time
}

func newAuthCache(ttl time.Duration, max int) *authCache {
	return &authCache{ttl: ttl, max: max, entries: make(map[[32]byte]authEntry)}
}

func (c *authCache) get(h [32]byte, now time.Time) (principal, bool) {
	if c.ttl <= 0 {
		return principal{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[h]
	if !ok {
		return principal{}, false
	}
	if !now.Before(e.expires) {
		delete(c.entries, h)
		return principal{}, false
	}
	return e.principal, true
}

func (c *authCache) put(h [32]byte, p principal, now time.Time) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		// Few clients is the normal case; a full cache is dropped rather than managed.
		clear(c.entries)
	}
	c.entries[h] = authEntry{principal: p, expires: now.Add(c.ttl)}
}
