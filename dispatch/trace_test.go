package dispatch

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldhq/herald"
)

// spans records the spans of every test of the package that looks at them: the global tracer
// provider takes its delegate once, so one recorder serves them all, and each test picks its
// own spans by delivery id (deliverSpans).
var spans = sync.OnceValue(func() *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	return rec
})

// deliverSpans are the ended dispatch.deliver spans of delivery id, and the ended spans under
// them.
func deliverSpans(id string) (delivers, children []sdktrace.ReadOnlySpan) {
	ended := spans().Ended()
	mine := map[trace.SpanID]bool{}
	for _, sp := range ended {
		if sp.Name() == "dispatch.deliver" && slices.Contains(sp.Attributes(), attribute.String("herald.delivery_id", id)) {
			delivers = append(delivers, sp)
			mine[sp.SpanContext().SpanID()] = true
		}
	}
	for _, sp := range ended {
		if mine[sp.Parent().SpanID()] {
			children = append(children, sp)
		}
	}
	return delivers, children
}

// The worker continues the trace of the record's traceparent header, with spans for the
// lease, the rate-limit decision and the send, each carrying the attempt number.
func TestTraceContinuesFromRecordHeaders(t *testing.T) {
	t.Parallel()
	spans()
	e := newEnv(t)
	e.start(e.config(), nil, smsOnly(&MemorySender{}))
	id := e.insert(fixture{})
	e.publish(id) // traceparent 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, id)

	byName := map[string]sdktrace.ReadOnlySpan{}
	require.Eventually(t, func() bool {
		delivers, children := deliverSpans(id)
		for _, s := range append(delivers, children...) {
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
