package ingest

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Accepting a notification takes two statements and no transaction block:
//
//	loadAcceptContext       (read: clock, earlier key, template, contact, preferences)
//	delivery.Insert         (write: notification + deliveries, one statement)
//
// with the decisions (validation against the template, opt-outs, quiet hours) and the
// template render made in Go in between, holding no connection and no transaction: a render
// is bounded (senders/templates) but still the caller's work, and must never keep a pooled
// connection or an open transaction waiting. The read needs no transaction (READ COMMITTED
// would give each statement its own snapshot anyway and the read takes no locks); the write
// is one statement, atomic on its own, and its ON CONFLICT settles a concurrent request with
// the same Idempotency-Key.

// readAcceptContext reads the accept context.
func readAcceptContext(ctx context.Context, pool *pgxpool.Pool, clientID, key string, in *notificationInput) (*acceptContext, error) {
	return scanAcceptContext(pool.QueryRow(ctx, loadAcceptContext, clientID, key, in.UserID, in.Template), in.UserID)
}
