package templates

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

func TestCacheStaysWithinItsByteBudget(t *testing.T) {
	big := func(i int) json.RawMessage { // distinct contents of about 40 KiB
		return sms(fmt.Sprintf("%d ", i) + strings.Repeat("{{.a}} ", 6000))
	}
	one, err := compile(big(0))
	require.NoError(t, err)
	c := newCompiledCache(3*one.weight + one.weight/2) // room for three

	for i := range 50 {
		_, err := c.get(big(i))
		require.NoError(t, err)
		_, bytes := c.size()
		require.LessOrEqual(t, bytes, c.budget)
	}
	entries, _ := c.size()
	require.Equal(t, 3, entries, "the oldest were evicted")

	// Least recently used goes first: 47 was read last, so 48 and 49 outlive it... no: 47 is
	// kept because it was used after 48 and 49 were added.
	_, err = c.get(big(47))
	require.NoError(t, err)
	_, err = c.get(big(50))
	require.NoError(t, err)
	c.mu.Lock()
	require.True(t, c.lru.Contains(keyOf(big(47))), "recently used stays")
	require.False(t, c.lru.Contains(keyOf(big(48))), "least recently used goes")
	c.mu.Unlock()

	// Content heavier than the whole budget renders but is not kept.
	small := newCompiledCache(one.weight / 2)
	_, err = small.get(big(1))
	require.NoError(t, err)
	entries, bytes := small.size()
	require.Zero(t, entries)
	require.Zero(t, bytes)
}

// TestCacheWeightCoversMemory checks that a compiled template's estimated weight is at least
// the heap it holds, for dense text, HTML and webhook templates, so that CacheBytes bounds
// the cache's real memory.
func TestCacheWeightCoversMemory(t *testing.T) {
	variants := map[string]func(i int) json.RawMessage{
		"dense text": func(i int) json.RawMessage {
			return sms(fmt.Sprint(i) + strings.Repeat("{{.a}}", 8000))
		},
		"dense html": func(i int) json.RawMessage {
			b, _ := json.Marshal(map[string]any{"EMAIL": map[string]any{"default": map[string]string{
				"subject": "s", "html": fmt.Sprint(i) + strings.Repeat(`<a href="{{.u}}">{{if .a}}{{.b}}{{end}}</a>`, 1000)}}})
			return b
		},
		"many webhook strings": func(i int) json.RawMessage {
			return json.RawMessage(fmt.Sprintf(`{"WEBHOOK":{"default":{"json":[%d%s]}}}`, i, strings.Repeat(`,"{{.a}}"`, 6000)))
		},
	}
	for name, content := range variants {
		const n = 6
		kept := make([]*compiled, 0, n)
		weight := 0
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range n {
			c, err := compile(content(i))
			require.NoError(t, err, name)
			// Rendering once lets html/template add its escaping to the tree.
			_, _, err = c.render(firstChannel(c), DefaultLocale, map[string]any{"a": "1", "b": "2", "u": "https://x"}, newBudget())
			require.NoError(t, err, name)
			kept = append(kept, c)
			weight += c.weight
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		held := int(after.HeapAlloc) - int(before.HeapAlloc)
		t.Logf("%s: weight %d, heap %d (%.2f)", name, weight, held, float64(held)/float64(weight))
		require.LessOrEqual(t, held, weight, name)
		runtime.KeepAlive(kept)
	}
}

func firstChannel(c *compiled) herald.Channel {
	switch {
	case len(c.sms) > 0:
		return herald.ChannelSMS
	case len(c.email) > 0:
		return herald.ChannelEmail
	}
	return herald.ChannelWebhook
}
