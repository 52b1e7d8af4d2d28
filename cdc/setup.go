package cdc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
)

const pgDuplicateObject = "42710"

// ensureTopics creates the priority topics and the events topic with their configured
// partition counts. Topics that exist already are left as they are.
func ensureTopics(ctx context.Context, kafka *kgo.Client, cfg Config) error {
	adm := kadm.NewClient(kafka)
	for _, p := range herald.Priorities {
		topic := cfg.Topics[p]
		resp, err := adm.CreateTopic(ctx, cfg.Partitions[p], cfg.ReplicationFactor, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
	}
	resp, err := adm.CreateTopic(ctx, cfg.EventsPartitions, cfg.ReplicationFactor, nil, cfg.EventsTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", cfg.EventsTopic, err)
	}
	return nil
}

// publishedTables are the tables of the relay's publication: the deliveries and the
// status-event outbox (docs/events.md), on the one slot.
var publishedTables = []string{deliveryTable, eventTable}

// ensurePublication creates the publication on the delivery and delivery_event tables if
// it does not exist, adds a table it lacks, and makes an existing one publish through the
// partition root.
//
// Both tables are partitioned by day (migrations 00060, 00090): with
// publish_via_partition_root the relay sees one relation per table, whatever partition a
// row is in, and partitions created or dropped later need no change to the publication. A
// publication made before the partitions (without the option), or before the outbox, is
// altered here.
//
// It has no row filter: a filter on columns outside the replica identity (status,
// next_attempt_at) would make every UPDATE of delivery fail, and "due" needs now() anyway.
// The relay filters. It publishes inserts and updates only; deletes and truncates carry
// nothing to send (events are only ever inserted).
func ensurePublication(ctx context.Context, pool *pgxpool.Pool, name string) error {
	var exists, viaRoot bool
	var have []string
	err := pool.QueryRow(ctx, `SELECT true, p.pubviaroot,
		ARRAY(SELECT r.prrelid::regclass::text FROM pg_publication_rel r WHERE r.prpubid = p.oid)
		FROM pg_publication p WHERE p.pubname = $1`, name).Scan(&exists, &viaRoot, &have)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("look up publication %s: %w", name, err)
	}
	tables, err := existingTables(ctx, pool)
	if err != nil {
		return err
	}
	// name is checked against identifier in validate: safe to splice.
	if !exists {
		_, err = pool.Exec(ctx, `CREATE PUBLICATION `+name+` FOR TABLE `+strings.Join(tables, ", ")+`
			WITH (publish = 'insert, update', publish_via_partition_root = true)`)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == pgDuplicateObject {
			return nil // another relay was faster
		}
		if err != nil {
			return fmt.Errorf("create publication %s: %w", name, err)
		}
		return nil
	}
	for _, t := range tables {
		if !slices.Contains(have, t) {
			if _, err := pool.Exec(ctx, `ALTER PUBLICATION `+name+` ADD TABLE `+t); err != nil {
				return fmt.Errorf("add table %s to publication %s: %w", t, name, err)
			}
		}
	}
	if !viaRoot {
		if _, err := pool.Exec(ctx, `ALTER PUBLICATION `+name+` SET (publish_via_partition_root = true)`); err != nil {
			return fmt.Errorf("alter publication %s: %w", name, err)
		}
	}
	return nil
}

// existingTables returns the publishedTables the database has: a relay may stream from a
// database that its migrations have not reached yet (the outbox is migration 00090's, which
// adds it to the publication itself when it runs).
func existingTables(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	var out []string
	err := pool.QueryRow(ctx, `SELECT ARRAY(SELECT t FROM unnest($1::text[]) AS t WHERE to_regclass(t) IS NOT NULL)`,
		publishedTables).Scan(&out)
	if err != nil {
		return nil, fmt.Errorf("look up the published tables: %w", err)
	}
	return out, nil
}

// ensureSlot creates the durable pgoutput slot if it does not exist and reports whether it
// did. Never a temporary slot: the slot is what lets a restarted relay resume where the last
// one was acknowledged. Rows committed before a new slot exists reach Kafka through the
// sweeper's grace-period scan.
func ensureSlot(ctx context.Context, conn *pgconn.PgConn, slot string) (bool, error) {
	_, err := pglogrepl.CreateReplicationSlot(ctx, conn, slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{
		Mode:           pglogrepl.LogicalReplication,
		SnapshotAction: "NOEXPORT_SNAPSHOT",
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgDuplicateObject {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create replication slot %s: %w", slot, err)
	}
	return true, nil
}

// replicationConfig derives the replication session's configuration from the relay's
// connection string. DateStyle and TimeZone are pinned so that pgoutput's text values parse
// the same whatever the server's defaults are.
func replicationConfig(connString, appName string) (*pgconn.Config, error) {
	cfg, err := pgconn.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("parse connection string: %w", err)
	}
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["DateStyle"] = "ISO"
	cfg.RuntimeParams["TimeZone"] = "UTC"
	cfg.RuntimeParams["application_name"] = appName
	return cfg, nil
}
