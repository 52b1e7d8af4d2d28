package partition

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// env is a migrated database and an api client.
type env struct {
	t        *testing.T
	pool     *pgxpool.Pool
	clientID string
	now      time.Time // the database clock at the start
}

func newEnv(t *testing.T) *env {
	t.Helper()
	pool := stacktest.Postgres(t)
	e := &env{t: t, pool: pool, clientID: deliverytest.Client(t, pool)}
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT now()`).Scan(&e.now))
	return e
}

func (e *env) manager(cfg Config) *Manager {
	e.t.Helper()
	m, err := New(cfg, e.pool, zaptest.NewLogger(e.t))
	require.NoError(e.t, err)
	return m
}

// createDay creates a day's partitions as the job does.
func (e *env) createDay(d Day) {
	e.t.Helper()
	_, err := e.pool.Exec(context.Background(), createSQL, d.Time())
	require.NoError(e.t, err)
}

// insertAt inserts a notification made at nAt with one SMS delivery made at dAt, through
// the insert transition; status other than PENDING is placed afterwards.
func (e *env) insertAt(nAt, dAt time.Time, status herald.Status) (nid, did uuid.UUID, err error) {
	e.t.Helper()
	if nid, err = deliverytest.IDAt(nAt); err != nil {
		return
	}
	if did, err = deliverytest.IDAt(dAt); err != nil {
		return
	}
	ok, err := delivery.Insert(context.Background(), e.pool, delivery.Notification{
		ID: nid, ClientID: e.clientID, IdempotencyKey: "k-" + nid.String(), RequestHash: []byte{1}, UserID: 1,
		Template: "otp", Category: "security", Priority: herald.PriorityNormal, Response: []byte(`{}`),
		Deliveries: []delivery.New{{ID: did, Channel: herald.ChannelSMS}},
	})
	if err != nil {
		return
	}
	require.True(e.t, ok)
	if status != herald.StatusPending {
		deliverytest.Place(e.t, e.pool, []string{did.String()}, deliverytest.Spec{Status: status})
	}
	return
}

func (e *env) partitionOf(table, column string, id uuid.UUID) string {
	e.t.Helper()
	var name string
	require.NoError(e.t, e.pool.QueryRow(context.Background(),
		`SELECT tableoid::regclass::text FROM `+table+` WHERE `+column+` = $1`, id).Scan(&name))
	return name
}

func (e *env) exists(name string) bool {
	e.t.Helper()
	var ok bool
	require.NoError(e.t, e.pool.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&ok))
	return ok
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// TestDayBoundsAreTheSameInGoAndSQL: the Go bounds (used by look-ups) and the SQL ones (used
// for the partitions) agree, and an id's day is the day it was made.
func TestDayBoundsAreTheSameInGoAndSQL(t *testing.T) {
	e := newEnv(t)
	for _, at := range []time.Time{
		time.Date(2024, 2, 29, 23, 59, 59, 999e6, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), e.now,
	} {
		d := DayOf(at)
		var lower uuid.UUID
		var day time.Time
		id, err := deliverytest.IDAt(at)
		require.NoError(t, err)
		require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT herald_day_bound($1::date), herald_uuid_day($2)`,
			d.Time(), id).Scan(&lower, &day))
		require.Equal(t, d.Lower(), lower, "%s", at)
		require.Equal(t, d.Time(), day.UTC(), "%s", at)
		require.Equal(t, d, DayOfID(id))
		require.Equal(t, "7", id.String()[14:15], "still a version 7 uuid")
	}
}

