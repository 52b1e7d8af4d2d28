package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/cdc"
	"github.com/heraldhq/herald/dispatch"
)

// topicConfig is shared by the relay, which writes the topics, and dispatch, which reads them.
type topicConfig struct {
	Names      map[herald.Priority]*string
	Partitions map[herald.Priority]*int
}

func (t *topicConfig) register(f *envFlags) {
	t.Names = map[herald.Priority]*string{}
	t.Partitions = map[herald.Priority]*int{}
	for _, p := range herald.Priorities {
		lp := strings.ToLower(string(p))
		t.Names[p], t.Partitions[p] = new(string), new(int)
		f.String(t.Names[p], "topic-"+lp, herald.DefaultTopic(p), "Kafka topic of "+string(p)+" deliveries")
		f.Int(t.Partitions[p], "partitions-"+lp, int(cdc.DefaultPartitions[p]), "partitions the "+string(p)+" topic is created with")
	}
}

// relayFlags maps flags onto cdc.Config.
type relayFlags struct {
	cfg          cdc.Config
	queuedLease  map[herald.Priority]*time.Duration
	eventsLinger time.Duration
}

func (r *relayFlags) register(f *envFlags) {
	c := &r.cfg
	f.String(&c.Slot, "relay-slot", cdc.DefaultSlot, "logical replication slot of the relay")
	f.String(&c.Publication, "relay-publication", cdc.DefaultPublication, "publication on the delivery table")
	f.Int(&c.MaxInFlight, "relay-max-in-flight", cdc.DefaultMaxInFlight, "records handed to Kafka and not yet acknowledged, at most")
	f.Duration(&c.StatusInterval, "relay-status-interval", cdc.DefaultStatusInterval, "longest time between two replication status updates")
	f.Duration(&c.SweepInterval, "relay-sweep-interval", cdc.DefaultSweepInterval, "time between two sweeper passes")
	f.Duration(&c.GracePeriod, "relay-grace-period", cdc.DefaultGracePeriod, "how long a due PENDING row may wait for the stream before the sweeper publishes it")
	f.Duration(&c.ReapInterval, "relay-reap-interval", cdc.DefaultReapInterval, "time between two reaper passes")
	f.Duration(&c.SendingLease, "relay-sending-lease", cdc.DefaultSendingLease, "how long a row may stay SENDING before the reaper returns it to PENDING")
	f.Duration(&r.eventsLinger, "relay-events-linger", cdc.DefaultEventsLinger, "how long the status events' producer lets a partition's records wait for more before it sends them (the delivery records never wait)")
	r.queuedLease = map[herald.Priority]*time.Duration{}
	for _, p := range herald.Priorities {
		r.queuedLease[p] = new(time.Duration)
		f.Duration(r.queuedLease[p], "relay-queued-lease-"+strings.ToLower(string(p)), cdc.DefaultQueuedLease[p],
			"how long a "+string(p)+" row may stay QUEUED before the reaper returns it to PENDING")
	}
}

func (r *relayFlags) config(t topicConfig) cdc.Config {
	c := r.cfg
	c.Topics = map[herald.Priority]string{}
	c.Partitions = map[herald.Priority]int32{}
	c.QueuedLease = map[herald.Priority]time.Duration{}
	for _, p := range herald.Priorities {
		c.Topics[p] = *t.Names[p]
		c.Partitions[p] = int32(*t.Partitions[p])
		c.QueuedLease[p] = *r.queuedLease[p]
	}
	return c
}

// dispatchFlags maps flags onto dispatch.Config.
type dispatchFlags struct {
	cfg         dispatch.Config
	concurrency map[herald.Priority]*int
	shares      map[herald.Priority]*float64
	rateLimits  string
	retry       dispatch.RetryPolicy
	lanes       []string
}

func (d *dispatchFlags) register(f *envFlags) {
	d.concurrency = map[herald.Priority]*int{}
	d.shares = map[herald.Priority]*float64{}
	for _, p := range herald.Priorities {
		lp := strings.ToLower(string(p))
		d.concurrency[p], d.shares[p] = new(int), new(float64)
		f.Int(d.concurrency[p], "dispatch-concurrency-"+lp, dispatch.DefaultLanes[p].Concurrency, "deliveries of the "+string(p)+" lane processed at once")
		f.Float(d.shares[p], "rate-share-"+lp, dispatch.DefaultRateShares[p], "share of a provider's rate limit "+string(p)+" deliveries may use")
	}
	all := make([]string, len(herald.Priorities))
	for i, p := range herald.Priorities {
		all[i] = string(p)
	}
	f.Strings(&d.lanes, "lanes", all, "the dispatch lanes this process runs, e.g. HIGH for a HIGH-only dispatcher with its own CPU beside one running NORMAL,LOW")
	f.String(&d.rateLimits, "rate-limits", "", "provider rate limits in calls per second, e.g. sms:twilio=100,email:smtp=50")
	f.Int(&d.cfg.DegradedProcesses, "degraded-processes", dispatch.DefaultDegradedProcesses, "most dispatch processes at once; each takes limit/N while Redis is down")
	f.Duration(&d.cfg.SendTimeout, "send-timeout", dispatch.DefaultSendTimeout, "timeout of one provider call")
	f.Duration(&d.retry.Base, "retry-base", dispatch.DefaultRetryPolicy.Base, "first retry delay's upper bound (full jitter)")
	f.Duration(&d.retry.Max, "retry-max", dispatch.DefaultRetryPolicy.Max, "largest retry delay")
	f.Int(&d.retry.MaxAttempts, "retry-max-attempts", dispatch.DefaultRetryPolicy.MaxAttempts, "attempts before a delivery ends FAILED")
	f.Duration(&d.retry.MaxRetryAfter, "retry-after-max", dispatch.DefaultRetryPolicy.MaxRetryAfter, "longest retry delay a provider's Retry-After may ask for")
}

func (d *dispatchFlags) config(t topicConfig, brokers []string, shutdown time.Duration) (dispatch.Config, error) {
	c := d.cfg
	c.Brokers = brokers
	c.ShutdownTimeout = shutdown
	c.Lanes = map[herald.Priority]dispatch.LaneConfig{}
	c.RateShares = map[herald.Priority]float64{}
	c.RetryPolicies = map[herald.Channel]dispatch.RetryPolicy{}
	for _, p := range herald.Priorities {
		c.Lanes[p] = dispatch.LaneConfig{Topic: *t.Names[p], Concurrency: *d.concurrency[p]}
		c.RateShares[p] = *d.shares[p]
	}
	for _, ch := range herald.Channels {
		c.RetryPolicies[ch] = d.retry
	}
	for _, name := range d.lanes {
		p, err := herald.ParsePriority(name)
		if err != nil || slices.Contains(c.Run, p) {
			return c, fmt.Errorf("--lanes: %q is not HIGH, NORMAL or LOW, or is named twice", name)
		}
		c.Run = append(c.Run, p)
	}
	if len(c.Run) == 0 {
		return c, errors.New("--lanes: no lane named")
	}
	limits, err := parseRateLimits(d.rateLimits)
	if err != nil {
		return c, err
	}
	c.RateLimits = limits
	return c, nil
}

// parseRateLimits reads "sms:twilio=100,email:smtp=50".
func parseRateLimits(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, kv := range splitList(s) {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		if !ok || k == "" || err != nil {
			return nil, fmt.Errorf("--rate-limits: %q is not provider=calls-per-second", kv)
		}
		out[k] = n
	}
	return out, nil
}
