package main

import (
	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/cdc"
)

// eventsFlags are the status events' flags (docs/events.md): the topic the relay streams
// them to, its partition count, and whether transitions write them at all.
type eventsFlags struct {
	Topic      string
	Partitions int
	// Enabled false makes this process's database sessions write no events (the session
	// setting herald.events = off, which the outbox triggers read). For measuring what the
	// events cost; an installation that turns them off breaks the promise that every
	// transition has its event.
	Enabled bool
}

func (e *eventsFlags) register(f *envFlags) {
	f.String(&e.Topic, "events-topic", herald.DefaultEventsTopic, "Kafka topic the relay streams the status events to")
	f.Int(&e.Partitions, "events-partitions", cdc.DefaultEventsPartitions, "partitions the events topic is created with")
	f.Bool(&e.Enabled, "events", true, "write a status event with every client-visible transition; false only to measure their cost (docs/events.md)")
}

// apply sets the events' part of the relay's configuration and of the database sessions.
func (e *eventsFlags) apply(c *serveConfig) {
	c.Relay.cfg.EventsTopic = e.Topic
	c.Relay.cfg.EventsPartitions = int32(e.Partitions)
	if !e.Enabled {
		c.sessionSettings = map[string]string{eventsSetting: "off"}
	}
}

// eventsSetting is the session setting the outbox triggers read (migration 00090).
const eventsSetting = "herald.events"
