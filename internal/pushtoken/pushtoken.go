// Package pushtoken holds every statement on the push_token table: a user's registered
// devices, written by ingest (PUT /api/users/{userId}), read by ingest (GET) and by dispatch
// (a PUSH delivery's targets, resolved at send time), and pruned by dispatch when a provider
// reports a token invalid.
package pushtoken

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the statements run on: a pool, a connection or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

const deleteSQL = `DELETE FROM push_token WHERE user_id = $1`

const insertSQL = `
INSERT INTO push_token (user_id, token, platform)
SELECT $1, t.token, t.platform FROM unnest($2::text[], $3::text[]) AS t (token, platform)`

// Replace makes tokens (with their platforms, index by index) the user's devices. Run it in
// the transaction that writes the rest of the profile.
func Replace(ctx context.Context, tx DB, userID int64, tokens, platforms []string) error {
	if _, err := tx.Exec(ctx, deleteSQL, userID); err != nil {
		return fmt.Errorf("delete push tokens of user %d: %w", userID, err)
	}
	if _, err := tx.Exec(ctx, insertSQL, userID, tokens, platforms); err != nil {
		return fmt.Errorf("insert push tokens of user %d: %w", userID, err)
	}
	return nil
}

// dropSQL removes tokens a provider reported as no longer valid. It only touches the user's
// stored tokens; tokens given inline in a notification are not stored.
const dropSQL = `DELETE FROM push_token WHERE user_id = $1 AND token = ANY($2)`

// Drop removes the user's stored tokens among tokens and returns how many it removed.
func Drop(ctx context.Context, db DB, userID int64, tokens []string) (int64, error) {
	tag, err := db.Exec(ctx, dropSQL, userID, tokens)
	if err != nil {
		return 0, fmt.Errorf("drop %d invalid push tokens of user %d: %w", len(tokens), userID, err)
	}
	return tag.RowsAffected(), nil
}

// The read fragments, constants so that the statements using them stay constants. Each
// names the user by an alias of the statement: c for user_contact, n for notification.

// ContactArrays selects two text[] columns, the tokens and their platforms (ordered by token;
// '{}' for none), of the user of user_contact c.
const ContactArrays = `coalesce((SELECT array_agg(pt.token ORDER BY pt.token) FROM push_token pt WHERE pt.user_id = c.user_id), '{}'),
       coalesce((SELECT array_agg(pt.platform ORDER BY pt.token) FROM push_token pt WHERE pt.user_id = c.user_id), '{}')`

// ContactHasAny selects whether the user of user_contact c has a token.
const ContactHasAny = `EXISTS (SELECT 1 FROM push_token pt WHERE pt.user_id = c.user_id)`

// NotificationJSON selects the tokens of the user of notification n as a jsonb array of
// {token, platform} in registration order ('[]' for none): what dispatch's load reads for a
// PUSH delivery.
const NotificationJSON = `(SELECT coalesce(jsonb_agg(jsonb_build_object('token', pt.token, 'platform', pt.platform)
                                     ORDER BY pt.created_at), '[]')
           FROM push_token pt WHERE pt.user_id = n.user_id)`
