package dispatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/heraldhq/herald"
)

// The worker continues the trace of the record's traceparent header, with spans for the
// lease, the rate-limit decision and the send, each carrying the attempt number. Not
// parallel: it swaps the global tracer provider.
func TestTraceContinuesFromRecordHeaders(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(t.Context())
	})

	e := newEnv(t)
	e.start(e.config(), nil, smsOnly(&MemorySender{}))
	id := e.insert(fixture{})
	e.publish(id) // traceparent 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, id)

	byName := map[string]sdktrace.ReadOnlySpan{}
	require.Eventually(t, func() bool {
		for _, s := range rec.Ended() {
			byName[s.Name()] = s
		}
		return len(byName) >= 4
	}, 10*time.Second, 10*time.Millisecond)
	root := byName["dispatch.deliver"]
	require.NotNil(t, root)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", root.SpanContext().TraceID().String())
	require.Equal(t, "00f067aa0ba902b7", root.Parent().SpanID().String())
	for _, name := range []string{"dispatch.lease", "dispatch.rate_limit", "dispatch.send"} {
		s := byName[name]
		require.NotNil(t, s, name)
		require.Equal(t, root.SpanContext().SpanID(), s.Parent().SpanID(), name)
		require.Contains(t, s.Attributes(), attribute.Int("herald.attempt", 1), name)
	}
	require.Contains(t, root.Attributes(), attribute.Int("herald.attempt", 1))
}