// TestMidnightSplitsPartitionsAndTheJobCreatesTomorrowFirst: ids made at 23:59:59.999 and at
// 00:00:00.000 land in the partitions of two days; an id of a day without partitions cannot
// be inserted, and a pass creates the days ahead before they are needed.
func TestMidnightSplitsPartitionsAndTheJobCreatesTomorrowFirst(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	today := DayOf(e.now)
	midnight := today.Add(1).Time()

	// Remove every partition after today, as if the days ahead had run out.
	have, err := func() (days, error) {
		c, err := e.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		defer c.Release()
		return existing(ctx, c)
	}()
	require.NoError(t, err)
	for d := range have {
		if d.Time().After(today.Time()) {
			for _, table := range Tables {
				_, err := e.pool.Exec(ctx, `DROP TABLE `+d.Name(table))
				require.NoError(t, err)
			}
		}
	}
	_, _, err = e.insertAt(midnight, midnight, herald.StatusPending)
	require.ErrorContains(t, err, "no partition", "tomorrow's rows need tomorrow's partitions")

	m := e.manager(Config{Ahead: 2})
	res, err := m.Pass(ctx)
	require.NoError(t, err)
	require.True(t, res.Ran)
	require.Equal(t, []Day{today.Add(1), today.Add(2)}, res.Created)
	for _, table := range Tables {
		require.True(t, e.exists(today.Add(2).Name(table)), table)
		require.False(t, e.exists(today.Add(3).Name(table)), table)
	}
	res, err = m.Pass(ctx)
	require.NoError(t, err)
	require.Empty(t, res.Created, "a second pass has nothing to create")

	before := midnight.Add(-time.Millisecond)
	n1, d1, err := e.insertAt(before, before, herald.StatusPending)
	require.NoError(t, err)
	n2, d2, err := e.insertAt(midnight, midnight, herald.StatusPending)
	require.NoError(t, err)
	require.Equal(t, today.Name("notification"), e.partitionOf("notification", "id", n1))
	require.Equal(t, today.Name("delivery"), e.partitionOf("delivery", "id", d1))
	require.Equal(t, today.Add(1).Name("notification"), e.partitionOf("notification", "id", n2))
	require.Equal(t, today.Add(1).Name("delivery"), e.partitionOf("delivery", "id", d2))

	// Attempts follow their delivery's day (fixture rows: routing only).
	for _, d := range []uuid.UUID{d1, d2} {
		_, err := e.pool.Exec(ctx, `INSERT INTO delivery_attempt (delivery_id, attempt, started_at, outcome) VALUES ($1, 1, now(), 'SENT')`, d)
		require.NoError(t, err)
	}
	require.Equal(t, today.Name("delivery_attempt"), e.partitionOf("delivery_attempt", "delivery_id", d1))
	require.Equal(t, today.Add(1).Name("delivery_attempt"), e.partitionOf("delivery_attempt", "delivery_id", d2))
}

// TestRetentionKeepsADayWithADeliveryNotFinal: a day past the retention stays while one of
// its deliveries, or a delivery of one of its notifications made after midnight, is not
// final; once all are final its partitions and idempotency keys go, and a later day stays.
func TestRetentionKeepsADayWithADeliveryNotFinal(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	old := DayOf(e.now).Add(-40)
	e.createDay(old)
	e.createDay(old.Add(1))
	recent := DayOf(e.now).Add(-29) // inside a 30-day retention
	e.createDay(recent)

	at := old.Time().Add(12 * time.Hour)
	_, sent, err := e.insertAt(at, at, herald.StatusSent)
	require.NoError(t, err)
	_, pending, err := e.insertAt(at.Add(time.Second), at.Add(time.Second), herald.StatusPending)
	require.NoError(t, err)
	// A notification of the day's last millisecond whose delivery was made at midnight.
	lastMs := old.Add(1).Time().Add(-time.Millisecond)
	crossN, cross, err := e.insertAt(lastMs, old.Add(1).Time(), herald.StatusQueued)
	require.NoError(t, err)
	require.Equal(t, old.Add(1).Name("delivery"), e.partitionOf("delivery", "id", cross))
	_, recentD, err := e.insertAt(recent.Time(), recent.Time(), herald.StatusSent)
	require.NoError(t, err)

	m := e.manager(Config{Retention: 30 * 24 * time.Hour})
	res, err := m.Pass(ctx)
	require.NoError(t, err)
	require.Empty(t, res.Dropped)
	require.Equal(t, []Kept{
		{Day: old, Reason: ReasonNotFinal, Count: 1},
		{Day: old.Add(1), Reason: ReasonNotFinal, Count: 1},
	}, res.Kept)
	require.True(t, e.exists(old.Name("delivery")))

	deliverytest.Place(t, e.pool, []string{pending.String()}, deliverytest.Spec{Status: herald.StatusFailed})
	res, err = m.Pass(ctx)
	require.NoError(t, err)
	require.Empty(t, res.Dropped)
	require.Equal(t, []Kept{
		{Day: old, Reason: ReasonReferenced, Count: 1},
		{Day: old.Add(1), Reason: ReasonNotFinal, Count: 1},
	}, res.Kept, "the notification of a delivery not final stays")

	deliverytest.Place(t, e.pool, []string{cross.String()}, deliverytest.Spec{Status: herald.StatusCancelled})
	keys := e.count(`SELECT count(*) FROM idempotency_key`)
	require.Equal(t, 4, keys)
	res, err = m.Pass(ctx)
	require.NoError(t, err)
	require.Equal(t, []Day{old, old.Add(1)}, res.Dropped)
	require.Empty(t, res.Kept)
	for _, d := range []Day{old, old.Add(1)} {
		for _, table := range Tables {
			require.False(t, e.exists(d.Name(table)), d.Name(table))
		}
	}
	require.Zero(t, e.count(`SELECT count(*) FROM delivery WHERE id = ANY($1)`, []uuid.UUID{sent, pending, cross}))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM idempotency_key`), "the dropped days' keys are gone")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM delivery WHERE id = $1`, recentD), "a day inside the retention stays")
	require.True(t, e.exists(recent.Name("notification")))

	// A replay of a dropped day's key is a new request.
	ok, err := delivery.Insert(ctx, e.pool, delivery.Notification{
		ID: uuid.Must(uuid.NewV7()), ClientID: e.clientID, IdempotencyKey: "k-" + crossN.String(), RequestHash: []byte{1},
		UserID: 1, Template: "otp", Category: "security", Priority: herald.PriorityNormal, Response: []byte(`{}`),
	})
	require.NoError(t, err)
	require.True(t, ok)
}

