package result

import "time"

// PerSecond sums values into 1-second buckets from T0: the per-second series of a chart
// (calls per second, accepted per second; Set for a sampled gauge such as a backlog).
type PerSecond struct {
	T0 time.Time
	n  []float64
}

// Add adds v to t's bucket; a time before T0 is dropped.
func (c *PerSecond) Add(t time.Time, v float64) {
	i := int(t.Sub(c.T0) / time.Second)
	if i < 0 {
		return
	}
	for len(c.n) <= i {
		c.n = append(c.n, 0)
	}
	c.n[i] += v
}

// Set records a sampled value in t's bucket; the last sample of a second wins.
func (c *PerSecond) Set(t time.Time, v float64) {
	c.Add(t, 0)
	if i := int(t.Sub(c.T0) / time.Second); i >= 0 {
		c.n[i] = v
	}
}

// Peak is the largest bucket (0 when there is none).
func (c *PerSecond) Peak() float64 {
	m := 0.0
	for _, v := range c.n {
		m = max(m, v)
	}
	return m
}

// Series is the buckets as a chart series over [0, upto) seconds, empty seconds as 0.
func (c *PerSecond) Series(name string, upto int) Series {
	s := Series{Name: name}
	for i := 0; i < upto; i++ {
		v := 0.0
		if i < len(c.n) {
			v = c.n[i]
		}
		s.X = append(s.X, float64(i))
		s.Y = append(s.Y, v)
	}
	return s
}
