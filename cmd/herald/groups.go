package main

import (
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/cdc"
	"github.com/heraldhq/herald/dispatch"
)

// groupFlags name what several herald installations sharing one Kafka cluster and one Redis
// must not share: the dispatch lanes' consumer groups (read by the relay's reaper too) and
// the Redis key prefix. The session timeout is how long Kafka waits for a vanished dispatch
// process before it hands the process's partitions to the others.
type groupFlags struct {
	groups         map[herald.Priority]*string
	sessionTimeout time.Duration
	redisPrefix    string
}

func (g *groupFlags) register(f *envFlags) {
	g.groups = map[herald.Priority]*string{}
	for _, p := range herald.Priorities {
		lp := strings.ToLower(string(p))
		g.groups[p] = new(string)
		f.String(g.groups[p], "dispatch-group-"+lp, herald.DefaultConsumerGroup(p), "Kafka consumer group of the "+string(p)+" dispatch lane")
	}
	f.Duration(&g.sessionTimeout, "kafka-session-timeout", 45*time.Second, "how long Kafka waits for a silent dispatch process before reassigning its partitions")
	f.String(&g.redisPrefix, "redis-prefix", herald.DefaultRedisPrefix, "prefix of every Redis key dispatch writes")
}

// applyDispatch sets the lanes' groups, the session timeout and the Redis prefix.
func (g *groupFlags) applyDispatch(c *dispatch.Config) {
	if c.Lanes == nil {
		c.Lanes = map[herald.Priority]dispatch.LaneConfig{}
	}
	for _, p := range herald.Priorities {
		l := c.Lanes[p]
		l.Group = *g.groups[p]
		c.Lanes[p] = l
	}
	c.RedisPrefix = g.redisPrefix
	c.ClientOptions = append(c.ClientOptions, kgo.SessionTimeout(g.sessionTimeout))
}

// applyRelay tells the relay's reaper which groups to watch.
func (g *groupFlags) applyRelay(c *cdc.Config) {
	c.ConsumerGroups = map[herald.Priority]string{}
	for _, p := range herald.Priorities {
		c.ConsumerGroups[p] = *g.groups[p]
	}
}
