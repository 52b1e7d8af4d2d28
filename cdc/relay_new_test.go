package cdc

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestNewRejectsBoundsLargerThanTheProducerBuffer(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), "postgres://127.0.0.1:1/none") // never dialled
	require.NoError(t, err)
	defer pool.Close()
	kc, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.MaxBufferedRecords(1000))
	require.NoError(t, err)
	defer kc.Close()

	_, err = New(Config{MaxInFlight: 900, SweepBatch: 200}, pool, kc, nil)
	require.ErrorContains(t, err, "MaxBufferedRecords")
	r, err := New(Config{MaxInFlight: 500, SweepBatch: 200}, pool, kc, nil)
	require.NoError(t, err)
	require.NoError(t, r.metrics.close())
}
