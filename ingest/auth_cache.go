package ingest

import (
	"sync"
	"time"
)

// authCache remembers recently seen valid API keys (by their SHA-256), so that a busy client
// costs one database lookup per TTL instead of one per request. A revoked key therefore
// keeps working in a process for up to the TTL. Unknown keys are never cached: a flood of
// wrong keys cannot grow it, and the cache is bounded besides.
type authCache struct {
	ttl time.Duration
	max int

	mu      sync.Mutex
	entries map[[32]byte]authEntry
}

type authEntry struct {
	clientID string
	expires  time.Time
}

func newAuthCache(ttl time.Duration, max int) *authCache {
	return &authCache{ttl: ttl, max: max, entries: make(map[[32]byte]authEntry)}
}

func (c *authCache) get(h [32]byte, now time.Time) (string, bool) {
	if c.ttl <= 0 {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[h]
	if !ok {
		return "", false
	}
	if !now.Before(e.expires) {
		delete(c.entries, h)
		return "", false
	}
	return e.clientID, true
}

func (c *authCache) put(h [32]byte, clientID string, now time.Time) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		// Few clients is the normal case; a full cache is dropped rather than managed.
		clear(c.entries)
	}
	c.entries[h] = authEntry{clientID: clientID, expires: now.Add(c.ttl)}
}
