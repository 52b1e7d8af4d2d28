package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// state is what a test reads back of a delivery row.
type state struct {
	Status   herald.Status
	Attempts int
	Logged   int // delivery_attempt rows
}

func read(t *testing.T, pool *pgxpool.Pool, id string) state {
	t.Helper()
	var s state
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT status, attempts,
		(SELECT count(*) FROM delivery_attempt WHERE delivery_id = $1) FROM delivery WHERE id = $1`, id).
		Scan(&s.Status, &s.Attempts, &s.Logged))
	return s
}

func version(t *testing.T, pool *pgxpool.Pool, id string) delivery.Version {
	t.Helper()
	return deliverytest.Version(t, pool, id)
}

// TestTransitionsRefuseStaleCallers gives every transition a caller that read the row
// before it moved on (wrong status, wrong attempt, wrong version, not yet due or expired):
// the compare-and-set matches nothing, the row and its attempt log stay as they were. The
// same call with what the row really is goes through, so the refusal is the condition's
// doing and not a broken statement.
func TestTransitionsRefuseStaleCallers(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	row := func(s deliverytest.Spec) string {
		s.ClientID = client
		return deliverytest.One(t, pool, s)
	}
	pending := deliverytest.Spec{}
	queued := deliverytest.Spec{Status: herald.StatusQueued}
	sending := deliverytest.Spec{Status: herald.StatusSending, Attempts: 1}
	sent := deliverytest.Spec{Status: herald.StatusSent, Attempts: 1}
	later := deliverytest.Spec{DueIn: time.Hour}
	expired := deliverytest.Spec{ExpiresIn: -time.Second}
	recorded := func(st herald.Status) func(id string, attempt int) (bool, error) {
		return func(id string, attempt int) (bool, error) {
			return delivery.Record(ctx, pool, id, attempt, time.Now(), delivery.Outcome{Status: st, AttemptClass: "TRANSIENT", RetryIn: time.Minute})
		}
	}

	cases := []struct {
		name  string
		spec  deliverytest.Spec
		stale func(id string) (bool, error) // must change nothing
		fresh func(id string) (bool, error) // must go through
		want  herald.Status
	}{
		{"claim wrong attempt", pending,
			func(id string) (bool, error) { _, _, ok, err := delivery.Claim(ctx, pool, id, 1); return ok, err },
			func(id string) (bool, error) { _, _, ok, err := delivery.Claim(ctx, pool, id, 0); return ok, err },
			herald.StatusSending},
		{"claim final row", sent,
			func(id string) (bool, error) { _, _, ok, err := delivery.Claim(ctx, pool, id, 1); return ok, err },
			nil, herald.StatusSent},
		{"claim not due", later,
			func(id string) (bool, error) { _, _, ok, err := delivery.Claim(ctx, pool, id, 0); return ok, err },
			nil, herald.StatusPending},
		{"claim expired", expired,
			func(id string) (bool, error) { _, _, ok, err := delivery.Claim(ctx, pool, id, 0); return ok, err },
			func(id string) (bool, error) { return delivery.Expire(ctx, pool, id, 0) },
			herald.StatusExpired},
		{"unclaim wrong attempt", sending,
			func(id string) (bool, error) { return delivery.Unclaim(ctx, pool, id, 2, time.Second) },
			func(id string) (bool, error) { return delivery.Unclaim(ctx, pool, id, 1, time.Second) },
			herald.StatusPending},
		{"unclaim not claimed", queued,
			func(id string) (bool, error) { return delivery.Unclaim(ctx, pool, id, 0, time.Second) },
			nil, herald.StatusQueued},
		{"give up wrong attempt", queued,
			func(id string) (bool, error) { return delivery.GiveUp(ctx, pool, id, 1, "test") },
			func(id string) (bool, error) { return delivery.GiveUp(ctx, pool, id, 0, "test") },
			herald.StatusFailed},
		{"give up in flight", sending,
			func(id string) (bool, error) { return delivery.GiveUp(ctx, pool, id, 1, "test") },
			nil, herald.StatusSending},
		{"expire not expired", pending,
			func(id string) (bool, error) { return delivery.Expire(ctx, pool, id, 0) },
			nil, herald.StatusPending},
		{"expire wrong attempt", expired,
			func(id string) (bool, error) { return delivery.Expire(ctx, pool, id, 3) },
			func(id string) (bool, error) { return delivery.Expire(ctx, pool, id, 0) },
			herald.StatusExpired},
		{"record sent wrong attempt", sending,
			func(id string) (bool, error) { return recorded(herald.StatusSent)(id, 2) },
			func(id string) (bool, error) { return recorded(herald.StatusSent)(id, 1) },
			herald.StatusSent},
		{"record retry wrong attempt", sending,
			func(id string) (bool, error) { return recorded(herald.StatusPending)(id, 0) },
			func(id string) (bool, error) { return recorded(herald.StatusPending)(id, 1) },
			herald.StatusPending},
		{"record failed not in flight", queued,
			func(id string) (bool, error) { return recorded(herald.StatusFailed)(id, 0) },
			nil, herald.StatusQueued},
		{"record expired on a final row", sent,
			func(id string) (bool, error) { return recorded(herald.StatusExpired)(id, 1) },
			nil, herald.StatusSent},
		{"retry now wrong attempt", sending,
			func(id string) (bool, error) { return retriedNow(ctx, pool, id, 2) },
			func(id string) (bool, error) { return retriedNow(ctx, pool, id, 1) },
			herald.StatusSending},
		{"retry now not in flight", queued,
			func(id string) (bool, error) { return retriedNow(ctx, pool, id, 0) },
			nil, herald.StatusQueued},
		{"mark queued older version", pending,
			func(id string) (bool, error) {
				v := version(t, pool, id)
				v.UpdatedAt = v.UpdatedAt.Add(-time.Millisecond)
				changed, err := delivery.MarkQueued(ctx, pool, []delivery.Version{v})
				return len(changed) == 1, err
			},
			func(id string) (bool, error) {
				changed, err := delivery.MarkQueued(ctx, pool, []delivery.Version{version(t, pool, id)})
				return len(changed) == 1, err
			},
			herald.StatusQueued},
		{"mark queued a claimed row", sending,
			func(id string) (bool, error) {
				changed, err := delivery.MarkQueued(ctx, pool, []delivery.Version{version(t, pool, id)})
				return len(changed) == 1, err
			},
			nil, herald.StatusSending},
		{"cancel in flight", sending,
			func(id string) (bool, error) { return cancelOf(t, pool, id) },
			nil, herald.StatusSending},
		{"cancel final", sent,
			func(id string) (bool, error) { return cancelOf(t, pool, id) },
			nil, herald.StatusSent},
		{"cancel queued", queued,
			nil,
			func(id string) (bool, error) { return cancelOf(t, pool, id) },
			herald.StatusCancelled},
		{"cancel pending", later,
			nil,
			func(id string) (bool, error) { return cancelOf(t, pool, id) },
			herald.StatusCancelled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := row(c.spec)
			before := read(t, pool, id)
			if c.stale != nil {
				ok, err := c.stale(id)
				require.NoError(t, err)
				require.False(t, ok, "a stale caller changed the row")
				require.Equal(t, before, read(t, pool, id), "a refused transition wrote something")
			}
			if c.fresh != nil {
				ok, err := c.fresh(id)
				require.NoError(t, err)
				require.True(t, ok, "the caller that read the row as it is was refused")
			}
			require.Equal(t, c.want, read(t, pool, id).Status)
		})
	}
}

// retriedNow logs attempt of id TRANSIENT on one account and claims the next (RetryNow).
func retriedNow(ctx context.Context, pool *pgxpool.Pool, id string, attempt int) (bool, error) {
	_, ok, err := delivery.RetryNow(ctx, pool, delivery.Recording{ID: id, Attempt: attempt, StartedAt: time.Now(),
		Outcome: delivery.Outcome{AttemptClass: herald.AttemptTransient, Provider: "sms:twilio", Error: "503"}})
	return ok, err
}

func cancelOf(t *testing.T, pool *pgxpool.Pool, id string) (bool, error) {
	t.Helper()
	var nid string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT notification_id::text FROM delivery WHERE id = $1`, id).Scan(&nid))
	n, err := delivery.Cancel(context.Background(), pool, []string{nid})
	return n == 1, err
}

