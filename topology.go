package herald

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Defaults of the topology (the topic and consumer-group names are DefaultTopic and
// DefaultConsumerGroup).
const (
	// DefaultSlot is the relay's durable logical replication slot.
	DefaultSlot = "herald_relay"
	// DefaultPublication is the publication on the delivery table the relay streams.
	DefaultPublication = "herald_delivery"
	// DefaultRedisPrefix prefixes every Redis key dispatch writes.
	DefaultRedisPrefix = "herald:"
	// DefaultSendingLease is how long a row may stay SENDING before the relay's reaper
	// returns it to PENDING.
	DefaultSendingLease = 5 * time.Minute
)

// Topology is what herald's components share and must agree on: the relay writes the topics
// that dispatch reads, the reaper watches dispatch's consumer groups, the relay owns the slot
// and the publication, dispatch writes its Redis keys under one prefix, and the reaper's
// SENDING lease must outlast a worker's hold on a row. Several installations that share one
// Kafka cluster, PostgreSQL server or Redis must differ in these names. cmd/herald builds
// it from the configuration of every role and validates it before anything starts.
type Topology struct {
	// Topics is the Kafka topic of each priority's deliveries. Default DefaultTopic.
	Topics map[Priority]string
	// Groups is the consumer group of each priority's dispatch lane (the reaper watches the
	// same group). Default DefaultConsumerGroup.
	Groups map[Priority]string
	// Slot is the relay's logical replication slot. Default DefaultSlot.
	Slot string
	// Publication is the publication on the delivery table. Default DefaultPublication.
	Publication string
	// RedisPrefix prefixes every Redis key dispatch writes. Default DefaultRedisPrefix.
	RedisPrefix string
	// SendingLease is the reaper's lease on SENDING rows. Default DefaultSendingLease.
	SendingLease time.Duration
	// SendingHold is the longest a dispatch worker holds a row SENDING before its provider
	// call has certainly ended (dispatch.Config.SendingHold). Zero: no dispatch config is
	// known, the lease rule is not checked.
	SendingHold time.Duration
}

// WithDefaults returns t with every zero field set to its default. Maps are copied.
func (t Topology) WithDefaults() Topology {
	topics, groups := make(map[Priority]string, len(Priorities)), make(map[Priority]string, len(Priorities))
	for _, p := range Priorities {
		topics[p], groups[p] = t.Topics[p], t.Groups[p]
		if topics[p] == "" {
			topics[p] = DefaultTopic(p)
		}
		if groups[p] == "" {
			groups[p] = DefaultConsumerGroup(p)
		}
	}
	t.Topics, t.Groups = topics, groups
	if t.Slot == "" {
		t.Slot = DefaultSlot
	}
	if t.Publication == "" {
		t.Publication = DefaultPublication
	}
	if t.RedisPrefix == "" {
		t.RedisPrefix = DefaultRedisPrefix
	}
	if t.SendingLease == 0 {
		t.SendingLease = DefaultSendingLease
	}
	return t
}

// Validate checks the rules between components. It checks t as it is: call WithDefaults
// first for a topology with zero fields.
func (t Topology) Validate() error {
	var errs []error
	topics, groups := map[string]Priority{}, map[string]Priority{}
	for _, p := range Priorities {
		switch topic := t.Topics[p]; {
		case topic == "":
			errs = append(errs, fmt.Errorf("no topic for %s", p))
		case topics[topic] != "":
			errs = append(errs, fmt.Errorf("topic %q used by %s and %s", topic, topics[topic], p))
		default:
			topics[topic] = p
		}
		switch group := t.Groups[p]; {
		case group == "":
			errs = append(errs, fmt.Errorf("no consumer group for %s", p))
		case groups[group] != "":
			// One group for two lanes would split one lane's partitions with the other's.
			errs = append(errs, fmt.Errorf("consumer group %q used by %s and %s", group, groups[group], p))
		default:
			groups[group] = p
		}
	}
	if err := CheckIdentifier("slot", t.Slot); err != nil {
		errs = append(errs, err)
	}
	if err := CheckIdentifier("publication", t.Publication); err != nil {
		errs = append(errs, err)
	}
	if t.RedisPrefix == "" {
		errs = append(errs, errors.New("empty Redis prefix"))
	}
	// The reaper returns SENDING rows to PENDING after its lease; a lease not longer than a
	// worker may hold a row before its call has ended lets a second worker call the provider
	// while the first call still runs.
	if t.SendingLease <= 0 {
		errs = append(errs, fmt.Errorf("SENDING lease %v <= 0", t.SendingLease))
	} else if t.SendingHold > 0 && t.SendingLease <= t.SendingHold {
		errs = append(errs, fmt.Errorf("SENDING lease %v must exceed what a dispatch worker may hold a row SENDING, %v (rate wait + send timeout + margin)",
			t.SendingLease, t.SendingHold))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	return nil
}

// identifier is what slot and publication names may look like: they are spliced into
// replication commands, which take no parameters.
var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// CheckIdentifier checks that name, the slot or publication of what, can be spliced into a
// replication command: lower-case letters, digits and _, at most 63 bytes.
func CheckIdentifier(what, name string) error {
	if !identifier.MatchString(name) {
		return fmt.Errorf("%s name %q: want lower-case letters, digits and _", what, name)
	}
	return nil
}
