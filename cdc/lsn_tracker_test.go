package cdc

import (
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/stretchr/testify/require"
)

func TestLSNTrackerConfirmsOnlyTheAcknowledgedPrefix(t *testing.T) {
	tr := newLSNTracker(100)

	a := tr.begin()
	a.pending.Add(2)
	tr.commit(200)
	b := tr.begin()
	b.pending.Add(1)
	tr.commit(300)
	c := tr.begin() // no records for Kafka
	tr.commit(400)
	require.Equal(t, pglogrepl.LSN(100), tr.advance(), "nothing acknowledged yet")

	b.pending.Add(-1) // a later transaction acknowledged first
	require.Equal(t, pglogrepl.LSN(100), tr.advance(), "must not skip over a")
	a.pending.Add(-1)
	require.Equal(t, pglogrepl.LSN(100), tr.advance(), "a still has a record in flight")
	a.pending.Add(-1)
	require.Equal(t, pglogrepl.LSN(400), tr.advance(), "a, b and the empty c are done")
	require.True(t, tr.idle())
	_ = c
}

func TestLSNTrackerKeepaliveOnlyWhenIdle(t *testing.T) {
	tr := newLSNTracker(100)
	tr.keepalive(150)
	require.Equal(t, pglogrepl.LSN(150), tr.confirmed, "idle: the keepalive position is safe")
	tr.keepalive(120)
	require.Equal(t, pglogrepl.LSN(150), tr.confirmed, "never backwards")

	x := tr.begin()
	x.pending.Add(1)
	tr.keepalive(500)
	require.Equal(t, pglogrepl.LSN(150), tr.confirmed, "a transaction is open")
	tr.commit(600)
	tr.keepalive(700)
	require.Equal(t, pglogrepl.LSN(150), tr.confirmed, "a transaction waits for Kafka")
	x.pending.Add(-1)
	tr.keepalive(700)
	require.Equal(t, pglogrepl.LSN(700), tr.confirmed)
	require.Zero(t, tr.waiting())
}

func TestLSNTrackerOpenTransactionWithAckedRecordsIsNotConfirmed(t *testing.T) {
	tr := newLSNTracker(10)
	x := tr.begin()
	x.pending.Add(1)
	x.pending.Add(-1) // all records so far acknowledged, but no COMMIT seen yet
	require.Equal(t, pglogrepl.LSN(10), tr.advance())
	require.False(t, tr.idle())
	tr.commit(50)
	require.Equal(t, pglogrepl.LSN(50), tr.advance())
}
