package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestRedrive: a FAILED and an EXPIRED delivery go back to PENDING, due at write (so the
// relay publishes the new version), keeping their attempt count and log; the re-drive and
// the attempt count at the re-drive are on the row, and the next attempt logged copies the
// re-drive id. A caller that read another status or attempt count, a row in another state
// and a row of a cancelled campaign are left alone.
func TestRedrive(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	failed := deliverytest.Failed(t, pool, 3, deliverytest.Spec{ClientID: client, Attempts: 6},
		delivery.Outcome{Provider: "sms:twilio", ProviderCode: "503"})
	expired := deliverytest.Expired(t, pool, 1, deliverytest.Spec{ClientID: client})
	sent := deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, Status: herald.StatusSent, Attempts: 1})
	rd := uuid.Must(uuid.NewV7())
	future := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)

	got, err := delivery.Redrive(ctx, pool, rd, &future, []delivery.Redrivable{
		{ID: failed[0], Status: herald.StatusFailed, Attempts: 6},
		{ID: failed[1], Status: herald.StatusFailed, Attempts: 5},  // stale attempt count
		{ID: failed[2], Status: herald.StatusExpired, Attempts: 6}, // stale status
		{ID: expired[0], Status: herald.StatusExpired, Attempts: 1},
		{ID: sent, Status: herald.StatusSent, Attempts: 1}, // not a re-drivable state
	})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{failed[0], expired[0]}, got)

	type row struct {
		Status         herald.Status
		Attempts, Base int
		Redrive        *uuid.UUID
		DueAtWrite     bool
		ExpiresAt      *time.Time
		Logged         int
	}
	read := func(id string) row {
		var r row
		require.NoError(t, pool.QueryRow(ctx, `SELECT status, attempts, attempts_at_redrive, redrive_id,
			next_attempt_at = updated_at, expires_at, (SELECT count(*) FROM delivery_attempt WHERE delivery_id = $1)
			FROM delivery WHERE id = $1`, id).Scan(&r.Status, &r.Attempts, &r.Base, &r.Redrive, &r.DueAtWrite, &r.ExpiresAt, &r.Logged))
		return r
	}
	r := read(failed[0])
	require.Equal(t, herald.StatusPending, r.Status)
	require.Equal(t, 6, r.Attempts, "attempt numbers go on")
	require.Equal(t, 6, r.Base, "the budget counts from here")
	require.Equal(t, rd, *r.Redrive)
	require.True(t, r.DueAtWrite, "due at write: the relay publishes the re-armed version")
	require.True(t, future.Equal(*r.ExpiresAt))
	require.Equal(t, 1, r.Logged, "the attempt log is kept")
	r = read(expired[0])
	require.Equal(t, herald.StatusPending, r.Status)
	require.True(t, future.Equal(*r.ExpiresAt), "the new expiry replaces the passed one")
	for _, id := range []string{failed[1], failed[2]} {
		r := read(id)
		require.Equal(t, herald.StatusFailed, r.Status)
		require.Nil(t, r.Redrive)
	}
	require.Equal(t, herald.StatusSent, read(sent).Status)

	// The next attempt is number 7 and names the re-drive.
	att, started, ok, err := delivery.Claim(ctx, pool, failed[0], 6)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 7, att)
	ok, err = delivery.Record(ctx, pool, failed[0], att, started, delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sms:twilio"})
	require.NoError(t, err)
	require.True(t, ok)
	var logged []*uuid.UUID
	rows, err := pool.Query(ctx, `SELECT redrive_id FROM delivery_attempt WHERE delivery_id = $1 ORDER BY attempt`, failed[0])
	require.NoError(t, err)
	for rows.Next() {
		var id *uuid.UUID
		require.NoError(t, rows.Scan(&id))
		logged = append(logged, id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, logged, 2)
	require.Nil(t, logged[0], "attempt 6 ran before the re-drive")
	require.Equal(t, rd, *logged[1], "attempt 7 names the re-drive")

	// Without a new expiry, the row keeps its own.
	again, err := delivery.Redrive(ctx, pool, rd, nil, []delivery.Redrivable{{ID: failed[1], Status: herald.StatusFailed, Attempts: 6}})
	require.NoError(t, err)
	require.Equal(t, []string{failed[1]}, again)
	require.Nil(t, read(failed[1]).ExpiresAt)
}

// TestRedriveLeavesCancelledCampaigns: a FAILED delivery of a cancelled campaign is not
// re-armed.
func TestRedriveLeavesCancelledCampaigns(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	ids := deliverytest.Failed(t, pool, 1, deliverytest.Spec{ClientID: client}, delivery.Outcome{})
	campaign := uuid.Must(uuid.NewV7())
	_, err := pool.Exec(ctx, `INSERT INTO campaign (id, client_id, idempotency_key, request_hash, response, name, template,
		category, channels, priority, audience_kind, status) VALUES ($1, $2, 'k', '\x00', '{}', 'c', 'otp', 'security',
		'{SMS}', 'LOW', 'users', 'CANCELLED')`, campaign, client)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE notification SET campaign_id = $1 WHERE id = (SELECT notification_id FROM delivery WHERE id = $2)`, campaign, ids[0])
	require.NoError(t, err)
	got, err := delivery.Redrive(ctx, pool, uuid.Must(uuid.NewV7()), nil, []delivery.Redrivable{{ID: ids[0], Status: herald.StatusFailed, Attempts: 1}})
	require.NoError(t, err)
	require.Empty(t, got)
	require.Equal(t, herald.StatusFailed, read(t, pool, ids[0]).Status)
}
