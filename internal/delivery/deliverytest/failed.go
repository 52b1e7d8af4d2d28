package deliverytest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
)

// Failed inserts n deliveries like s that ended FAILED through the real outcome transition:
// each is placed SENDING at attempt s.Attempts (default 1) and its attempt is recorded FAILED
// with o (o.Status is set; o.AttemptClass defaults to TRANSIENT), so that each has the attempt
// row a re-drive reads its error class and code from. It returns the delivery ids.
func Failed(t testing.TB, pool *pgxpool.Pool, n int, s Spec, o delivery.Outcome) []string {
	t.Helper()
	if s.Attempts == 0 {
		s.Attempts = 1
	}
	s.Status = herald.StatusSending
	o.Status = herald.StatusFailed
	if o.AttemptClass == "" {
		o.AttemptClass = "TRANSIENT"
	}
	ids := Insert(t, pool, n, s)
	for from := 0; from < len(ids); from += insertBatch {
		chunk := ids[from:min(from+insertBatch, len(ids))]
		rs := make([]delivery.Recording, len(chunk))
		for i, id := range chunk {
			rs[i] = delivery.Recording{ID: id, Attempt: s.Attempts, StartedAt: time.Now(), Outcome: o}
		}
		done, err := delivery.RecordBatch(context.Background(), pool, rs)
		if err != nil || len(done) != len(chunk) {
			t.Fatalf("record %d deliveries FAILED: %d recorded, %v", len(chunk), len(done), err)
		}
	}
	return ids
}

// Expired inserts n deliveries like s whose expiry passed a second ago, and ends them EXPIRED
// through the sweeper's transition (delivery.ExpireDue). It returns the delivery ids.
func Expired(t testing.TB, pool *pgxpool.Pool, n int, s Spec) []string {
	t.Helper()
	s.ExpiresIn = -time.Second
	ids := Insert(t, pool, n, s)
	for left := n; left > 0; {
		k, err := delivery.ExpireDue(context.Background(), pool, insertBatch)
		if err != nil || k == 0 {
			t.Fatalf("expire %d deliveries: %d left, %v", n, left, err)
		}
		left -= int(k)
	}
	return ids
}
