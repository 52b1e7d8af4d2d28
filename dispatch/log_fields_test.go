package dispatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/heraldhq/herald"
)

// A log line about a delivery carries the delivery's id and the trace and span it was
// written in: the record's trace (its traceparent header), so that the line opens the
// notification's trace in Jaeger.
func TestDeliveryLogLinesJoinTheTrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	core, logs := observer.New(zapcore.InfoLevel)
	s := LogSender{Channel: herald.ChannelSMS, Log: zap.New(core)}
	e.start(e.config(), nil, smsOnly(s))
	id := e.insert(fixture{})
	e.publish(id) // traceparent 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, id)

	lines := logs.FilterMessage("send").All()
	require.Len(t, lines, 1)
	f := lines[0].ContextMap()
	require.Equal(t, id, f["delivery_id"])
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", f["trace_id"], "the record's trace")
	require.Regexp(t, `^[0-9a-f]{16}$`, f["span_id"])
	require.NotEqual(t, "0000000000000000", f["span_id"])
}