// TestOnePassAtATime: a pass runs only in the process holding the lock.
func TestOnePassAtATime(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	conn, err := e.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	var ok bool
	require.NoError(t, conn.QueryRow(ctx, lockSQL).Scan(&ok))
	require.True(t, ok)
	res, err := e.manager(Config{}).Pass(ctx)
	require.NoError(t, err)
	require.False(t, res.Ran)
	_, err = conn.Exec(ctx, unlockSQL)
	require.NoError(t, err)
	res, err = e.manager(Config{}).Pass(ctx)
	require.NoError(t, err)
	require.True(t, res.Ran)
}

// TestRetentionDropsTheDaysEvents: status events live in the partition of the day they were
// written (their UUIDv7 id), and a day dropped by the retention takes its events with it;
// the events of a later day stay.
func TestRetentionDropsTheDaysEvents(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	old := DayOf(e.now).Add(-40)
	e.createDay(old)
	require.True(t, e.exists(old.Name("delivery_event")), "herald_create_partitions makes the day's event partition")

	// A transition today writes its event into today's partition.
	_, today, err := e.insertAt(e.now, e.now, herald.StatusSent)
	require.NoError(t, err)
	var todays uuid.UUID
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT id FROM delivery_event WHERE delivery_id = $1`, today).Scan(&todays))
	require.Equal(t, DayOf(e.now).Name("delivery_event"), e.partitionOf("delivery_event", "id", todays))

	// The old day's delivery and an event written that day (fixture rows: routing only).
	at := old.Time().Add(12 * time.Hour)
	nid, did, err := e.insertAt(at, at, herald.StatusSent)
	require.NoError(t, err)
	oldEvent, err := deliverytest.IDAt(at)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO delivery_event (id, type, client_id, notification_id, delivery_id, occurred_at, data)
		VALUES ($1, 'herald.delivery.sent', $2, $3, $4, $5, '{}')`, oldEvent, e.clientID, nid, did, at)
	require.NoError(t, err)
	require.Equal(t, old.Name("delivery_event"), e.partitionOf("delivery_event", "id", oldEvent))

	res, err := e.manager(Config{Retention: 30 * 24 * time.Hour}).Pass(ctx)
	require.NoError(t, err)
	require.Equal(t, []Day{old}, res.Dropped)
	require.False(t, e.exists(old.Name("delivery_event")))
	require.Zero(t, e.count(`SELECT count(*) FROM delivery_event WHERE id = $1`, oldEvent), "the day's events went with it")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM delivery_event WHERE id = $1`, todays), "today's stay")
}
