package cdc

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// BenchmarkRelayHighDuringLowFlood: LOW rows in 1,000-row transactions at 5,000 rows/s (a
// campaign expanding at the expander's default pace) while HIGH rows commit one per
// transaction at 50/s, for 10 s: HIGH commit → Kafka ack, split at the moment the relay
// received the HIGH row's transaction. commit → received is what the WAL's commit order costs
// HIGH (it waits for the lots committed before it); received → ack is the produce.
//
//	go test ./cdc/ -run '^$' -bench BenchmarkRelayHighDuringLowFlood -benchtime 1x
func BenchmarkRelayHighDuringLowFlood(b *testing.B) {
	const lowRate, lot, highRate, seconds = 5000, 1000, 50, 10
	h := newHarness(b, nil)
	acks := h.startRelayMeasuringAcks(func(row deliveryRow) bool { return row.Priority == herald.PriorityHigh })
	h.waitAll(h.insert(rows{n: 10, priority: herald.PriorityHigh}), time.Minute)
	h.waitAll(h.insert(rows{n: 10, priority: herald.PriorityLow}), time.Minute)
	acks.reset()

	b.ResetTimer()
	var ids []string
	var idsMu sync.Mutex
	insert := func(r rows) {
		got, err := h.tryInsert(context.Background(), r)
		require.NoError(b, err)
		idsMu.Lock()
		ids = append(ids, got...)
		idsMu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Go(func() { // LOW lots
		t := time.NewTicker(time.Second * lot / lowRate)
		defer t.Stop()
		for range lowRate * seconds / lot {
			<-t.C
			insert(rows{n: lot, priority: herald.PriorityLow})
		}
	})
	wg.Go(func() { // HIGH, one per transaction
		t := time.NewTicker(time.Second / highRate)
		defer t.Stop()
		for range highRate * seconds {
			<-t.C
			insert(rows{n: 1, priority: herald.PriorityHigh})
		}
	})
	wg.Wait()
	h.waitAll(ids, 2*time.Minute)
	b.StopTimer()

	acks.mu.Lock()
	defer acks.mu.Unlock()
	hist, wal, relay := acks.total, acks.wal, acks.produce
	b.ReportMetric(ms(hist, 50), "high-p50-ms")
	b.ReportMetric(ms(hist, 99), "high-p99-ms")
	b.ReportMetric(ms(hist, 100), "high-max-ms")
	b.Logf("HIGH commit → Kafka ack over %d rows at %d/s beside LOW lots of %d at %d rows/s: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms; "+
		"commit → received p50 %.2f ms, p99 %.2f ms; received → ack p50 %.2f ms, p99 %.2f ms",
		hist.TotalCount(), highRate, lot, lowRate, ms(hist, 50), ms(hist, 90), ms(hist, 99), ms(hist, 100),
		ms(wal, 50), ms(wal, 99), ms(relay, 50), ms(relay, 99))
}
