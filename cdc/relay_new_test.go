package cdc

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
)

func TestNewRejectsBoundsLargerThanTheProducerBuffer(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), "postgres://127.0.0.1:1/none") // never dialled
	require.NoError(t, err)
	defer pool.Close()
	kc, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.MaxBufferedRecords(1000), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer kc.Close()
	small, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.MaxBufferedRecords(600))
	require.NoError(t, err)
	defer small.Close()

	_, err = New(Config{MaxInFlight: 900, SweepBatch: 200}, pool, kc, nil)
	require.ErrorContains(t, err, "MaxBufferedRecords")
	_, err = New(Config{MaxInFlight: 500, SweepBatch: 200, Producers: map[herald.Priority]*kgo.Client{herald.PriorityLow: small}}, pool, kc, nil)
	require.ErrorContains(t, err, "MaxBufferedRecords 600", "a priority's own producer is checked too")
	r, err := New(Config{MaxInFlight: 500, SweepBatch: 200}, pool, kc, nil)
	require.NoError(t, err)
	require.NoError(t, r.metrics.close())
}

// TestNewRejectsALingeringHIGHProducer: HIGH's records go out at once, whether on the relay's
// client or on a producer of their own; NORMAL's and LOW's may wait.
func TestNewRejectsALingeringHIGHProducer(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), "postgres://127.0.0.1:1/none") // never dialled
	require.NoError(t, err)
	defer pool.Close()
	client := func(linger time.Duration) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ProducerLinger(linger))
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}
	prompt, lingering := client(0), client(5*time.Millisecond)

	_, err = New(Config{}, pool, lingering, nil)
	require.ErrorContains(t, err, "HIGH records must go out at once", "the relay's client produces HIGH's records")
	_, err = New(Config{Producers: map[herald.Priority]*kgo.Client{herald.PriorityHigh: lingering}}, pool, prompt, nil)
	require.ErrorContains(t, err, "lingers 5ms")
	r, err := New(Config{Producers: map[herald.Priority]*kgo.Client{herald.PriorityHigh: prompt}}, pool, lingering, nil)
	require.NoError(t, err, "HIGH's own producer does not linger")
	require.NoError(t, r.metrics.close())
	r, err = New(Config{Producers: map[herald.Priority]*kgo.Client{herald.PriorityNormal: lingering, herald.PriorityLow: lingering}}, pool, prompt, nil)
	require.NoError(t, err)
	require.NoError(t, r.metrics.close())
}

func TestNewProducersMakesAClientForNORMALAndOneForLOW(t *testing.T) {
	producers, err := NewProducers(kgo.SeedBrokers("127.0.0.1:1"))
	require.NoError(t, err)
	defer CloseProducers(producers)
	require.Len(t, producers, 2)
	require.NotContains(t, producers, herald.PriorityHigh, "HIGH's records go out on the relay's client")
	for _, p := range []herald.Priority{herald.PriorityNormal, herald.PriorityLow} {
		require.Equal(t, time.Duration(0), producers[p].OptValue(kgo.ProducerLinger), p)
	}
	require.NotSame(t, producers[herald.PriorityNormal], producers[herald.PriorityLow])
}
