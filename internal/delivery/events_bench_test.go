package delivery_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
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
			var pid int
			require.NoError(b, conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
			b.StopTimer()
			var cpu time.Duration
			for range b.N {
				ids := deliverytest.Insert(b, pool, batch, deliverytest.Spec{ClientID: client, Status: herald.StatusSending, Attempts: 1})
				rs := make([]delivery.Recording, batch)
				for i, id := range ids {
					rs[i] = delivery.Recording{ID: id, Attempt: 1, StartedAt: time.Now(),
						Outcome: delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sms:bench", ProviderID: "m"}}
				}
				before := backendCPU(b, pid)
				b.StartTimer()
				got, err := delivery.RecordBatch(ctx, conn, rs)
				b.StopTimer()
				cpu += backendCPU(b, pid) - before
				require.NoError(b, err)
				require.Len(b, got, batch)
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*batch), "backend-µs/row")
		})
	}
}

// backendCPU is the user + system CPU time of PostgreSQL backend pid so far
// (/proc/<pid>/stat, fields 14 and 15, in USER_HZ ticks of 10 ms).
func backendCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(b, err)
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	ut, err := strconv.ParseInt(f[11], 10, 64)
	require.NoError(b, err)
	st, err := strconv.ParseInt(f[12], 10, 64)
	require.NoError(b, err)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
