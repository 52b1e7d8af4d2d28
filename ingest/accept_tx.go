package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldhq/herald/internal/delivery"
)

// The accepting transaction is pipelined into two round trips on one connection:
//
//	BEGIN; loadAcceptContext          (read: clock, earlier key, template, contact, preferences)
//	delivery.Insert...; COMMIT        (write: notification + deliveries)
//
// with the decisions (validation against the template, opt-outs, quiet hours) made in Go in
// between. It is one ordinary READ COMMITTED transaction; pipelining only saves the round
// trips of BEGIN and COMMIT. If the insert fails, the server skips the queued COMMIT and
// rollbackOpen ends the transaction.

// beginAccept opens the transaction and reads the accept context.
func beginAccept(ctx context.Context, conn *pgxpool.Conn, clientID, key string, in *notificationInput) (*acceptContext, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(loadAcceptContext, clientID, key, in.UserID, in.Template)
	br := conn.SendBatch(ctx, b)
	_, err := br.Exec()
	var ac *acceptContext
	if err == nil {
		ac, err = scanAcceptContext(br.QueryRow(), in.UserID)
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("begin accept transaction: %w", cerr)
	}
	return ac, err
}

// insertAndCommit runs the insert transition (delivery.QueueInsert) and the COMMIT in one
// round trip. It returns false when the Idempotency-Key was taken (the transaction then
// committed nothing).
func insertAndCommit(ctx context.Context, conn *pgxpool.Conn, n delivery.Notification) (bool, error) {
	b := &pgx.Batch{}
	var inserted bool
	delivery.QueueInsert(b, n, &inserted)
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return false, err
	}
	return inserted, nil
}

// rollbackOpen rolls back a transaction still open on conn (after an early return or a
// failed statement), so the connection goes back to the pool clean. Should the rollback
// fail, the pool discards the connection on Release because it is not idle.
func rollbackOpen(ctx context.Context, conn *pgxpool.Conn) {
	if conn.Conn().PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = conn.Exec(ctx, "ROLLBACK")
}
