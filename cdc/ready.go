package cdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
)

// The relay's readiness (Ready), one state at a time.
const (
	relayStarting  int32 = iota // not campaigning yet, or between two terms
	relayStandby                // waiting on the lock; the slot and Kafka checked
	relayStreaming              // holding the lock; topics, publication and slot set up, replication started
)

// ErrNotReady is what Ready wraps while the relay cannot yet do its work.
var ErrNotReady = errors.New("relay not ready")

// Ready reports whether the relay can do its work: it holds the leader lock and streams
// (topics, publication and slot set up, START_REPLICATION accepted), or it waits on the lock
// as a standby that has read its slot's state and had an answer from Kafka, so that taking
// over needs nothing it has not checked. Between two terms it is not ready.
func (r *Relay) Ready() error {
	switch r.ready.Load() {
	case relayStreaming, relayStandby:
		return nil
	}
	return fmt.Errorf("%w: campaigning for the leader lock of slot %s", ErrNotReady, r.cfg.Slot)
}

// checkStandby is what a relay that did not get the lock checks before it calls itself ready:
// the slot is not lost (a lost one the next leader must drop and recreate; absent is fine,
// the leader creates it) and the Kafka producer has metadata of the relay's topics.
func (r *Relay) checkStandby(ctx context.Context, lock *pgx.Conn) error {
	var status string
	err := lock.QueryRow(ctx, `SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = $1`,
		r.cfg.Slot).Scan(&status)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("check slot %s: %w", r.cfg.Slot, err)
	}
	if status == "lost" {
		r.log.Warn("standby relay: the replication slot is lost; the next leader recreates it")
	}
	topics := make([]string, 0, len(r.cfg.Topics))
	for _, t := range r.cfg.Topics {
		topics = append(topics, t)
	}
	if _, err := kadm.NewClient(r.kafka).Metadata(ctx, topics...); err != nil {
		return fmt.Errorf("kafka metadata of %v: %w", topics, err)
	}
	return nil
}
