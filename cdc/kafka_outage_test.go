package cdc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/deploy/local/privatestack"
)

func TestKafkaStoppedForTenSecondsLosesNothing(t *testing.T) {
	t.Parallel()
	// A broker of this test's own, so that stopping it does not touch the shared one.
	k := privatestack.Start(t, privatestack.Kafka)
	h := newHarness(t, []string{k.Addr})
	cfg := h.cfg
	cfg.MaxInFlight = 1000 // reached during the outage: the stream must stop reading, not fail
	h.startRelay(cfg)

	warm := h.insert(rows{n: 10})
	h.waitAll(warm, 60*time.Second)

	in := h.startInserter(10, 0, 10*time.Millisecond)
	k.Down(t)
	before := in.count()
	// The outage itself is the scenario: rows keep arriving for 10 s while Kafka is away.
	outage := time.NewTimer(10 * time.Second)
	<-outage.C
	during := in.snapshot()[before:]
	require.NotEmpty(t, during)
	queued := h.queryString(`SELECT count(*)::text FROM delivery WHERE id::text = ANY($1) AND status = 'QUEUED'`, during)
	require.Equal(t, "0", queued, "rows marked QUEUED while Kafka was down")
	k.Up(t)

	after := in.count()
	eventually(t, 30*time.Second, func() bool { return in.count() >= after+100 }, "inserts stalled")
	ids := in.stop()
	t.Logf("%d rows inserted, %d of them while Kafka was down", len(ids), len(during))
	h.waitAll(ids, 180*time.Second)
	t.Logf("every row reached Kafka once it was back; duplicates: %d", h.records.duplicates(ids))
	require.Empty(t, h.records.malformed())
}
