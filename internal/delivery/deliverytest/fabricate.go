package deliverytest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// fabricateSQL writes $2 notifications made at random times of the day that begins at unix
// ms $1, each with a SENT SMS delivery (an id of the same millisecond) and the attempt that
// sent it, and, with %s filled in, its idempotency key. Volume fixture for benchmarks of
// partitions and retention: the rows have the shape a sent notification has, at the speed of
// INSERT ... SELECT.
const fabricateSQL = `
WITH g AS (
    SELECT (lpad(to_hex($1::bigint + floor(random() * 86400000)::bigint), 12, '0') || '7'
            || substr(replace(gen_random_uuid()::text, '-', ''), 14))::uuid AS id
      FROM generate_series(1, $2::int)
), n AS (
    INSERT INTO notification (id, client_id, idempotency_key, request_hash, user_id, template, category,
                              priority, payload, response)
    SELECT id, $3, 'fab-' || id, '\x0102030405060708090a0b0c0d0e0f10', 1, 'otp', 'security', 'LOW',
           '{"code":"123456"}', '{"id":"x","deliveries":[],"suppressed":[]}'
      FROM g
    RETURNING id, client_id, idempotency_key, request_hash
), d AS (
    INSERT INTO delivery (id, notification_id, channel, priority, status, attempts, provider,
                          provider_message_id, sent_at)
    SELECT (substr(replace(n.id::text, '-', ''), 1, 12) || '7'
            || substr(replace(gen_random_uuid()::text, '-', ''), 14))::uuid,
           n.id, 'SMS', 'LOW', 'SENT', 1, 'log', 'm-' || n.id, now()
      FROM n
    RETURNING id
), a AS (
    INSERT INTO delivery_attempt (delivery_id, attempt, started_at, outcome, provider)
    SELECT d.id, 1, now(), 'SENT', 'log' FROM d
)%s
SELECT count(*) FROM n`

const fabricateKeys = `, k AS (
    INSERT INTO idempotency_key (client_id, idempotency_key, notification_id, request_hash)
    SELECT client_id, idempotency_key, id, request_hash FROM n
)
`

// FabricateDay writes n sent notifications of the UTC day beginning at day (see
// fabricateSQL), in statements of at most 50,000. keys: also their idempotency keys (the
// table exists from migration 00060 on).
func FabricateDay(ctx context.Context, pool *pgxpool.Pool, clientID string, day time.Time, n int, keys bool) error {
	k := "\n"
	if keys {
		k = fabricateKeys
	}
	q := fmt.Sprintf(fabricateSQL, k)
	for done := 0; done < n; {
		batch := min(50000, n-done)
		if _, err := pool.Exec(ctx, q, day.UnixMilli(), batch, clientID); err != nil {
			return fmt.Errorf("fabricate %d notifications of %s: %w", batch, day.Format(time.DateOnly), err)
		}
		done += batch
	}
	return nil
}
