package ingest

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/partition"
	"github.com/heraldhq/herald/internal/recipient"
)

// TestGetNotificationOfAnOldDayReadsOnePartition: GET of a notification made 20 days ago
// answers from that day's partitions, and the look-ups by id are pruned to one partition of
// notification (and at most two of delivery) in a custom and in a generic plan.
func TestGetNotificationOfAnOldDayReadsOnePartition(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var now time.Time
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT now()`).Scan(&now))
	day := partition.DayOf(now).Add(-20)
	_, err := e.pool.Exec(ctx, `SELECT herald_create_partitions($1::date)`, day.Time())
	require.NoError(t, err)

	at := day.Time().Add(9 * time.Hour)
	nid, err := deliverytest.IDAt(at)
	require.NoError(t, err)
	did, err := deliverytest.IDAt(at)
	require.NoError(t, err)
	resp, err := json.Marshal(recipient.Accepted{ID: nid.String(), Suppressed: []recipient.Suppressed{},
		Deliveries: []recipient.AcceptedDelivery{{ID: did.String(), Channel: herald.ChannelSMS, Status: herald.StatusPending}}})
	require.NoError(t, err)
	ok, err := delivery.Insert(ctx, e.pool, delivery.Notification{ID: nid, ClientID: e.clientID, IdempotencyKey: "old",
		RequestHash: []byte{1}, UserID: 5, Template: "otp", Category: "security", Priority: herald.PriorityLow,
		Response: resp, Deliveries: []delivery.New{{ID: did, Channel: herald.ChannelSMS}}})
	require.NoError(t, err)
	require.True(t, ok)

	res := e.do(http.MethodGet, "/api/notifications/"+nid.String(), nil, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	n := res.json(t)
	require.Equal(t, nid.String(), n["id"])
	ds := n["deliveries"].([]any)
	require.Len(t, ds, 1)
	require.Equal(t, did.String(), ds[0].(map[string]any)["id"])

	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		scanned := explainedRelations(t, e, mode, selectNotification, nid.String(), e.clientID)
		require.Equal(t, []string{day.Name("notification")}, scanned, mode)
		scanned = explainedRelations(t, e, mode, selectDeliveries, nid.String(), e.clientID, day.Lower(), day.Add(2).Lower())
		// The deliveries of the notification's day and the next, and the notification's own
		// partition for the client check.
		require.Subset(t, []string{day.Name("delivery"), day.Add(1).Name("delivery"), day.Name("notification")}, scanned, mode)
		require.NotEmpty(t, scanned)
	}
}

// explainedRelations runs EXPLAIN ANALYZE of sql under plan_cache_mode mode and returns the
// relations the executed plan scans (partitions pruned at planning or at executor start do
// not appear).
func explainedRelations(t *testing.T, e *env, mode, sql string, args ...any) []string {
	t.Helper()
	return deliverytest.PlannedRelationsAfter(t, e.pool, []string{"SET LOCAL plan_cache_mode = " + mode}, sql, args...)
}
