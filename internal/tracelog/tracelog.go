// Package tracelog joins herald's logs to its traces: a log line about a delivery carries
// the delivery's id and the trace and span it was written in, so that a line found in the
// logs opens its trace in Jaeger, and a span found in Jaeger finds its log lines
// (docs/operations.md, "What herald promises an operator"). The fields hold ids only, never
// personal data.
package tracelog

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Field names, shared with docs/operations.md.
const (
	KeyTraceID    = "trace_id"
	KeySpanID     = "span_id"
	KeyDeliveryID = "delivery_id"
)

// Delivery is one zap field that adds delivery_id and, when ctx holds a valid span context,
// trace_id and span_id (W3C hex) to a log line:
//
//	l.log.Warn("outcome not recorded", tracelog.Delivery(ctx, r.ID), zap.Int("attempt", attempt))
func Delivery(ctx context.Context, deliveryID string) zap.Field {
	return zap.Inline(fields{sc: trace.SpanContextFromContext(ctx), deliveryID: deliveryID})
}

// Traceparent is Delivery for code that holds a delivery's stored W3C traceparent rather than
// a context (the relay reading a row): the line carries the notification's trace id and the
// span id of the traceparent's span.
func Traceparent(traceparent, deliveryID string) zap.Field {
	ctx := context.Background()
	if traceparent != "" {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
	}
	return Delivery(ctx, deliveryID)
}

type fields struct {
	sc         trace.SpanContext
	deliveryID string
}

func (f fields) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	if f.sc.IsValid() {
		enc.AddString(KeyTraceID, f.sc.TraceID().String())
		enc.AddString(KeySpanID, f.sc.SpanID().String())
	}
	if f.deliveryID != "" {
		enc.AddString(KeyDeliveryID, f.deliveryID)
	}
	return nil
}
