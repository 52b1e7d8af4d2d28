package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
)

// takeHeldSQL takes the held receipts of deliveries just recorded SENT ($1), oldest event
// first, so that ApplyHeld applies them in the provider's order.
const takeHeldSQL = `
DELETE FROM receipt_hold WHERE delivery_id = ANY($1::text[]::uuid[])
RETURNING delivery_id::text, provider, status, code, result, at,
          extract(epoch FROM greatest(expires_at - now(), interval '1 second'))::float8`

// anyHeldSQL says whether any of the deliveries $1 holds a receipt. Prepared, on the
// held receipts' primary key: an outcome with nothing held, nearly every one, costs one
// statement after its commit and not a transaction of three.
const anyHeldSQL = `SELECT EXISTS (SELECT 1 FROM receipt_hold WHERE delivery_id = ANY($1::text[]::uuid[]))`

// takeHeldDueSQL takes up to $1 held receipts whose delivery has been sent since they came
// (the sweeper's fallback for a process that stopped between an outcome's commit and its
// ApplyHeld), skipping those another sweeper holds.
const takeHeldDueSQL = `
DELETE FROM receipt_hold WHERE ctid = ANY (ARRAY(
    SELECT h.ctid FROM receipt_hold h
     WHERE EXISTS (SELECT 1 FROM delivery d WHERE d.id = h.delivery_id AND d.status IN ('SENT', 'DELIVERED', 'UNDELIVERED'))
     LIMIT $1 FOR UPDATE SKIP LOCKED))
RETURNING delivery_id::text, provider, status, code, result, at,
          extract(epoch FROM greatest(expires_at - now(), interval '1 second'))::float8`

// dropExpiredHoldsSQL drops the held receipts past their hold, returning each one's provider.
const dropExpiredHoldsSQL = `
DELETE FROM receipt_hold WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM receipt_hold WHERE expires_at <= now() LIMIT $1 FOR UPDATE SKIP LOCKED))
RETURNING provider`

// Applied is a held receipt that ApplyHeld or ApplyHeldDue applied, and what came of it.
type Applied struct {
	Receipt
	Outcome ReceiptOutcome
}

// ApplyHeld applies the held receipts of ids, deliveries whose SENT outcome has just been
// committed (dispatch calls it right after RecordBatch). One statement when nothing is held
// (anyHeldSQL). The probe misses no hold: a receipt is held only while its transaction has
// the delivery's row locked and sees it unsent, so a hold that precedes the SENT commit is
// committed before the probe starts, and a receipt that comes after that commit is applied
// at once.
func ApplyHeld(ctx context.Context, db TxDB, ids []string) ([]Applied, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var held bool
	if err := db.QueryRow(ctx, anyHeldSQL, ids).Scan(&held); err != nil {
		return nil, fmt.Errorf("apply held receipts: %w", err)
	}
	if !held {
		return nil, nil
	}
	return applyTaken(ctx, db, takeHeldSQL, ids)
}

// ApplyHeldDue applies up to limit held receipts whose delivery is SENT by now.
func ApplyHeldDue(ctx context.Context, db TxDB, limit int) ([]Applied, error) {
	return applyTaken(ctx, db, takeHeldDueSQL, limit)
}

// DropExpiredHolds drops up to limit held receipts past their hold and returns the provider
// of each (for the count of receipts that never found their send).
func DropExpiredHolds(ctx context.Context, db DB, limit int) ([]string, error) {
	rows, err := db.Query(ctx, dropExpiredHoldsSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("drop expired held receipts: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("drop expired held receipts: %w", err)
	}
	return out, nil
}

// applyTaken takes held receipts with sql and applies each (ApplyReceipt's transition), all
// in one transaction: a crash loses neither the hold nor the receipt. A receipt whose delivery
// is still not SENT is held again with what is left of its hold.
func applyTaken(ctx context.Context, db TxDB, sql string, arg any) ([]Applied, error) {
	var out []Applied
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		out = out[:0]
		held, left, err := takeHeld(ctx, tx, sql, arg)
		if err != nil {
			return err
		}
		for i, r := range held {
			o, err := applyReceipt(ctx, tx, r, left[i])
			if err != nil {
				return fmt.Errorf("delivery %s: %w", r.DeliveryID, err)
			}
			out = append(out, Applied{Receipt: r, Outcome: o})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("apply held receipts: %w", err)
	}
	return out, nil
}

func takeHeld(ctx context.Context, tx pgx.Tx, sql string, arg any) ([]Receipt, []time.Duration, error) {
	rows, err := tx.Query(ctx, sql, pgx.QueryExecModeExec, arg)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var held []Receipt
	var left []time.Duration
	for rows.Next() {
		var r Receipt
		var result string
		var leftSecs float64
		if err := rows.Scan(&r.DeliveryID, &r.Provider, &r.Status, &r.Code, &result, &r.At, &leftSecs); err != nil {
			return nil, nil, err
		}
		if result != "INFO" {
			r.Result = herald.Status(result)
		}
		held, left = append(held, r), append(left, time.Duration(leftSecs*float64(time.Second)))
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	sortByEventTime(held, left)
	return held, left, nil
}

// sortByEventTime orders held receipts by the provider's event time (insertion sort: a
// delivery holds a handful).
func sortByEventTime(rs []Receipt, left []time.Duration) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].At.Before(rs[j-1].At); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
			left[j], left[j-1] = left[j-1], left[j]
		}
	}
}
