// Package herald holds the vocabulary shared by every part of herald: priorities, channels,
// delivery and campaign states, the topology the components share (topics, consumer groups,
// replication slot, publication, Redis prefix, the SENDING lease) and its rules, the Kafka
// message contract and the embedded database migrations (applied by internal/migrate).
//
// It imports nothing but the standard library, so that ingest, cdc, dispatch and senders can
// all import it without importing each other or anything heavy.
package herald

import (
	"fmt"
	"strings"
)

// Priority orders notifications. Each priority has its own Kafka topic, consumer group and
// concurrency, so a HIGH delivery never waits behind a LOW backlog.
type Priority string

const (
	PriorityHigh   Priority = "HIGH"   // OTP codes, security alerts
	PriorityNormal Priority = "NORMAL" // transactional
	PriorityLow    Priority = "LOW"    // marketing
)

// Priorities lists every priority, highest first.
var Priorities = []Priority{PriorityHigh, PriorityNormal, PriorityLow}

// ParsePriority returns the priority named s, or an error.
func ParsePriority(s string) (Priority, error) {
	switch p := Priority(s); p {
	case PriorityHigh, PriorityNormal, PriorityLow:
		return p, nil
	}
	return "", fmt.Errorf("unknown priority %q", s)
}

// Channel is the medium a delivery goes over.
type Channel string

const (
	ChannelPush    Channel = "PUSH"
	ChannelEmail   Channel = "EMAIL"
	ChannelSMS     Channel = "SMS"
	ChannelWebhook Channel = "WEBHOOK"
)

// Channels lists every channel.
var Channels = []Channel{ChannelPush, ChannelEmail, ChannelSMS, ChannelWebhook}

// ParseChannel returns the channel named s, or an error.
func ParseChannel(s string) (Channel, error) {
	switch c := Channel(s); c {
	case ChannelPush, ChannelEmail, ChannelSMS, ChannelWebhook:
		return c, nil
	}
	return "", fmt.Errorf("unknown channel %q", s)
}

// Status is the state of a delivery row. See docs/architecture.md for the state machine,
// and internal/delivery for its transitions:
//
//	PENDING ─relay─▶ QUEUED ─worker─▶ SENDING ─▶ SENT | PENDING (retry) | FAILED | EXPIRED
//	PENDING / QUEUED ─cancel─▶ CANCELLED
//	SENT ─provider receipt─▶ DELIVERED | UNDELIVERED
//
// QUEUED and SENDING rows past their lease go back to PENDING (the reaper).
type Status string

const (
	StatusPending Status = "PENDING" // waiting for next_attempt_at, then for the relay
	StatusQueued  Status = "QUEUED"  // published to Kafka, not yet claimed by a worker
	StatusSending Status = "SENDING" // claimed by a worker; a provider call may be in flight
	StatusSent    Status = "SENT"
	StatusFailed  Status = "FAILED"
	StatusExpired Status = "EXPIRED"
	// StatusCancelled: the notification or its campaign was cancelled before a worker took
	// the delivery; the provider was never called.
	StatusCancelled Status = "CANCELLED"
	// StatusDelivered and StatusUndelivered refine SENT once the provider's receipt says
	// what became of the message (docs/receipts.md). SENT stays the outcome that metrics,
	// retention and a campaign's DONE count; a receipt is counted once on its own.
	StatusDelivered   Status = "DELIVERED"
	StatusUndelivered Status = "UNDELIVERED"
)

// Statuses lists every delivery status, in the order of the state machine: the three
// in-flight states, then the final ones. It returns a new slice each call.
func Statuses() []Status {
	return []Status{StatusPending, StatusQueued, StatusSending, StatusSent, StatusFailed, StatusExpired, StatusCancelled,
		StatusDelivered, StatusUndelivered}
}

// Terminal reports whether s is a final state: no worker, relay or reaper moves it again
// (only a provider receipt refines SENT, and an operator's re-drive re-arms a failure).
func (s Status) Terminal() bool {
	return s == StatusSent || s == StatusFailed || s == StatusExpired || s == StatusCancelled || s.Received()
}

// Received reports whether s is a receipt's refinement of SENT (DELIVERED or UNDELIVERED).
// Such a delivery was counted once, as SENT, when it was sent.
func (s Status) Received() bool {
	return s == StatusDelivered || s == StatusUndelivered
}

// DefaultTopic is the Kafka topic of p's deliveries unless configured otherwise:
// notifications.high, notifications.normal, notifications.low.
func DefaultTopic(p Priority) string {
	return "notifications." + strings.ToLower(string(p))
}

// DefaultConsumerGroup is the consumer group of p's dispatch lane unless configured
// otherwise: herald-dispatch-high, -normal, -low. The relay's reaper watches the same group.
func DefaultConsumerGroup(p Priority) string {
	return "herald-dispatch-" + strings.ToLower(string(p))
}
