package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldhq/herald/internal/recipient"
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

// loadAcceptContext reads, in one round trip, everything a POST needs besides its body: the
// database clock, an earlier notification with the same Idempotency-Key, the template (with
// its content), the user's locale, and the facts the recipient rules read
// (recipient.FactsColumns). Every part is a LEFT JOIN so that one row always comes back.
const loadAcceptContext = `
SELECT now(),
       k.request_hash, ex.response,
       t.category, t.channels, t.content, coalesce(c.locale, ''),
       ` + recipient.FactsColumns + `
FROM (SELECT 1) AS one
LEFT JOIN idempotency_key k ON k.client_id = $1 AND k.idempotency_key = $2
LEFT JOIN notification ex ON ex.id = k.notification_id
LEFT JOIN template t ON t.name = $4
LEFT JOIN user_contact c ON c.user_id = $3
LEFT JOIN user_preference p ON p.user_id = $3`

// acceptContext is the row of loadAcceptContext.
type acceptContext struct {
	now              time.Time
	existingHash     []byte // nil: no earlier notification with this key
	existingResponse []byte
	templateCategory *string // nil: unknown template
	templateChannels []string
	templateContent  []byte // senders/templates content; {} for the built-in fallback
	locale           string // the stored contact's locale; "" = the template's default
	facts            recipient.Facts
}

func scanAcceptContext(row pgx.Row, userID int64) (*acceptContext, error) {
	var ac acceptContext
	dest := []any{&ac.now, &ac.existingHash, &ac.existingResponse,
		&ac.templateCategory, &ac.templateChannels, &ac.templateContent, &ac.locale}
	err := row.Scan(append(dest, ac.facts.Dest()...)...)
	if err != nil {
		return nil, fmt.Errorf("load accept context of user %d: %w", userID, err)
	}
	return &ac, nil
}
