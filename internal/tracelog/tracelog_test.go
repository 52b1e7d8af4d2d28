package tracelog_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/heraldhq/herald/internal/tracelog"
)

func logged(t *testing.T, f zap.Field) map[string]any {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	zap.New(core).Info("outcome not recorded", f, zap.Int("attempt", 2))
	require.Equal(t, 1, logs.Len())
	return logs.All()[0].ContextMap()
}

func TestDeliveryFieldsCarryTheSpan(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "dispatch.deliver")
	defer span.End()
	sc := span.SpanContext()

	got := logged(t, tracelog.Delivery(ctx, "0193a1b2-0000-7000-8000-000000000001"))
	require.Equal(t, map[string]any{
		"trace_id":    sc.TraceID().String(),
		"span_id":     sc.SpanID().String(),
		"delivery_id": "0193a1b2-0000-7000-8000-000000000001",
		"attempt":     int64(2),
	}, got)
}

func TestDeliveryFieldsWithoutASpan(t *testing.T) {
	got := logged(t, tracelog.Delivery(context.Background(), "d1"))
	require.Equal(t, map[string]any{"delivery_id": "d1", "attempt": int64(2)}, got)
}

func TestTraceparentFields(t *testing.T) {
	got := logged(t, tracelog.Traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "d2"))
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", got["trace_id"])
	require.Equal(t, "00f067aa0ba902b7", got["span_id"])
	require.Equal(t, "d2", got["delivery_id"])

	got = logged(t, tracelog.Traceparent("garbage", "d3"))
	require.Equal(t, map[string]any{"delivery_id": "d3", "attempt": int64(2)}, got)
}
