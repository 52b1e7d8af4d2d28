package ingest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/migrate"
	"github.com/heraldhq/herald/internal/openapitest"
	"github.com/heraldhq/herald/internal/partition"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestPartitionMigrationKeepsRowsAndKeys: migration 00060 converts a database with rows of
// several days: every row is in its day's partition afterwards, GET answers for an old
// notification, its Idempotency-Key still holds, and new notifications are accepted.
func TestPartitionMigrationKeepsRowsAndKeys(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, stacktest.PostgresURLAt(t, stacktest.VersionBefore(t, 60)))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	c, err := apikey.CreateAPIClient(ctx, pool, "test", []apikey.Scope{apikey.ScopeOperator}) // the scopes an old schema knows
	require.NoError(t, err)

	var now time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT now()`).Scan(&now))
	var times []time.Time
	for d := -9; d <= 0; d += 3 { // days -9, -6, -3, 0, three notifications each
		for h := range 3 {
			times = append(times, now.AddDate(0, 0, d).Add(-time.Duration(h)*time.Hour))
		}
	}
	old := deliverytest.InsertUnpartitioned(t, pool, c.ID, times)
	_, err = pool.Exec(ctx, `CREATE PUBLICATION before_partitions FOR TABLE delivery WITH (publish = 'insert, update')`)
	require.NoError(t, err)

	res, err := migrate.Up(ctx, pool)
	require.NoError(t, err)
	require.NotEmpty(t, res)

	count := func(sql string, args ...any) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&n))
		return n
	}
	for _, table := range []string{"notification", "delivery", "delivery_attempt", "idempotency_key"} {
		require.Equal(t, len(old), count(`SELECT count(*) FROM `+table), table)
	}
	for _, o := range old {
		day := partition.DayOfID(o.NotificationID).Suffix()
		var n, d, a string
		require.NoError(t, pool.QueryRow(ctx, `SELECT n.tableoid::regclass::text, d.tableoid::regclass::text, a.tableoid::regclass::text
			FROM notification n JOIN delivery d ON d.notification_id = n.id JOIN delivery_attempt a ON a.delivery_id = d.id
			WHERE n.id = $1`, o.NotificationID).Scan(&n, &d, &a))
		require.Equal(t, []string{"notification_" + day, "delivery_" + day, "delivery_attempt_" + day}, []string{n, d, a})
	}
	require.Equal(t, 1, count(`SELECT count(*) FROM pg_publication p JOIN pg_publication_rel r ON r.prpubid = p.oid
		WHERE p.pubname = 'before_partitions' AND p.pubviaroot AND r.prrelid = 'delivery'::regclass`),
		"the publication publishes the partitioned delivery through its root")
	var trigger bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'delivery'::regclass AND tgname = 'delivery_touch')`).Scan(&trigger))
	require.True(t, trigger)

	api, err := New(Config{}, pool, zaptest.NewLogger(t))
	require.NoError(t, err)
	srv := httptest.NewServer(openapitest.Handler(t, api.Handler()))
	t.Cleanup(srv.Close)
	e := &env{t: t, pool: pool, srv: srv, key: c.Key, clientID: c.ID}

	oldest := old[len(old)-1]
	got := e.do(http.MethodGet, "/api/notifications/"+oldest.NotificationID.String(), nil, nil)
	require.Equal(t, http.StatusOK, got.status, "%s", got.body)
	ds := got.json(t)["deliveries"].([]any)
	require.Len(t, ds, 1)
	require.Equal(t, oldest.DeliveryID.String(), ds[0].(map[string]any)["id"])
	require.Equal(t, "SENT", ds[0].(map[string]any)["status"])

	// The key of a notification made before the migration is still taken.
	e.template("otp", "security", "SMS")
	e.user(1, map[string]any{"phone": "+15551234567"})
	reused := e.post(oldest.IdempotencyKey, `{"userId":1,"template":"otp","channels":["SMS"]}`)
	requireProblem(t, reused, http.StatusUnprocessableEntity, codeIdempotencyKeyReused)

	// New notifications go to today's partitions.
	a := e.accepted("after", `{"userId":1,"template":"otp","channels":["SMS"]}`)
	require.Equal(t, len(old)+1, count(`SELECT count(*) FROM notification`))
	var part string
	require.NoError(t, pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM notification WHERE id = $1`, a["id"]).Scan(&part))
	require.Equal(t, "notification_"+partition.DayOf(time.Now()).Suffix(), part)
}

// TestPartitionMigrationRefusesIdsThatAreNotUUIDv7: a row whose id carries no time cannot
// be placed in a day; the migration stops and changes nothing.
func TestPartitionMigrationRefusesIdsThatAreNotUUIDv7(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, stacktest.PostgresURLAt(t, stacktest.VersionBefore(t, 60)))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	c, err := apikey.CreateAPIClient(ctx, pool, "test", []apikey.Scope{apikey.ScopeOperator}) // the scopes an old schema knows
	require.NoError(t, err)
	deliverytest.InsertUnpartitioned(t, pool, c.ID, []time.Time{time.Now()})
	_, err = pool.Exec(ctx, `INSERT INTO notification (id, client_id, idempotency_key, request_hash, user_id, template, category, priority, response)
		VALUES (gen_random_uuid(), $1, 'v4', '\x01', 1, 'otp', 'security', 'LOW', '{}')`, c.ID)
	require.NoError(t, err)

	_, err = migrate.Up(ctx, pool)
	require.ErrorContains(t, err, "must be UUIDv7")
	var partitioned bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT relkind = 'p' FROM pg_class WHERE oid = 'notification'::regclass`).Scan(&partitioned))
	require.False(t, partitioned)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM notification`).Scan(&n))
	require.Equal(t, 2, n)
}
