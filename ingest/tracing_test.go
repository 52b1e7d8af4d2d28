package ingest

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func storedTraceparent(t *testing.T, e *env, id any) string {
	t.Helper()
	var tp string
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT traceparent FROM notification WHERE id = $1`, id).Scan(&tp))
	return tp
}

// spanContextOf parses a traceparent header value.
func spanContextOf(tp string) trace.SpanContext {
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	return trace.SpanContextFromContext(ctx)
}

func spansOf(traceID trace.TraceID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.SpanContext().TraceID() == traceID {
			out = append(out, s)
		}
	}
	return out
}

func TestTraceparent(t *testing.T) {
	e := newEnv(t)
	e.template("otp", "security", "SMS")
	e.user(8, map[string]any{"phone": "+15551230008"})

	// An incoming traceparent is continued: same trace, the request span as parent.
	const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	res := e.do(http.MethodPost, "/api/notifications", `{"userId":8,"template":"otp","channels":["SMS"]}`,
		map[string]string{"Idempotency-Key": "t1", "traceparent": incoming})
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	stored := spanContextOf(storedTraceparent(t, e, res.json(t)["id"]))
	require.True(t, stored.IsValid())
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", stored.TraceID().String())
	require.NotEqual(t, "00f067aa0ba902b7", stored.SpanID().String(), "the stored span is the request's own span")

	got := spansOf(stored.TraceID())
	var server, accept sdktrace.ReadOnlySpan
	for _, s := range got {
		switch s.Name() {
		case "POST /api/notifications":
			server = s
		case "ingest.accept":
			accept = s
		}
	}
	require.NotNil(t, server, "request span named after the route")
	require.NotNil(t, accept, "a span covers the transaction")
	require.Equal(t, stored.SpanID(), server.SpanContext().SpanID())
	require.Equal(t, "00f067aa0ba902b7", server.Parent().SpanID().String())
	require.Equal(t, server.SpanContext().SpanID(), accept.Parent().SpanID())

	// Without a traceparent the request span is a new root.
	res = e.post("t2", `{"userId":8,"template":"otp","channels":["SMS"]}`)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	root := spanContextOf(storedTraceparent(t, e, res.json(t)["id"]))
	require.True(t, root.IsValid())
	require.NotEqual(t, stored.TraceID(), root.TraceID())
	for _, s := range spansOf(root.TraceID()) {
		if s.SpanContext().SpanID() == root.SpanID() {
			require.False(t, s.Parent().IsValid(), "a root span")
			return
		}
	}
	t.Fatal("no recorded span for the stored traceparent")
}