// TestReapersRefuseRowsInsideTheirLease: the reapers take only rows past their lease (or,
// for QUEUED, marked before the watermark), and only in the state they reap.
func TestReapersRefuseRowsInsideTheirLease(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	queued := deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, Status: herald.StatusQueued, Priority: herald.PriorityHigh})
	sending := deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, Status: herald.StatusSending, Attempts: 1})
	pending := deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, Priority: herald.PriorityHigh})

	n, err := delivery.ReapQueued(ctx, pool, herald.PriorityHigh, time.Hour, 100, nil)
	require.NoError(t, err)
	require.Zero(t, n, "QUEUED row inside its lease reaped")
	n, err = delivery.ReapQueued(ctx, pool, herald.PriorityNormal, 0, 100, nil)
	require.NoError(t, err)
	require.Zero(t, n, "another priority's row reaped")
	old := time.Now().Add(-time.Hour)
	n, err = delivery.ReapQueued(ctx, pool, herald.PriorityHigh, time.Hour, 100, &old)
	require.NoError(t, err)
	require.Zero(t, n, "QUEUED row marked after the watermark reaped")
	byPrio, err := delivery.ReapSending(ctx, pool, time.Hour, 100)
	require.NoError(t, err)
	require.Empty(t, byPrio, "SENDING row inside its lease reaped")
	require.Equal(t, herald.StatusPending, read(t, pool, pending).Status)

	n, err = delivery.ReapQueued(ctx, pool, herald.PriorityHigh, 0, 100, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Equal(t, state{Status: herald.StatusPending}, read(t, pool, queued))
	byPrio, err = delivery.ReapSending(ctx, pool, 0, 100)
	require.NoError(t, err)
	require.Equal(t, map[herald.Priority]int64{herald.PriorityNormal: 1}, byPrio)
	require.Equal(t, state{Status: herald.StatusPending, Attempts: 1, Logged: 1}, read(t, pool, sending),
		"the attempt in flight is logged AMBIGUOUS")
}

