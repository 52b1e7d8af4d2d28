package schedule

import (
	"cmp"
	"time"
)

// DefaultMaxRetryAfter caps a provider's Retry-After when a Backoff names no cap of its own.
const DefaultMaxRetryAfter = time.Hour

// Backoff is the delay schedule of retries: attempt n (1-based) that failed transiently is
// retried after a delay drawn uniformly from [0, min(Max, Base·2^(n-1))) ("full jitter"), or
// after the provider's Retry-After when that is longer, up to MaxRetryAfter.
type Backoff struct {
	// Base is the first delay's upper bound.
	Base time.Duration
	// Max caps every delay's upper bound (not a Retry-After: the provider's word beats Max).
	Max time.Duration
	// MaxRetryAfter caps the delay a provider's Retry-After may ask for: a provider (or a
	// proxy in front of it) answering "Retry-After: 999999999" must not park a delivery for
	// decades. Zero: DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
}

// Delay returns how long to wait before the next attempt after attempt n failed: full
// jitter at nanosecond precision, or retryAfter (capped at MaxRetryAfter) when that is
// longer. rnd returns a float in [0, 1) (math/rand/v2's Float64 outside tests).
func (b Backoff) Delay(n int, retryAfter time.Duration, rnd func() float64) time.Duration {
	d := time.Duration(rnd() * float64(b.Ceiling(n)))
	retryAfter = min(retryAfter, cmp.Or(b.MaxRetryAfter, DefaultMaxRetryAfter))
	return max(d, retryAfter)
}

// Ceiling is the upper bound of the delay after attempt n: min(Max, Base·2^(n-1)), without
// overflow for any n.
func (b Backoff) Ceiling(n int) time.Duration {
	c := b.Base
	for i := 1; i < n && c < b.Max; i++ {
		c *= 2
	}
	return min(c, b.Max)
}
