package partition

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
)

// Why a day past the retention keeps its partitions.
const (
	// ReasonNotFinal: deliveries of the day are not final (PENDING, QUEUED, SENDING).
	ReasonNotFinal = "not_final"
	// ReasonReferenced: deliveries of another day (made a moment after midnight) of the
	// day's notifications are not final; dropping the notifications would orphan them.
	ReasonReferenced = "referenced"
	// ReasonLocked: the table locks were not granted within LockTimeout, or the drop ended
	// in a deadlock with a transaction of the running system; the next pass tries again.
	ReasonLocked = "locked"
)

// finalStatuses are the statuses a delivery never leaves (herald.Status.Terminal).
var finalStatuses = []string{
	string(herald.StatusSent), string(herald.StatusFailed), string(herald.StatusExpired), string(herald.StatusCancelled),
	string(herald.StatusDelivered), string(herald.StatusUndelivered),
}

// notFinalInDaySQL counts the deliveries of one delivery partition that are not final.
// %s is the partition's quoted name.
const notFinalInDaySQL = `SELECT count(*) FROM %s WHERE status <> ALL ($1::text[])`

// notFinalReferencingSQL counts the deliveries outside the day whose notification is of the
// day and that are not final: each other partition answers from its (notification_id,
// channel) index.
const notFinalReferencingSQL = `
SELECT count(*) FROM delivery
 WHERE (id < $1 OR id >= $2) AND notification_id >= $1 AND notification_id < $2
   AND status <> ALL ($3::text[])`

// deleteKeysSQL deletes up to 10,000 idempotency keys of a day's notifications.
const deleteKeysSQL = `
DELETE FROM idempotency_key WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM idempotency_key WHERE notification_id >= $1 AND notification_id < $2 LIMIT 10000))`

// retain drops the partitions of every day that ended at least Retention before now and
// whose deliveries are all final, oldest first. Final states are never left and no row is
// ever inserted into a past day, so the checks need no lock: once true, they stay true.
func (m *Manager) retain(ctx context.Context, conn *pgxpool.Conn, now time.Time, have days) ([]Day, []Kept, error) {
	old := make([]Day, 0, len(have))
	for d := range have {
		if !d.Add(1).Time().Add(m.cfg.Retention).After(now) {
			old = append(old, d)
		}
	}
	slices.SortFunc(old, func(a, b Day) int { return a.Time().Compare(b.Time()) })
	var dropped []Day
	var kept []Kept
	for _, d := range old {
		k, err := m.check(ctx, conn, d, have[d])
		if err != nil {
			return dropped, kept, err
		}
		if k.Reason == "" {
			k, err = m.drop(ctx, conn, d, have[d])
			if err != nil {
				return dropped, kept, err
			}
		}
		if k.Reason != "" {
			kept = append(kept, k)
			m.log.Info("partitions past the retention kept", zap.Stringer("day", d),
				zap.String("reason", k.Reason), zap.Int64("deliveries_not_final", k.Count))
			continue
		}
		dropped = append(dropped, d)
	}
	if len(dropped) > 0 {
		m.vacuumKeys(ctx, conn)
	}
	return dropped, kept, nil
}

// check returns the reason to keep day d, or a Kept with no reason.
func (m *Manager) check(ctx context.Context, conn *pgxpool.Conn, d Day, tables map[string]bool) (Kept, error) {
	k := Kept{Day: d}
	if tables["delivery"] {
		q := fmt.Sprintf(notFinalInDaySQL, pgx.Identifier{d.Name("delivery")}.Sanitize())
		if err := conn.QueryRow(ctx, q, finalStatuses).Scan(&k.Count); err != nil {
			return k, fmt.Errorf("count deliveries not final of %s: %w", d, err)
		}
		if k.Count > 0 {
			k.Reason = ReasonNotFinal
			return k, nil
		}
	}
	if tables["notification"] {
		err := conn.QueryRow(ctx, notFinalReferencingSQL, d.Lower(), d.Add(1).Lower(), finalStatuses).Scan(&k.Count)
		if err != nil {
			return k, fmt.Errorf("count deliveries of notifications of %s: %w", d, err)
		}
		if k.Count > 0 {
			k.Reason = ReasonReferenced
		}
	}
	return k, nil
}

// drop deletes the day's idempotency keys (in batches, before the partitions: a key never
// outlives its notification) and then detaches and drops the day's partitions of the four
// tables in one transaction.
func (m *Manager) drop(ctx context.Context, conn *pgxpool.Conn, d Day, tables map[string]bool) (Kept, error) {
	var keys int64
	for {
		tag, err := conn.Exec(ctx, deleteKeysSQL, d.Lower(), d.Add(1).Lower())
		if err != nil {
			return Kept{}, fmt.Errorf("delete idempotency keys of %s: %w", d, err)
		}
		keys += tag.RowsAffected()
		if tag.RowsAffected() == 0 {
			break
		}
	}
	err := m.inTx(ctx, conn, func(tx pgx.Tx) error {
		for _, t := range Tables {
			if !tables[t] {
				continue
			}
			part := pgx.Identifier{d.Name(t)}.Sanitize()
			if _, err := tx.Exec(ctx, "ALTER TABLE "+pgx.Identifier{t}.Sanitize()+" DETACH PARTITION "+part); err != nil {
				return fmt.Errorf("detach %s: %w", d.Name(t), err)
			}
			if _, err := tx.Exec(ctx, "DROP TABLE "+part); err != nil {
				return fmt.Errorf("drop %s: %w", d.Name(t), err)
			}
		}
		return nil
	})
	if isLockTimeout(err) {
		return Kept{Day: d, Reason: ReasonLocked}, nil
	}
	if err != nil {
		return Kept{}, fmt.Errorf("drop partitions of %s: %w", d, err)
	}
	m.log.Info("partitions dropped", zap.Stringer("day", d), zap.Int64("idempotency_keys", keys))
	return Kept{Day: d}, nil
}

// vacuumKeys makes the space of the deleted idempotency keys reusable at once: a day's
// keys are deleted in one go, and autovacuum's thresholds would let the table grow by
// another day or two of dead rows first. VACUUM does not block inserts.
func (m *Manager) vacuumKeys(ctx context.Context, conn *pgxpool.Conn) {
	if _, err := conn.Exec(ctx, `VACUUM idempotency_key`); err != nil {
		m.log.Warn("vacuum idempotency_key", zap.Error(err))
	}
}