// TestInsertRefusesATakenIdempotencyKey: the insert's condition is a free key; a second
// insert with the key writes neither a notification nor a delivery.
func TestInsertRefusesATakenIdempotencyKey(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	note := func() delivery.Notification { return otpNotification(client, "k") }
	ok, err := delivery.Insert(ctx, pool, note())
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = delivery.Insert(ctx, pool, note())
	require.NoError(t, err)
	require.False(t, ok)
	var n, d int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM notification), (SELECT count(*) FROM delivery)`).Scan(&n, &d))
	require.Equal(t, []int{1, 1}, []int{n, d})
}

// Every kind of connection a caller may hold can run a transition.
var (
	_ delivery.DB = (*pgxpool.Pool)(nil)
	_ delivery.DB = (*pgxpool.Conn)(nil)
	_ delivery.DB = (*pgx.Conn)(nil)
	_ delivery.DB = pgx.Tx(nil)
)

// TestReapPassReadsOnlyItsPriority: with 5,000 QUEUED NORMAL rows marked before the
// watermark, a reaper pass for HIGH (which has none) reads no NORMAL row, and a pass for
// NORMAL reads its batch: each pass is a range scan of its own priority's QUEUED rows. On one
// index over QUEUED and SENDING by updated_at, the HIGH pass read all 5,000.
func TestReapPassReadsOnlyItsPriority(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	deliverytest.Backlog(t, pool, 5000, deliverytest.Spec{ClientID: client, Status: herald.StatusQueued, Priority: herald.PriorityNormal})
	_, err := pool.Exec(ctx, `ANALYZE delivery`)
	require.NoError(t, err)
	watermark := time.Now().Add(time.Minute)
	for _, c := range []struct {
		p    herald.Priority
		most float64
	}{{herald.PriorityHigh, 0}, {herald.PriorityNormal, 100}} {
		reads := deliverytest.ScanReads(t, pool, delivery.ReapQueuedSQLForTest, string(c.p), time.Hour.Seconds(), 100, watermark)
		total := 0.0
		for _, n := range reads {
			total += n
		}
		require.LessOrEqual(t, total, c.most+100, "rows read by a %s reaper pass: %v", c.p, reads)
	}
	n, err := delivery.ReapQueued(ctx, pool, herald.PriorityHigh, time.Hour, 100, &watermark)
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = delivery.ReapQueued(ctx, pool, herald.PriorityNormal, time.Hour, 100, &watermark)
	require.NoError(t, err)
	require.EqualValues(t, 100, n)
}
