package partition

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const instrumentation = "github.com/heraldhq/herald/internal/partition"

// metrics: herald.partition.created and .dropped count days; herald.partition.kept is the
// number of days past the retention kept by the last pass, by reason.
type metrics struct {
	created, dropped metric.Int64Counter
	kept             metric.Int64Gauge
}

func newMetrics() (*metrics, error) {
	meter := otel.Meter(instrumentation)
	m := &metrics{}
	var err error
	if m.created, err = meter.Int64Counter("herald.partition.created",
		metric.WithUnit("{day}"), metric.WithDescription("Days whose partitions were created.")); err != nil {
		return nil, fmt.Errorf("partition metrics: %w", err)
	}
	if m.dropped, err = meter.Int64Counter("herald.partition.dropped",
		metric.WithUnit("{day}"), metric.WithDescription("Days whose partitions were dropped after the retention.")); err != nil {
		return nil, fmt.Errorf("partition metrics: %w", err)
	}
	if m.kept, err = meter.Int64Gauge("herald.partition.kept",
		metric.WithUnit("{day}"), metric.WithDescription("Days past the retention whose partitions the last pass kept, by reason.")); err != nil {
		return nil, fmt.Errorf("partition metrics: %w", err)
	}
	return m, nil
}

func (m *metrics) record(r Result) {
	if !r.Ran {
		return
	}
	ctx := context.Background()
	m.created.Add(ctx, int64(len(r.Created)))
	m.dropped.Add(ctx, int64(len(r.Dropped)))
	by := map[string]int64{ReasonNotFinal: 0, ReasonReferenced: 0, ReasonLocked: 0}
	for _, k := range r.Kept {
		by[k.Reason]++
	}
	for reason, n := range by {
		m.kept.Record(ctx, n, metric.WithAttributes(attribute.String("reason", reason)))
	}
}

// isLockTimeout reports a lock_timeout cancellation (SQLSTATE 55P03, lock_not_available) or
// a deadlock (40P01, deadlock_detected): either way the job's transaction did not get its
// locks and was rolled back whole. The drop detaches four tables' partitions, taking each
// parent's lock in turn; a transaction of the running system may hold one of them and wait
// for another (an outcome holds delivery and its status trigger reads notification, an
// accept holds notification and inserts into delivery), and PostgreSQL then ends one of the
// two. No order of the drop's locks avoids that, since the system's own transactions take
// them in both orders.
func isLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01")
}
