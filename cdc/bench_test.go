package cdc

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// The relay benchmarks run a fixed scenario on the real stack and report figures; b.N is not
// used. Run them with:
//
//	go test ./cdc/ -run '^$' -bench BenchmarkRelay -benchtime 1x
//
// Latency is measured exactly as the herald.cdc.commit_to_publish metric: from the commit
// timestamp PostgreSQL writes into the WAL to the moment Kafka acknowledges the record.

// BenchmarkRelayCommitToAckLatency inserts one row per transaction at 1,000 rows/s for 10 s.
func BenchmarkRelayCommitToAckLatency(b *testing.B) {
	const rate, seconds, workers = 1000, 10, 10
	h := newHarness(b, nil)
	acks := h.startRelayMeasuringAcks(nil)
	// Warm up connections, metadata and producer IDs.
	h.waitAll(h.insert(rows{n: 10, priority: herald.PriorityHigh}), time.Minute)
	acks.reset()

	b.ResetTimer()
	var ids []string
	var idsMu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			t := time.NewTicker(time.Second * workers / rate)
			defer t.Stop()
			for i := 0; i < rate*seconds/workers; i++ {
				<-t.C
				got, err := h.tryInsert(context.Background(), rows{n: 1, priority: herald.Priorities[i%3]})
				require.NoError(b, err)
				idsMu.Lock()
				ids = append(ids, got...)
				idsMu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	h.waitAll(ids, time.Minute)
	b.StopTimer()

	acks.mu.Lock()
	defer acks.mu.Unlock()
	hist := acks.total
	b.ReportMetric(ms(hist, 50), "p50-ms")
	b.ReportMetric(ms(hist, 99), "p99-ms")
	b.ReportMetric(ms(hist, 100), "max-ms")
	b.ReportMetric(float64(len(ids))/elapsed.Seconds(), "rows/s")
	b.Logf("commit → Kafka ack, %d rows at %.0f rows/s: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms",
		hist.TotalCount(), float64(len(ids))/elapsed.Seconds(), ms(hist, 50), ms(hist, 90), ms(hist, 99), ms(hist, 100))
	b.Logf("of which commit → relay received the transaction: p50 %.2f ms, p99 %.2f ms; received → Kafka ack: p50 %.2f ms, p99 %.2f ms",
		ms(acks.wal, 50), ms(acks.wal, 99), ms(acks.produce, 50), ms(acks.produce, 99))
}

// BenchmarkRelayThroughput measures how fast the relay drains a backlog of 200,000 due rows
// (1,000 per transaction) already in the WAL: decoding, producing to Kafka and waiting for
// the acknowledgements, with the in-flight bound at its default.
func BenchmarkRelayThroughput(b *testing.B) {
	const total, perTxn = 200_000, 1000
	h := newHarness(b, nil)
	// A first term creates the slot; the backlog is written while no relay runs.
	stop := h.startRelay(h.cfg)
	stop()
	for i := 0; i < total/perTxn; i++ {
		h.insert(rows{n: perTxn, priority: herald.Priorities[i%3]})
	}

	var acked atomic.Int64
	var first, last atomic.Int64 // unix nanos of the first and the last acknowledgement
	done := make(chan struct{})
	b.ResetTimer()
	start := time.Now()
	h.startRelay(h.cfg, func(r *Relay) {
		r.pub.ackHook = func(_ deliveryRow, o origin, ackedAt time.Time) {
			if o.source != sourceStream {
				return
			}
			first.CompareAndSwap(0, ackedAt.UnixNano())
			last.Store(ackedAt.UnixNano())
			if acked.Add(1) == total {
				close(done)
			}
		}
	})
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d rows acknowledged", acked.Load(), total)
	}
	b.StopTimer()
	span := time.Duration(last.Load() - first.Load())
	b.ReportMetric(float64(total)/span.Seconds(), "rows/s")
	b.Logf("drained %d rows in %v (first to last ack; %v from relay start): %.0f rows/s",
		total, span.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), float64(total)/span.Seconds())
}
