package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestReceiptTransitionsWriteTheirEvents: the receipt transitions (SENT → DELIVERED |
// UNDELIVERED) write their events through the status trigger like every other transition;
// a duplicate receipt or a late one writes none.
func TestReceiptTransitionsWriteTheirEvents(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	for _, c := range []struct {
		result herald.Status
		code   string
		want   herald.EventType
	}{{herald.StatusDelivered, "", herald.EventDelivered}, {herald.StatusUndelivered, "30003", herald.EventUndelivered}} {
		id := deliverytest.One(t, pool, deliverytest.Spec{Status: herald.StatusSent, Attempts: 1})
		before := lastSequence(t, pool, id)
		r := delivery.Receipt{DeliveryID: id, Provider: "sms:twilio", Status: "x", Code: c.code, Result: c.result, At: time.Now()}
		o, err := delivery.ApplyReceipt(ctx, pool, r, time.Minute)
		require.NoError(t, err)
		require.Equal(t, delivery.ReceiptApplied, o)
		_, err = delivery.ApplyReceipt(ctx, pool, r, time.Minute) // a duplicate
		require.NoError(t, err)
		got := events(t, pool, id, before)
		require.Len(t, got, 1)
		require.Equal(t, c.want, got[0].Type)
		require.Equal(t, c.result, got[0].Data.Status)
		if c.result == herald.StatusUndelivered {
			require.Equal(t, &herald.EventError{Code: "30003"}, got[0].Data.Error)
		}
	}
}
