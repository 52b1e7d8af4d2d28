// Package cdc is herald's relay: it streams due delivery rows from the PostgreSQL write-ahead
// log (logical replication, pgoutput, one durable slot) to one Kafka topic per priority, marks
// them QUEUED once Kafka has them, and, as the elected leader, runs the sweeper (rows that
// became due later, rows the stream missed) and the reaper (QUEUED and SENDING rows past their
// lease). See docs/cdc.md.
package cdc

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
)

// Config configures a Relay. The zero value of every field means its default.
type Config struct {
	// ConnString is the PostgreSQL URL or DSN the replication and leader-lock sessions are
	// opened with (replication=database is added). Default: the pool's connection string.
	ConnString string

	// Slot is the name of the durable logical replication slot. Default "herald_relay".
	Slot string
	// Publication is the name of the publication on the delivery table. Default "herald_delivery".
	Publication string

	// Topics maps each priority to its Kafka topic. Default herald.DefaultTopic.
	Topics map[herald.Priority]string
	// Partitions maps each priority to the partition count its topic is created with.
	// Default 12 / 6 / 2. An existing topic is left as it is.
	Partitions map[herald.Priority]int32
	// EventsTopic is the Kafka topic the status events of the delivery_event outbox go to
	// (docs/events.md). Default herald.DefaultEventsTopic.
	EventsTopic string
	// EventsPartitions is the partition count EventsTopic is created with. Default 6. An
	// existing topic is left as it is.
	EventsPartitions int32
	// EventsKafka produces the status events, when set: a client of its own lets them linger
	// to fill batches (herald serve gives it DefaultEventsLinger) apart from the delivery
	// records. Nil: the relay's client produces them too.
	EventsKafka *kgo.Client
	// Producers produces a priority's delivery records, when set for it: one producer client
	// per priority class (herald serve gives NORMAL and LOW theirs, NewProducers), so that a
	// HIGH record never shares a produce request with theirs nor waits behind one of theirs in
	// flight. A priority without one goes out on the relay's client. HIGH's producer must not
	// linger (New checks).
	Producers map[herald.Priority]*kgo.Client
	// ReplicationFactor of created topics. Default 1.
	ReplicationFactor int16

	// MaxInFlight bounds the records the stream has handed to Kafka and not yet seen
	// acknowledged; at the bound the stream stops reading WAL (status updates go on).
	// MaxInFlight + SweepBatch must not exceed the Kafka client's MaxBufferedRecords (10,000
	// by default). Default 5000.
	MaxInFlight int
	// StatusInterval is the longest time between two standby status updates. Default 10 s.
	StatusInterval time.Duration
	// MarkBatch is the largest number of rows marked QUEUED in one statement. Default 1000.
	MarkBatch int
	// MarkGather is how long the first row Kafka acknowledged waits for more before the relay
	// marks them QUEUED in one statement (at once when MarkBatch rows are waiting). Fewer,
	// larger marks are fewer transactions for PostgreSQL to commit and for the walsender to
	// decode ahead of the next delivery insert. Default 10 ms.
	MarkGather time.Duration
	// MaxUnmarked bounds the rows Kafka has acknowledged and the relay has not yet marked
	// QUEUED (a few hundred bytes each); at the bound the stream stops reading WAL until the
	// marker catches up, so memory stays bounded when PostgreSQL marks slower than Kafka
	// acknowledges. Default 20,000.
	MaxUnmarked int

	// SweepInterval is the time between two sweeper passes. Default 1 s.
	SweepInterval time.Duration
	// SweepBatch is the most rows one sweeper pass publishes. Default 1000.
	SweepBatch int
	// GracePeriod is how long a due PENDING row may wait for the stream before the sweeper
	// publishes it as missed (slot recreated, relay down). Default 30 s.
	GracePeriod time.Duration

	// ReapInterval is the time between two reaper passes. Default 5 s.
	ReapInterval time.Duration
	// ReapBatch is the most rows one reaper pass returns to PENDING per lease. Default 1000.
	ReapBatch int
	// QueuedLease maps each priority to how long a row may stay QUEUED before the reaper
	// returns it to PENDING. It must exceed the time the lane needs to drain its longest
	// expected backlog (docs/cdc.md). Default HIGH 1 min, NORMAL 10 min, LOW 60 min.
	QueuedLease map[herald.Priority]time.Duration
	// ConsumerGroups maps each priority to the consumer group of its dispatch lane. The reaper
	// returns a QUEUED row as soon as that group has committed past every record produced
	// before the row was marked QUEUED (the record was consumed or lost, the row did not
	// move), without waiting for QueuedLease; see laneProgress. A priority mapped to "-" has
	// no group: only its lease applies. Default herald.DefaultConsumerGroup.
	ConsumerGroups map[herald.Priority]string
	// SendingLease is how long a row may stay SENDING (a provider call in flight) before the
	// reaper returns it to PENDING and logs the attempt AMBIGUOUS. It must exceed every
	// provider timeout. Default 5 min.
	SendingLease time.Duration

	// LeaderRetry is the time between two attempts to become leader, and the back-off after
	// a lost leadership. Default 1 s.
	LeaderRetry time.Duration
	// ShutdownTimeout bounds how long a stopping leader waits for Kafka to acknowledge the
	// records in flight before it sends its last status update. Default 10 s.
	ShutdownTimeout time.Duration

	// ObserveLag, when set, is told the relay's lag at each transaction it begins to decode:
	// how long since that transaction committed (the adaptive limits' relay signal,
	// internal/adapt). It runs on the stream's goroutine and must not block.
	ObserveLag func(time.Duration)
	// ObservePublished, when set, is told of every delivery record the stream published, once
	// Kafka acknowledged it, with the times of its way out (Published). It runs on a Kafka
	// client goroutine and must not block. Benchmarks read where the relay's latency goes
	// from it.
	ObservePublished func(Published)
}

