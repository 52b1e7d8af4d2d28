package dispatch

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/partition"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestBatchReadOfAnOldDayHoldsOnlyItsPartitions: the batch read of two deliveries made 20
// days ago, one of them just after midnight for a notification of the day before, returns
// both with their notifications, and its plan holds only the deliveries' and attempts' day
// partitions and the notifications' partitions of that day and the day before, not every
// day's (the generic plan the batch read ran on before held every notification partition).
func TestBatchReadOfAnOldDayHoldsOnlyItsPartitions(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	var now time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT now()`).Scan(&now))
	day := partition.DayOf(now).Add(-20)
	for _, d := range []partition.Day{day.Add(-1), day} {
		_, err := pool.Exec(ctx, `SELECT herald_create_partitions($1::date)`, d.Time())
		require.NoError(t, err)
	}
	notifications := map[string]string{}
	var ids []string
	for _, at := range [][2]time.Time{
		{day.Time().Add(9 * time.Hour), day.Time().Add(9 * time.Hour)},
		{day.Time().Add(-time.Millisecond), day.Time()},
	} {
		nid, err := deliverytest.IDAt(at[0])
		require.NoError(t, err)
		did, err := deliverytest.IDAt(at[1])
		require.NoError(t, err)
		ok, err := delivery.Insert(ctx, pool, delivery.Notification{ID: nid, ClientID: client,
			IdempotencyKey: uuid.NewString(), RequestHash: []byte{1}, UserID: 5, Template: "otp", Category: "security",
			Priority: herald.PriorityNormal, Response: []byte(`{}`),
			Deliveries: []delivery.New{{ID: did, Channel: herald.ChannelSMS}}})
		require.NoError(t, err)
		require.True(t, ok)
		ids = append(ids, did.String())
		notifications[did.String()] = nid.String()
	}

	rows, err := loadMany(ctx, pool, ids)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for _, id := range ids {
		require.Equal(t, notifications[id], rows[id].NotificationID)
		require.Equal(t, client, rows[id].ClientID)
	}

	scanned := deliverytest.PlannedRelations(t, pool, loadDaySQL, loadDayArgs(day, ids)...)
	require.Contains(t, scanned, day.Name("delivery"))
	allowed := []string{day.Name("delivery"), day.Name("delivery_attempt"), day.Name("notification"),
		day.Add(-1).Name("notification")}
	daily := regexp.MustCompile(`^(notification|delivery|delivery_attempt)_[0-9]{8}$`)
	for _, r := range scanned {
		if daily.MatchString(r) {
			require.Contains(t, allowed, r, "a partition of another day in the plan: %v", scanned)
		}
	}
}
