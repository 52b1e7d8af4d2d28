package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	day := partition.DayOf(deliverytest.OldDay(t, pool))
	notifications := map[string]string{}
	var ids []string
	for _, at := range [][2]time.Time{
		{day.Time().Add(9 * time.Hour), day.Time().Add(9 * time.Hour)},
		{day.Time().Add(-time.Millisecond), day.Time()},
	} {
		nid, did := deliverytest.InsertAt(t, pool, client, at[0], at[1])
		ids = append(ids, did)
		notifications[did] = nid
	}

	rows, err := loadMany(ctx, pool, ids)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for _, id := range ids {
		require.Equal(t, notifications[id], rows[id].NotificationID)
		require.Equal(t, client, rows[id].ClientID)
	}

	scanned := deliverytest.PlannedRelations(t, pool, loadDaySQL, loadDayArgs(day, ids)...)
	deliverytest.RequireOnlyPartitionsOf(t, scanned, day.Name("delivery"), day.Name("delivery_attempt"),
		day.Name("notification"), day.Add(-1).Name("notification"))
}