// Published is one delivery record of the stream on its way out: when its transaction
// committed (PostgreSQL's clock, from the WAL), when the walsender sent the transaction's
// first message (its clock, from the message's header), when the relay received it, when
// the record was handed to the Kafka client and when Kafka acknowledged it.
type Published struct {
	DeliveryID                                 string
	Committed, Sent, Received, Produced, Acked time.Time
}

// Defaults of Config.
const (
	DefaultSlot              = herald.DefaultSlot
	DefaultPublication       = herald.DefaultPublication
	DefaultMaxInFlight       = 5000
	DefaultStatusInterval    = 10 * time.Second
	DefaultMarkBatch         = 1000
	DefaultMarkGather        = 10 * time.Millisecond
	DefaultMaxUnmarked       = 20000
	DefaultSweepInterval     = time.Second
	DefaultSweepBatch        = 1000
	DefaultGracePeriod       = 30 * time.Second
	DefaultReapInterval      = 5 * time.Second
	DefaultReapBatch         = 1000
	DefaultSendingLease      = herald.DefaultSendingLease
	DefaultLeaderRetry       = time.Second
	DefaultShutdownTimeout   = 10 * time.Second
	DefaultReplicationFactor = 1
	DefaultEventsPartitions  = 6
	// DefaultEventsLinger is how long herald serve's events client lets a partition's
	// records wait for more before it sends them (kgo.ProducerLinger; docs/events.md).
	DefaultEventsLinger = 5 * time.Millisecond
)

// DefaultPartitions are the partition counts used when Config.Partitions leaves a priority out.
var DefaultPartitions = map[herald.Priority]int32{
	herald.PriorityHigh:   12,
	herald.PriorityNormal: 6,
	herald.PriorityLow:    2,
}

// DefaultQueuedLease are the QUEUED leases used when Config.QueuedLease leaves a priority out.
var DefaultQueuedLease = map[herald.Priority]time.Duration{
	herald.PriorityHigh:   time.Minute,
	herald.PriorityNormal: 10 * time.Minute,
	herald.PriorityLow:    60 * time.Minute,
}

