package dispatch

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestOffsetTrackerCommitsOnlyTheContiguousPrefix(t *testing.T) {
	tr := newOffsetTracker()
	rec := func(p int32, off int64) *kgo.Record {
		return &kgo.Record{Topic: "t", Partition: p, Offset: off, LeaderEpoch: 3}
	}
	a := []*tracked{tr.add(rec(0, 10)), tr.add(rec(0, 11)), tr.add(rec(0, 12))}
	b := tr.add(rec(1, 5))
	for _, x := range append(a, b) {
		require.True(t, tr.start(x))
	}
	tr.done(a[1])
	tr.done(a[2])
	require.Empty(t, tr.uncommitted(nil), "offset 10 unfinished: nothing of partition 0 is committable")
	n, _ := tr.inFlight(map[string][]int32{"t": {0}})
	require.Equal(t, 1, n)

	tr.done(a[0])
	tr.done(b)
	got := tr.uncommitted(nil)
	require.Equal(t, kgo.EpochOffset{Epoch: 3, Offset: 13}, got["t"][0])
	require.Equal(t, kgo.EpochOffset{Epoch: 3, Offset: 6}, got["t"][1])
	require.Len(t, tr.uncommitted(map[string][]int32{"t": {1}})["t"], 1, "filter by partition")

	tr.committed(got)
	require.Empty(t, tr.uncommitted(nil), "nothing new after a commit")

	// A stale record (offset not above the last added) is processed but never tracked.
	stale := tr.add(rec(0, 11))
	require.Nil(t, stale.part)
	require.True(t, tr.start(stale))
	tr.done(stale)
	require.Empty(t, tr.uncommitted(nil))

	// A record of a revoked partition that had not started is not started any more, and
	// the partition is never committed again.
	c := tr.add(rec(1, 6))
	tr.drop(map[string][]int32{"t": {1}})
	require.False(t, tr.start(c))
	tr.done(c)
	require.Empty(t, tr.uncommitted(nil))
}
