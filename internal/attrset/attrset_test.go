package attrset

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// TestOfKeepsOneSetPerKey: the same key gives the option built once, whose set holds the
// key's labels; another key, its own.
func TestOfKeepsOneSetPerKey(t *testing.T) {
	built := 0
	c := New(func(k [2]string) []attribute.KeyValue {
		built++
		return []attribute.KeyValue{attribute.String("channel", k[0]), attribute.String("outcome", k[1])}
	})
	a := c.Of([2]string{"SMS", "ok"})
	require.Equal(t, a, c.Of([2]string{"SMS", "ok"}))
	b := c.Of([2]string{"EMAIL", "ok"})
	require.Equal(t, 2, built)
	set := metric.NewAddConfig([]metric.AddOption{a}).Attributes()
	v, ok := set.Value("channel")
	require.True(t, ok)
	require.Equal(t, "SMS", v.AsString())
	other := metric.NewAddConfig([]metric.AddOption{b}).Attributes()
	require.False(t, set.Equals(&other))
}

func BenchmarkOf(b *testing.B) {
	c := New(func(k [3]string) []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("priority", k[0]), attribute.String("channel", k[1]), attribute.String("provider", k[2])}
	})
	k := [3]string{"NORMAL", "SMS", "sms:twilio"}
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			_ = c.Of(k)
		}
	})
	b.Run("with-attributes", func(b *testing.B) {
		for b.Loop() {
			_ = metric.WithAttributes(attribute.String("priority", k[0]), attribute.String("channel", k[1]), attribute.String("provider", k[2]))
		}
	})
}