// withDefaults returns c with every zero field set to its default. Maps are copied.
func (c Config) withDefaults(poolConnString string) Config {
	c.ConnString = cmp.Or(c.ConnString, poolConnString)
	c.Slot = cmp.Or(c.Slot, DefaultSlot)
	c.Publication = cmp.Or(c.Publication, DefaultPublication)
	c.Topics = mergeDefaults(c.Topics, byPriority(herald.DefaultTopic))
	c.Partitions = mergeDefaults(c.Partitions, DefaultPartitions)
	c.QueuedLease = mergeDefaults(c.QueuedLease, DefaultQueuedLease)
	c.ConsumerGroups = mergeDefaults(c.ConsumerGroups, byPriority(herald.DefaultConsumerGroup))
	for p, g := range c.ConsumerGroups {
		if g == "-" {
			c.ConsumerGroups[p] = ""
		}
	}
	c.EventsTopic = cmp.Or(c.EventsTopic, herald.DefaultEventsTopic)
	c.EventsPartitions = cmp.Or(c.EventsPartitions, DefaultEventsPartitions)
	c.ReplicationFactor = cmp.Or(c.ReplicationFactor, DefaultReplicationFactor)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, DefaultMaxInFlight)
	c.StatusInterval = cmp.Or(c.StatusInterval, DefaultStatusInterval)
	c.MarkBatch = cmp.Or(c.MarkBatch, DefaultMarkBatch)
	c.MarkGather = cmp.Or(c.MarkGather, DefaultMarkGather)
	c.MaxUnmarked = cmp.Or(c.MaxUnmarked, DefaultMaxUnmarked)
	c.SweepInterval = cmp.Or(c.SweepInterval, DefaultSweepInterval)
	c.SweepBatch = cmp.Or(c.SweepBatch, DefaultSweepBatch)
	c.GracePeriod = cmp.Or(c.GracePeriod, DefaultGracePeriod)
	c.ReapInterval = cmp.Or(c.ReapInterval, DefaultReapInterval)
	c.ReapBatch = cmp.Or(c.ReapBatch, DefaultReapBatch)
	c.SendingLease = cmp.Or(c.SendingLease, DefaultSendingLease)
	c.LeaderRetry = cmp.Or(c.LeaderRetry, DefaultLeaderRetry)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.ConnString == "" {
		errs = append(errs, errors.New("no connection string"))
	}
	// Slot and publication names are spliced into replication commands, which take no
	// parameters.
	if err := herald.CheckIdentifier("slot", c.Slot); err != nil {
		errs = append(errs, err)
	}
	if err := herald.CheckIdentifier("publication", c.Publication); err != nil {
		errs = append(errs, err)
	}
	seen := map[string]herald.Priority{}
	for _, p := range herald.Priorities {
		t := c.Topics[p]
		if t == "" {
			errs = append(errs, fmt.Errorf("no topic for %s", p))
		} else if q, dup := seen[t]; dup {
			errs = append(errs, fmt.Errorf("topic %q used by %s and %s", t, q, p))
		}
		seen[t] = p
		if c.Partitions[p] < 1 {
			errs = append(errs, fmt.Errorf("partitions of %s: %d < 1", p, c.Partitions[p]))
		}
		if c.QueuedLease[p] <= 0 {
			errs = append(errs, fmt.Errorf("QUEUED lease of %s: %v <= 0", p, c.QueuedLease[p]))
		}
	}
	if c.EventsTopic == "" {
		errs = append(errs, errors.New("no events topic"))
	} else if p, dup := seen[c.EventsTopic]; dup {
		errs = append(errs, fmt.Errorf("topic %q used by %s and the status events", c.EventsTopic, p))
	}
	if c.EventsPartitions < 1 {
		errs = append(errs, fmt.Errorf("partitions of the events topic: %d < 1", c.EventsPartitions))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"MaxInFlight", c.MaxInFlight}, {"MarkBatch", c.MarkBatch}, {"MaxUnmarked", c.MaxUnmarked}, {"SweepBatch", c.SweepBatch},
		{"ReapBatch", c.ReapBatch}, {"ReplicationFactor", int(c.ReplicationFactor)}} {
		if f.v < 1 {
			errs = append(errs, fmt.Errorf("%s: %d < 1", f.name, f.v))
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"StatusInterval", c.StatusInterval}, {"SweepInterval", c.SweepInterval},
		{"GracePeriod", c.GracePeriod}, {"ReapInterval", c.ReapInterval}, {"MarkGather", c.MarkGather},
		{"SendingLease", c.SendingLease}, {"LeaderRetry", c.LeaderRetry},
		{"ShutdownTimeout", c.ShutdownTimeout}} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: %v <= 0", f.name, f.v))
		}
	}
	if c.StatusInterval > 10*time.Second {
		errs = append(errs, fmt.Errorf("StatusInterval %v: at most 10s", c.StatusInterval))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cdc config: %w", err)
	}
	return nil
}

// byPriority maps every priority to name(priority).
func byPriority(name func(herald.Priority) string) map[herald.Priority]string {
	m := make(map[herald.Priority]string, len(herald.Priorities))
	for _, p := range herald.Priorities {
		m[p] = name(p)
	}
	return m
}

func mergeDefaults[K comparable, V comparable](m, defaults map[K]V) map[K]V {
	out := make(map[K]V, len(defaults))
	for k, v := range defaults {
		out[k] = v
	}
	var zero V
	for k, v := range m {
		if v != zero {
			out[k] = v
		}
	}
	return out
}
