package delivery

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
)

// Receipt is one provider receipt about a delivery: what the provider says became of the
// message it accepted.
type Receipt struct {
	DeliveryID string
	// Provider is the provider account that sent the receipt, e.g. "sms:twilio".
	Provider string
	// Status is the provider's own word ("delivered", "undelivered", "bounce", "sent", ...)
	// and Code its error code ("" when none).
	Status string
	Code   string
	// Result is what the receipt means for the delivery: herald.StatusDelivered,
	// herald.StatusUndelivered, or "" for a step on the way (queued, sent, deferred, ...),
	// which is logged and moves nothing.
	Result herald.Status
	// At is the provider's time of the event (the receipt's own clock).
	At time.Time
}

// ReceiptOutcome is what ApplyReceipt did with a receipt.
type ReceiptOutcome string

const (
	// ReceiptApplied: the receipt moved the delivery SENT → DELIVERED | UNDELIVERED.
	ReceiptApplied ReceiptOutcome = "applied"
	// ReceiptLogged: logged on the delivery, status unchanged (a step on the way, or a final
	// receipt that came after another one: nothing moves back).
	ReceiptLogged ReceiptOutcome = "logged"
	// ReceiptDuplicate: the delivery already has this receipt; nothing changed.
	ReceiptDuplicate ReceiptOutcome = "duplicate"
	// ReceiptHeld: the send is not recorded yet (or the id is unknown); the receipt is kept
	// until the hold's end and applied when the send is recorded (ApplyHeld, ApplyHeldDue).
	ReceiptHeld ReceiptOutcome = "held"
	// ReceiptIgnored: the delivery ended without being sent (FAILED, EXPIRED, CANCELLED).
	ReceiptIgnored ReceiptOutcome = "ignored"
)

// maxReceipts bounds the receipts logged on one delivery; a final receipt of a SENT delivery
// is always applied and logged.
const maxReceipts = 16

// lockForReceiptSQL reads a delivery's status and locks the row for the receipt's
// transaction. The lock orders a receipt against the outcome writer's SENDING → SENT: either
// the receipt waits for that commit and then sees SENT, or the writer waits for the receipt's
// hold to commit and then finds it (ApplyHeld runs after the outcome's commit). Without it,
// a receipt could read SENDING, miss the writer's look at the holds and wait for the sweeper.
const lockForReceiptSQL = `SELECT status FROM delivery WHERE id = $1::uuid FOR NO KEY UPDATE`

// receiptSQL is the receipt transition: SENT → DELIVERED | UNDELIVERED ($5), the
// compare-and-set from SENT only; a receipt of a delivery already DELIVERED or UNDELIVERED, or
// a step on the way ($5 = ”), only joins the log. The receipt joins the receipts log unless
// the same (provider, status, code) is in it already (a duplicate matches nothing and
// changes nothing) or the log is full. An UNDELIVERED delivery's last_error is the
// provider's code (or its status word without one). The status change writes its event
// (herald.delivery.delivered / .undelivered) through the delivery_status_event trigger, in
// this transaction.
var receiptSQL = `
WITH r AS (
    SELECT jsonb_build_object('provider', $2::text, 'status', $3::text, 'code', $4::text) AS k,
           $5::text AS result)
UPDATE delivery AS d
   SET status = CASE WHEN d.status = 'SENT' AND r.result <> '' THEN r.result ELSE d.status END,
       last_error = CASE WHEN d.status = 'SENT' AND r.result = 'UNDELIVERED' THEN coalesce(nullif($4::text, ''), $3::text)
                         ELSE d.last_error END,
       receipts = coalesce(d.receipts, '[]'::jsonb) || jsonb_build_array(r.k || jsonb_build_object(
           'at', $6::timestamptz, 'receivedAt', now(), 'applied', d.status = 'SENT' AND r.result <> ''))
  FROM r
 WHERE d.id = $1::uuid AND d.status IN ('SENT', 'DELIVERED', 'UNDELIVERED')
   AND NOT coalesce(d.receipts @> jsonb_build_array(r.k), false)
   AND (jsonb_array_length(coalesce(d.receipts, '[]'::jsonb)) < ` + strconv.Itoa(maxReceipts) + ` OR (d.status = 'SENT' AND r.result <> ''))
RETURNING d.status`

// holdReceiptSQL keeps a receipt that came before its send was recorded, until now() + $7 s.
const holdReceiptSQL = `
INSERT INTO receipt_hold (delivery_id, provider, status, code, result, at, expires_at)
VALUES ($1::uuid, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))
ON CONFLICT DO NOTHING`

// TxDB is a DB that can open a transaction (a pool, a connection, or a transaction, whose
// Begin is a savepoint).
type TxDB interface {
	DB
	Begin(ctx context.Context) (pgx.Tx, error)
}

// ApplyReceipt applies r (receiptSQL) in one transaction: from SENT it moves the delivery,
// a duplicate changes nothing, a late receipt is only logged. A receipt of a delivery not
// yet SENT, or of an id herald does not know, is held for hold (holdReceiptSQL).
func ApplyReceipt(ctx context.Context, db TxDB, r Receipt, hold time.Duration) (ReceiptOutcome, error) {
	if r.Result != "" && !r.Result.Received() {
		return "", fmt.Errorf("receipt for delivery %s: unexpected result %s", r.DeliveryID, r.Result)
	}
	var out ReceiptOutcome
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var err error
		out, err = applyReceipt(ctx, tx, r, hold)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("receipt for delivery %s: %w", r.DeliveryID, err)
	}
	return out, nil
}

func applyReceipt(ctx context.Context, tx pgx.Tx, r Receipt, hold time.Duration) (ReceiptOutcome, error) {
	var was herald.Status
	err := tx.QueryRow(ctx, lockForReceiptSQL, pgx.QueryExecModeExec, r.DeliveryID).Scan(&was)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", err
	}
	switch {
	case was == herald.StatusSent || was.Received():
	case was == "" || !was.Terminal():
		_, err := tx.Exec(ctx, holdReceiptSQL, pgx.QueryExecModeExec, r.DeliveryID, r.Provider, r.Status, r.Code,
			holdResult(r.Result), r.At, hold.Seconds())
		return ReceiptHeld, err
	default:
		return ReceiptIgnored, nil
	}
	var now herald.Status
	err = tx.QueryRow(ctx, receiptSQL, pgx.QueryExecModeExec, r.DeliveryID, r.Provider, r.Status, r.Code,
		string(r.Result), r.At).Scan(&now)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ReceiptDuplicate, nil
	case err != nil:
		return "", err
	case now != was:
		return ReceiptApplied, nil
	}
	return ReceiptLogged, nil
}

// holdResult is a result as receipt_hold.result spells it.
func holdResult(s herald.Status) string {
	if s == "" {
		return "INFO"
	}
	return string(s)
}
