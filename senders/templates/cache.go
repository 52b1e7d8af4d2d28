package templates

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// The compiled-template cache: dispatch renders the same few templates thousands of times a
// second. It is keyed by the content's hash and bounded by the estimated memory of what it
// holds (compiled.weight), least recently used out first, so that many large templates
// cannot pin more than CacheBytes.
const (
	// CacheBytes is the cache's memory budget, in estimated bytes.
	CacheBytes = 64 << 20
	// cacheEntries bounds the entries too, so that many tiny templates stay cheap to index.
	cacheEntries = 4096
)

var cache = newCompiledCache(CacheBytes)

// compiledCache is an LRU of compiled templates within a budget of bytes.
type compiledCache struct {
	mu     sync.Mutex
	lru    *simplelru.LRU[[32]byte, *compiled]
	bytes  int // the weight of the entries held
	budget int
}

func newCompiledCache(budget int) *compiledCache {
	c := &compiledCache{budget: budget}
	lru, err := simplelru.NewLRU(cacheEntries, func(_ [32]byte, v *compiled) { c.bytes -= v.weight })
	if err != nil {
		panic(err) // only for a size <= 0
	}
	c.lru = lru
	return c
}

// get returns content compiled, compiling and caching it on a miss. Content heavier than the
// whole budget is compiled but not kept.
func (c *compiledCache) get(content json.RawMessage) (*compiled, error) {
	key := sha256.Sum256(content)
	c.mu.Lock()
	v, ok := c.lru.Get(key)
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := compile(content)
	if err != nil {
		return nil, err
	}
	if v.weight > c.budget {
		return v, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru.Contains(key) { // compiled meanwhile by another caller
		return v, nil
	}
	c.lru.Add(key, v)
	c.bytes += v.weight
	for c.bytes > c.budget {
		c.lru.RemoveOldest()
	}
	return v, nil
}

// size returns the entries held and their weight.
func (c *compiledCache) size() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}

func cached(content json.RawMessage) (*compiled, error) { return cache.get(content) }

func keyOf(content json.RawMessage) [32]byte { return sha256.Sum256(content) }
