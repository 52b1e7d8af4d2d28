package dispatch

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The path's hooks, as river's work hooks and watermill's handler middleware: a record's
// trace and its lane lag begin when the record enters the path and end when it leaves, and
// the stages stay free of both. The provider metrics and the send span wrap the sender
// instead (measure, traceSends).

// begin starts w's dispatch.deliver span, continuing the trace of its record's traceparent
// header, and measures the lane lag (record timestamp → processing start).
func (l *lane) begin(ctx context.Context, w *work) {
	ctx = propagation.TraceContext{}.Extract(ctx, headerCarrier(w.it.rec.Headers))
	w.ctx, _ = tracer.Start(ctx, "dispatch.deliver", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("herald.delivery_id", w.msg.DeliveryID),
			attribute.String("herald.priority", string(l.prio)),
			attribute.String("messaging.destination.name", w.it.rec.Topic)))
	l.d.metrics.lag.Record(w.ctx, time.Since(w.it.rec.Timestamp).Seconds(), l.attrs)
}

// The events of a record's dispatch.deliver span that split its way from the poll to the
// claim's commit: each pass's read of the rows, and the claim's statement starting (the
// Redis lease is taken between them). A trace with more than one read took another pass (a
// stale read waited out, or a claim lost).
const (
	eventRowsRead     = "rows read"
	eventClaimStarted = "claim started"
)

// recordError notes a failed pass on w's span; the record may still be settled by a later
// pass.
func recordError(w *work) {
	trace.SpanFromContext(w.ctx).RecordError(w.err)
}

// end ends w's span when it leaves the path; a record let go after a failed pass is marked
// failed.
func (l *lane) end(w *work) {
	span := trace.SpanFromContext(w.ctx)
	if w.err != nil {
		span.SetStatus(codes.Error, "dispatch failed")
	}
	span.End()
}

// signal is something on the path a test waits for or counts. Dispatcher.signals receives
// them; production installs nothing.
type signal int

const (
	signalProcessed      signal = iota // a record left the path
	signalRateRefused                  // a delivery was refused by the limiter (once per wait)
	signalDeferred                     // a delivery was deferred by the limiter
	signalStaleAdmission               // an admission too old to use by the time of the call
	signalStaleRead                    // a read older than the row version its record was made from
	numSignals
)

// signal sends s to the receiver a test installed, if any.
func (l *lane) signal(s signal) {
	if f := l.d.signals; f != nil {
		f(l.prio, s)
	}
}
