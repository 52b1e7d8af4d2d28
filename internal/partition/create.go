package partition

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// listSQL lists the partitions of the partitioned tables.
const listSQL = `
SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent IN ('notification'::regclass, 'delivery'::regclass, 'delivery_attempt'::regclass,
                       'delivery_event'::regclass)`

// days maps a day to the tables that have a partition of it.
type days map[Day]map[string]bool

// existing lists the daily partitions there are. Partitions with other names are not
// herald's and are left alone.
func existing(ctx context.Context, conn *pgxpool.Conn) (days, error) {
	rows, err := conn.Query(ctx, listSQL)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	have := days{}
	for _, n := range names {
		table, day, err := parseName(n)
		if err != nil {
			continue
		}
		if have[day] == nil {
			have[day] = map[string]bool{}
		}
		have[day][table] = true
	}
	return have, nil
}

// createSQL creates a day's partitions of the partitioned tables (the function is migration
// 00060's, shared with the conversion of an existing database; 00090 adds delivery_event's).
const createSQL = `SELECT herald_create_partitions($1::date)`

// create makes sure today and the Ahead days after it have their partitions. Days that
// have them take no lock.
func (m *Manager) create(ctx context.Context, conn *pgxpool.Conn, today Day, have days) ([]Day, error) {
	var created []Day
	for i := 0; i <= m.cfg.Ahead; i++ {
		d := today.Add(i)
		if len(have[d]) == len(Tables) {
			continue
		}
		err := m.inTx(ctx, conn, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, createSQL, d.Time())
			return err
		})
		if err != nil {
			return created, fmt.Errorf("create partitions of %s: %w", d, err)
		}
		created = append(created, d)
		m.log.Info("partitions created", zap.Stringer("day", d))
	}
	return created, nil
}

// inTx runs fn in a transaction whose lock waits end after LockTimeout.
func (m *Manager) inTx(ctx context.Context, conn *pgxpool.Conn, fn func(pgx.Tx) error) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	ms := m.cfg.LockTimeout / time.Millisecond
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", ms)); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
