package delivery_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// lot builds a lot of n users with one SMS delivery each; user i's first attempt is at next
// when given.
func lot(campaign uuid.UUID, client string, n int, next *time.Time) delivery.Lot {
	l := delivery.Lot{CampaignID: campaign, ClientID: client, RequestHash: []byte{1}, Template: "promo",
		Category: "marketing", Priority: herald.PriorityLow}
	for i := 1; i <= n; i++ {
		l.Users = append(l.Users, delivery.LotUser{
			NotificationID: uuid.Must(uuid.NewV7()), IdempotencyKey: "campaign·" + campaign.String() + "·" + strconv.Itoa(i),
			UserID: int64(i), Response: []byte(`{}`), NextAttemptAt: next,
			Deliveries: []delivery.New{{ID: uuid.Must(uuid.NewV7()), Channel: herald.ChannelSMS}},
		})
	}
	return l
}

// InsertLot writes every user's notification and deliveries once: a lot written again (new
// ids, the same derived keys) writes nothing.
func TestInsertLotIsIdempotentPerUser(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	campaign := uuid.Must(uuid.NewV7())
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	first := lot(campaign, client, 5, &later)
	first.Users = first.Users[:3]
	n, d, err := delivery.InsertLot(ctx, pool, first)
	require.NoError(t, err)
	require.Equal(t, [2]int{3, 3}, [2]int{n, d})

	n, d, err = delivery.InsertLot(ctx, pool, lot(campaign, client, 5, &later))
	require.NoError(t, err)
	require.Equal(t, [2]int{2, 2}, [2]int{n, d}, "only users 4 and 5 are new")

	var rows, pending, deferred int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE d.status = 'PENDING'),
       count(*) FILTER (WHERE d.next_attempt_at = $2)
FROM delivery d JOIN notification n ON n.id = d.notification_id WHERE n.campaign_id = $1`, campaign, later).Scan(&rows, &pending, &deferred))
	require.Equal(t, [3]int{5, 5, 5}, [3]int{rows, pending, deferred})
}

// CancelCampaign ends PENDING and QUEUED deliveries of the campaign CANCELLED, leaves SENDING
// and final ones and other campaigns alone; a cancelled delivery cannot be claimed.
func TestCancelCampaign(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	campaign, other := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	l := lot(campaign, client, 4, nil)
	_, _, err := delivery.InsertLot(ctx, pool, l)
	require.NoError(t, err)
	_, _, err = delivery.InsertLot(ctx, pool, lot(other, client, 1, nil))
	require.NoError(t, err)
	id := func(i int) string { return l.Users[i].Deliveries[0].ID.String() }
	deliverytest.Place(t, pool, []string{id(1)}, deliverytest.Spec{Status: herald.StatusQueued})
	deliverytest.Place(t, pool, []string{id(2)}, deliverytest.Spec{Status: herald.StatusSending, Attempts: 1})
	deliverytest.Place(t, pool, []string{id(3)}, deliverytest.Spec{Status: herald.StatusSent, Attempts: 1})

	n, err := delivery.CancelCampaign(ctx, pool, campaign)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	for i, want := range []herald.Status{herald.StatusCancelled, herald.StatusCancelled, herald.StatusSending, herald.StatusSent} {
		require.Equal(t, want, read(t, pool, id(i)).Status, "delivery %d", i)
	}
	for i := 0; i < 2; i++ {
		_, _, ok, err := delivery.Claim(ctx, pool, id(i), 0)
		require.NoError(t, err)
		require.False(t, ok, "a cancelled delivery was claimed")
	}
	var otherPending int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM delivery d JOIN notification n ON n.id = d.notification_id
WHERE n.campaign_id = $1 AND d.status = 'PENDING'`, other).Scan(&otherPending))
	require.Equal(t, 1, otherPending, "another campaign's delivery was cancelled")
}

// A delivery that was SENDING when its campaign was cancelled does not go back to PENDING,
// whichever way it leaves SENDING (a retry, a batch retry, a deferral, the reaper): it ends
// CANCELLED, so no later provider call starts for the campaign. Another campaign's delivery
// goes back to PENDING as before.
func TestSendingRowOfACancelledCampaignEndsCancelled(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	newCampaign := func(status string) delivery.Lot {
		id := uuid.Must(uuid.NewV7())
		_, err := pool.Exec(ctx, `INSERT INTO campaign (id, client_id, idempotency_key, request_hash, response, name,
    template, category, channels, priority, audience_kind, status)
VALUES ($1, $2, $3, '\x01', '{}', 'c', 'promo', 'marketing', '{SMS}', 'LOW', 'users', $4)`, id, client, id.String(), status)
		require.NoError(t, err)
		return lot(id, client, 4, nil)
	}
	cancelled, live := newCampaign("CANCELLED"), newCampaign("ACTIVE")
	var ids []string
	for _, l := range []delivery.Lot{cancelled, live} {
		_, _, err := delivery.InsertLot(ctx, pool, l)
		require.NoError(t, err)
		for _, u := range l.Users {
			ids = append(ids, u.Deliveries[0].ID.String())
		}
	}
	deliverytest.Place(t, pool, ids, deliverytest.Spec{Status: herald.StatusSending, Attempts: 1})
	c, l := ids[:4], ids[4:]
	retry := delivery.Outcome{Status: herald.StatusPending, AttemptClass: "TRANSIENT", RetryIn: time.Second, Error: "503"}
	started := time.Now()

	for _, id := range []string{c[0], l[0]} {
		ok, err := delivery.Record(ctx, pool, id, 1, started, retry)
		require.NoError(t, err)
		require.True(t, ok)
	}
	for _, id := range []string{c[1], l[1]} {
		ok, err := delivery.Unclaim(ctx, pool, id, 1, time.Second)
		require.NoError(t, err)
		require.True(t, ok)
	}
	done, err := delivery.RecordBatch(ctx, pool, []delivery.Recording{
		{ID: c[2], Attempt: 1, StartedAt: started, Outcome: retry},
		{ID: l[2], Attempt: 1, StartedAt: started, Outcome: retry},
	})
	require.NoError(t, err)
	require.Len(t, done, 2)
	_, err = delivery.ReapSending(ctx, pool, 0, 100)
	require.NoError(t, err)

	for i, id := range c {
		require.Equal(t, herald.StatusCancelled, read(t, pool, id).Status, "cancelled campaign, delivery %d", i)
	}
	for i, id := range l {
		require.Equal(t, herald.StatusPending, read(t, pool, id).Status, "live campaign, delivery %d", i)
	}
}
