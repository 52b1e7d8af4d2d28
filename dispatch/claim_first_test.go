package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/partition"
)

// TestFirstAttemptIsReadAndClaimedOnTheGenericPlan: first attempts of one day, read and
// claimed one after another on one connection, each come back as read before the claim
// (QUEUED or PENDING, no attempt) with attempt 1 claimed, through the day's prepared statement,
// on its generic plan after PostgreSQL's first five, on a day's partition of 20,000 analyzed
// rows. Read and claimed again, a row claims nothing and comes back as it now is. The
// statement of an old day holds only that day's partitions.
func TestFirstAttemptIsReadAndClaimedOnTheGenericPlan(t *testing.T) {
	t.Parallel()
	shared, pool := oneConnPool(t)
	ctx := context.Background()
	const claims = 10
	ids := deliverytest.Insert(t, pool, claims, deliverytest.Spec{})
	deliverytest.Insert(t, pool, 20000, deliverytest.Spec{})
	analyzeReads(t, pool)
	for i, id := range ids {
		r, cl, ok, err := claimRead(ctx, pool, id, 0, i%2 == 1)
		require.NoError(t, err)
		require.True(t, ok, "a due first attempt is claimed")
		require.Equal(t, 1, cl.Attempt)
		require.WithinDuration(t, r.DBNow, cl.StartedAt, time.Second)
		require.Equal(t, id, r.ID)
		require.Zero(t, r.Attempts, "the row as read before the claim")
		require.Contains(t, []herald.Status{herald.StatusPending, herald.StatusQueued}, r.Status)
		require.True(t, r.Due)
	}
	day := partition.DayOfID(uuid.MustParse(ids[0]))
	for _, prompt := range []bool{false, true} {
		generic, custom := deliverytest.PreparedPlans(t, pool, `statement = $1`,
			dayStatement(loadKey{day: day, claim: true, prompt: prompt}, claimReadSQLs[prompt]))
		require.Equal(t, claims/2, generic+custom, "every claim ran the day's prepared statement (prompt %v)", prompt)
		require.Equal(t, claims/2-5, generic, "PostgreSQL plans a prepared statement's first 5 runs for their values, "+
			"and the claims after them on the generic plan (prompt %v)", prompt)
	}

	r, _, ok, err := claimRead(ctx, pool, ids[0], 0, false)
	require.NoError(t, err)
	require.False(t, ok, "a claimed row is not claimed again")
	require.Equal(t, herald.StatusSending, r.Status)
	require.Equal(t, 1, r.Attempts)
	r, _, ok, err = claimRead(ctx, pool, uuid.NewString(), 0, false)
	require.NoError(t, err)
	require.False(t, ok)
	require.Nil(t, r, "no row: nothing read")

	client := deliverytest.Client(t, shared)
	old := partition.DayOf(deliverytest.OldDay(t, shared))
	_, did := deliverytest.InsertAt(t, shared, client, old.Time().Add(-time.Millisecond), old.Time())
	sql := dayStatement(loadKey{day: old, claim: true}, claimReadSQLs[false])
	deliverytest.RequireOnlyPartitionsOf(t, deliverytest.PlannedRelations(t, shared, sql, did, 0),
		old.Name("delivery"), old.Name("delivery_attempt"), old.Name("notification"), old.Add(-1).Name("notification"))
}

// TestFirstAttemptPathReadsOnceAfterTheLease: a record of a first attempt is leased, then read
// and claimed by one statement: its deliver span has the claim starting before the one read,
// and the lease's span before both. A record of a delivery sent already reads it, claims
// nothing and leaves its lease free.
func TestFirstAttemptPathReadsOnceAfterTheLease(t *testing.T) {
	t.Parallel()
	spans()
	e := newEnv(t)
	s := &MemorySender{}
	d := e.start(e.config(), nil, smsOnly(s))
	id := e.insert(fixture{Priority: herald.PriorityHigh})
	recs := e.records(id)
	require.NoError(t, e.producer.ProduceSync(context.Background(), recs...).FirstErr())
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, id)
	// A second record of the first attempt, sent already: the relay's, after the accepting
	// process's own.
	require.NoError(t, e.producer.ProduceSync(context.Background(), recs...).FirstErr())
	var delivers, children []sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		delivers, children = deliverSpans(id)
		return len(delivers) == 2
	}, 10*time.Second, 10*time.Millisecond)
	for _, sp := range delivers {
		var names []string
		for _, ev := range sp.Events() {
			names = append(names, ev.Name)
		}
		require.Equal(t, []string{eventClaimStarted, eventRowsRead}, names, "one statement after the lease")
		leased := false
		for _, c := range children {
			if c.Name() == "dispatch.lease" && c.Parent().SpanID() == sp.SpanContext().SpanID() {
				leased = true
				require.False(t, c.EndTime().After(sp.Events()[0].Time), "the lease is taken before the statement")
			}
		}
		require.True(t, leased, "each record takes the lease")
	}
	require.Equal(t, 1, s.CallCount(id), "one provider call")
	require.Zero(t, e.rdb.Exists(context.Background(), d.leases.key(id, 1)).Val(), "the second record's lease is given back")
}
