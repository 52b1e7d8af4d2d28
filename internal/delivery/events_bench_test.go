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

// BenchmarkRecordBatchEvents measures what the outbox triggers add to the busiest
// transition: RecordBatch of 100 claimed deliveries SENDING → SENT (one event each), with
// events on and off (the session setting herald.events), alternately in one run. ns/op is
// one batch of 100; the fixture rows are made with the timer stopped.
//
//	go test -run '^$' -bench RecordBatchEvents -benchtime 200x -count 3 ./internal/delivery
func BenchmarkRecordBatchEvents(b *testing.B) {
	pool := stacktest.Postgres(b)
	client := deliverytest.Client(b, pool)
	const batch = 100
	for _, mode := range []string{"on", "off"} {
		b.Run("events="+mode, func(b *testing.B) {
			ctx := context.Background()
			conn, err := pool.Acquire(ctx)
			require.NoError(b, err)
			defer conn.Release()
			_, err = conn.Exec(ctx, `SELECT set_config('herald.events', $1, false)`, mode)
			require.NoError(b, err)
			b.StopTimer()
			for range b.N {
				ids := deliverytest.Insert(b, pool, batch, deliverytest.Spec{ClientID: client, Status: herald.StatusSending, Attempts: 1})
				rs := make([]delivery.Recording, batch)
				for i, id := range ids {
					rs[i] = delivery.Recording{ID: id, Attempt: 1, StartedAt: time.Now(),
						Outcome: delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sms:bench", ProviderID: "m"}}
				}
				b.StartTimer()
				got, err := delivery.RecordBatch(ctx, conn, rs)
				b.StopTimer()
				require.NoError(b, err)
				require.Len(b, got, batch)
			}
		})
	}
}
