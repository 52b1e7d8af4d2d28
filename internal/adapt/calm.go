package adapt

import "time"

// calm tracks HIGH's calm latency on this machine: the smallest HIGH signal the board gave
// over the last calmWindow. A machine three times slower has a calm latency three times
// larger, and HIGH is congested only past Tolerance times it (Targets.JudgeCalm): so a
// machine on which HIGH never gets under the absolute target does not hold background work
// at its floor for good, while a surge of background work (a campaign's lots, a re-drive)
// that lifts HIGH well above its calm level still makes it give way. The minimum and not an
// average: background work that stays heavy raises an average until it no longer counts as a
// surge, and the minimum keeps the moments between lots, when HIGH is at its own cost.
type calm struct {
	bucket  time.Duration
	minimum []time.Duration // per bucket, oldest first; 0: no value in that bucket
	start   time.Time       // the start of the newest bucket
	since   time.Time       // the first value since the window was last empty
}

// calmWindow is how far back the calm latency looks, in calmBuckets buckets: long enough
// to hold quiet moments between a campaign's lots, short enough to follow the machine when
// its load changes for good (another tenant, a smaller instance).
// A calm latency counts only once the window has held values for calmWarm: a process that
// starts in the middle of a surge does not take the surge for calm, and until then the
// absolute target alone applies (which slows the surge, and so shows the calm moments).
const (
	calmWindow  = 2 * time.Minute
	calmBuckets = 12
	calmWarm    = 10 * time.Second
)

func newCalm() *calm {
	return &calm{bucket: calmWindow / calmBuckets, minimum: make([]time.Duration, calmBuckets)}
}

// add records one HIGH signal observed at now.
func (c *calm) add(d time.Duration, now time.Time) {
	if d <= 0 {
		return
	}
	c.advance(now)
	if c.since.IsZero() {
		c.since = now
	}
	last := len(c.minimum) - 1
	if c.minimum[last] == 0 || d < c.minimum[last] {
		c.minimum[last] = d
	}
}

// advance drops the buckets that ended more than calmWindow before now.
func (c *calm) advance(now time.Time) {
	if c.start.IsZero() {
		c.start = now
		return
	}
	for n := 0; now.Sub(c.start) >= c.bucket && n < len(c.minimum); n++ {
		copy(c.minimum, c.minimum[1:])
		c.minimum[len(c.minimum)-1] = 0
		c.start = c.start.Add(c.bucket)
	}
	if now.Sub(c.start) >= c.bucket { // idle for longer than the window: start over
		c.start = now
	}
	if c.empty() {
		c.since = time.Time{}
	}
}

func (c *calm) empty() bool {
	for _, d := range c.minimum {
		if d > 0 {
			return false
		}
	}
	return true
}

// latency is the calm latency at now: the smallest signal of the window; 0 while the window
// is empty or has held values for less than calmWarm.
func (c *calm) latency(now time.Time) time.Duration {
	c.advance(now)
	if c.since.IsZero() || now.Sub(c.since) < calmWarm {
		return 0
	}
	var m time.Duration
	for _, d := range c.minimum {
		if d > 0 && (m == 0 || d < m) {
			m = d
		}
	}
	return m
}
