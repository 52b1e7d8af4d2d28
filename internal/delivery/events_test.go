package delivery_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// event is a delivery_event row as a test reads it back.
type event struct {
	Type                         herald.EventType
	ClientID, NotificationID, ID string
	Data                         herald.EventData
}

// events reads the events of delivery id written after sequence after, in sequence order.
func events(t *testing.T, pool *pgxpool.Pool, id string, after int64) []event {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT type, client_id::text, notification_id::text, id::text, data FROM delivery_event
		 WHERE delivery_id = $1 AND (data->>'sequence')::bigint > $2 ORDER BY (data->>'sequence')::bigint`, id, after)
	require.NoError(t, err)
	defer rows.Close()
	var out []event
	for rows.Next() {
		var e event
		var data []byte
		require.NoError(t, rows.Scan(&e.Type, &e.ClientID, &e.NotificationID, &e.ID, &data))
		require.NoError(t, json.Unmarshal(data, &e.Data))
		out = append(out, e)
	}
	require.NoError(t, rows.Err())
	return out
}

// lastSequence is the highest sequence of delivery id's events so far (0: none).
func lastSequence(t *testing.T, pool *pgxpool.Pool, id string) int64 {
	t.Helper()
	var s int64
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT coalesce(max((data->>'sequence')::bigint), 0) FROM delivery_event WHERE delivery_id = $1`, id).Scan(&s))
	return s
}

// TestEveryTransitionWritesItsEvents runs each transition of internal/delivery on a row in
// the state it moves from and reads the events the transition wrote: exactly the client-
// visible ones (none for the internal moves), each once, in order, with the notification's
// client and the delivery's fields in its data.
func TestEveryTransitionWritesItsEvents(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	record := func(o delivery.Outcome) func(string) error {
		return func(id string) error {
			ok, err := delivery.Record(ctx, pool, id, 1, time.Now(), o)
			require.True(t, ok)
			return err
		}
	}
	sending := deliverytest.Spec{Status: herald.StatusSending, Attempts: 1}
	cases := []struct {
		name string
		spec deliverytest.Spec
		run  func(id string) error
		want []herald.EventType
		last herald.Status
	}{
		{"sent", sending, record(delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sms:twilio", ProviderID: "SM1"}),
			[]herald.EventType{herald.EventSent}, herald.StatusSent},
		{"retry", sending, record(delivery.Outcome{Status: herald.StatusPending, AttemptClass: "TRANSIENT", RetryIn: time.Minute, ProviderCode: "30001"}),
			[]herald.EventType{herald.EventAttemptFailed}, herald.StatusPending},
		{"failed attempt", sending, record(delivery.Outcome{Status: herald.StatusFailed, AttemptClass: "PERMANENT", ProviderCode: "21211"}),
			[]herald.EventType{herald.EventAttemptFailed, herald.EventFailed}, herald.StatusFailed},
		{"expired claim", sending, record(delivery.Outcome{Status: herald.StatusExpired, AttemptClass: "EXPIRED", Error: "expired"}),
			[]herald.EventType{herald.EventExpired}, herald.StatusExpired},
		{"expire", deliverytest.Spec{ExpiresIn: -time.Second}, func(id string) error {
			ok, err := delivery.Expire(ctx, pool, id, 0)
			require.True(t, ok)
			return err
		}, []herald.EventType{herald.EventExpired}, herald.StatusExpired},
		{"give up", deliverytest.Spec{Attempts: 1}, func(id string) error {
			ok, err := delivery.GiveUp(ctx, pool, id, 1, "ambiguous")
			require.True(t, ok)
			return err
		}, []herald.EventType{herald.EventFailed}, herald.StatusFailed},
		{"cancel", deliverytest.Spec{DueIn: time.Hour}, func(id string) error {
			var nid string
			require.NoError(t, pool.QueryRow(ctx, `SELECT notification_id::text FROM delivery WHERE id = $1`, id).Scan(&nid))
			n, err := delivery.Cancel(ctx, pool, []string{nid})
			require.EqualValues(t, 1, n)
			return err
		}, []herald.EventType{herald.EventCancelled}, herald.StatusCancelled},
		{"retry now", sending, func(id string) error {
			ok, err := retriedNow(ctx, pool, id, 1)
			require.True(t, ok)
			return err
		}, []herald.EventType{herald.EventAttemptFailed}, herald.StatusSending},
		{"claim and unclaim", deliverytest.Spec{}, func(id string) error {
			attempt, _, ok, err := delivery.Claim(ctx, pool, id, 0)
			require.NoError(t, err)
			require.True(t, ok)
			ok, err = delivery.Unclaim(ctx, pool, id, attempt, time.Minute)
			require.True(t, ok)
			return err
		}, []herald.EventType{}, herald.StatusPending},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.spec
			s.ClientID = client
			id := deliverytest.One(t, pool, s)
			before := lastSequence(t, pool, id)
			require.NoError(t, c.run(id))
			got := events(t, pool, id, before)
			types := make([]herald.EventType, len(got))
			for i, e := range got {
				types[i] = e.Type
				require.Equal(t, client, e.ClientID)
				require.Equal(t, e.NotificationID, e.Data.NotificationID)
				require.Equal(t, id, e.Data.DeliveryID)
				require.Equal(t, herald.ChannelSMS, e.Data.Channel)
				require.Greater(t, e.Data.Sequence, before)
				require.WithinDuration(t, time.Now(), e.Data.OccurredAt, time.Minute)
			}
			require.Equal(t, c.want, types)
			if len(got) > 0 {
				require.Equal(t, c.last, got[len(got)-1].Data.Status)
			}
		})
	}
}

// TestEventFields checks the data of the events whose fields depend on the transition: the
// provider of a send, the error and retryable of a failed attempt.
func TestEventFields(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	spec := deliverytest.Spec{Status: herald.StatusSending, Attempts: 1}

	id := deliverytest.One(t, pool, spec)
	_, err := delivery.Record(ctx, pool, id, 1, time.Now(), delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sms:twilio", ProviderID: "SM1"})
	require.NoError(t, err)
	got := events(t, pool, id, lastSequence(t, pool, id)-1)
	require.Len(t, got, 1)
	require.Equal(t, "sms:twilio", got[0].Data.Provider)
	require.Equal(t, "SM1", got[0].Data.ProviderMessageID)
	require.Equal(t, 1, got[0].Data.Attempt)
	require.Nil(t, got[0].Data.Error)

	id = deliverytest.One(t, pool, spec)
	before := lastSequence(t, pool, id)
	_, err = delivery.Record(ctx, pool, id, 1, time.Now(), delivery.Outcome{Status: herald.StatusPending, AttemptClass: "TRANSIENT", RetryIn: time.Minute, Provider: "sms:twilio", ProviderCode: "30001"})
	require.NoError(t, err)
	got = events(t, pool, id, before)
	require.Len(t, got, 1)
	require.Equal(t, herald.StatusPending, got[0].Data.Status)
	require.NotNil(t, got[0].Data.Retryable)
	require.True(t, *got[0].Data.Retryable)
	require.Equal(t, &herald.EventError{Class: "transient", Code: "30001"}, got[0].Data.Error)

	id = deliverytest.One(t, pool, spec)
	before = lastSequence(t, pool, id)
	_, err = delivery.Record(ctx, pool, id, 1, time.Now(), delivery.Outcome{Status: herald.StatusFailed, AttemptClass: "PERMANENT", Provider: "sms:twilio", ProviderCode: "21211"})
	require.NoError(t, err)
	got = events(t, pool, id, before)
	require.Len(t, got, 2)
	require.False(t, *got[0].Data.Retryable)
	require.Equal(t, &herald.EventError{Class: "permanent", Code: "21211"}, got[1].Data.Error)
	require.Equal(t, "sms:twilio", got[1].Data.Provider)
}

// TestRolledBackTransitionWritesNoEvent runs a transition in a transaction that rolls back:
// no event; the same transition committed: its event.
func TestRolledBackTransitionWritesNoEvent(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	id := deliverytest.One(t, pool, deliverytest.Spec{Status: herald.StatusSending, Attempts: 1})
	before := lastSequence(t, pool, id)
	sent := delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sms:twilio"}

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	ok, err := delivery.Record(ctx, tx, id, 1, time.Now(), sent)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, tx.Rollback(ctx))
	require.Empty(t, events(t, pool, id, before))

	ok, err = delivery.Record(ctx, pool, id, 1, time.Now(), sent)
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, events(t, pool, id, before), 1)
}

// TestEventsOff: a session with herald.events = off (herald serve --events=false) writes
// no event; the transition itself goes through.
func TestEventsOff(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	id := deliverytest.One(t, pool, deliverytest.Spec{Status: herald.StatusSending, Attempts: 1})
	before := lastSequence(t, pool, id)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET herald.events = off`)
	require.NoError(t, err)
	defer func() { _, _ = conn.Exec(ctx, `RESET herald.events`) }()
	ok, err := delivery.Record(ctx, conn, id, 1, time.Now(), delivery.Outcome{Status: herald.StatusFailed, AttemptClass: "PERMANENT"})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, herald.StatusFailed, read(t, pool, id).Status)
	require.Empty(t, events(t, pool, id, before))
}

// TestEventsNameRemovedPushTokens: an attempt whose provider reported push tokens invalid
// keeps their count in the attempt log, and the events of the attempt and of the delivery it
// ended carry it; an attempt without one carries none.
func TestEventsNameRemovedPushTokens(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	spec := deliverytest.Spec{Channel: herald.ChannelPush, Status: herald.StatusSending, Attempts: 1}
	removed := func(id string) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT tokens_removed FROM delivery_attempt WHERE delivery_id = $1 AND attempt = 1`, id).Scan(&n))
		return n
	}

	// Two of three tokens unregistered, the third took it: SENT, naming the two.
	id := deliverytest.One(t, pool, spec)
	before := lastSequence(t, pool, id)
	_, err := delivery.Record(ctx, pool, id, 1, time.Now(), delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT",
		Provider: "push", ProviderCode: "200", TokensRemoved: 2})
	require.NoError(t, err)
	require.Equal(t, 2, removed(id))
	got := events(t, pool, id, before)
	require.Len(t, got, 1)
	require.Equal(t, 2, got[0].Data.TokensRemoved)

	// The only token unregistered: the attempt fails permanently, and both events say so.
	id = deliverytest.One(t, pool, spec)
	before = lastSequence(t, pool, id)
	_, err = delivery.Record(ctx, pool, id, 1, time.Now(), delivery.Outcome{Status: herald.StatusFailed, AttemptClass: "PERMANENT",
		Provider: "push:fcm", ProviderCode: "UNREGISTERED", TokensRemoved: 1})
	require.NoError(t, err)
	require.Equal(t, 1, removed(id))
	got = events(t, pool, id, before)
	require.Len(t, got, 2)
	require.Equal(t, herald.EventAttemptFailed, got[0].Type)
	require.Equal(t, 1, got[0].Data.TokensRemoved)
	require.Equal(t, 1, got[1].Data.TokensRemoved)

	// No token reported invalid: no count in the data.
	id = deliverytest.One(t, pool, spec)
	before = lastSequence(t, pool, id)
	_, err = delivery.Record(ctx, pool, id, 1, time.Now(), delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "push"})
	require.NoError(t, err)
	require.Zero(t, removed(id))
	got = events(t, pool, id, before)
	require.Len(t, got, 1)
	require.Zero(t, got[0].Data.TokensRemoved)
}

// TestBatchWritesEachRowsEventsOnce records one batch of outcomes (RecordBatch, one
// statement) with sends, failures and a retry mixed, as a busy lane's group commit does: every
// row gets exactly its events, a failure's attempt_failed before its failed. An UPDATE that
// leaves the status as it is then writes none, for one row or many.
func TestBatchWritesEachRowsEventsOnce(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	ids := deliverytest.Insert(t, pool, 9, deliverytest.Spec{ClientID: client, Status: herald.StatusSending, Attempts: 1})
	want := map[string][]herald.EventType{}
	rs := make([]delivery.Recording, len(ids))
	for i, id := range ids {
		o := delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sms:twilio", ProviderID: "SM" + id}
		want[id] = []herald.EventType{herald.EventSent}
		switch i % 3 {
		case 1:
			o = delivery.Outcome{Status: herald.StatusFailed, AttemptClass: "PERMANENT", Provider: "sms:twilio", ProviderCode: "21211"}
			want[id] = []herald.EventType{herald.EventAttemptFailed, herald.EventFailed}
		case 2:
			o = delivery.Outcome{Status: herald.StatusPending, AttemptClass: "TRANSIENT", RetryIn: time.Minute, ProviderCode: "30001"}
			want[id] = []herald.EventType{herald.EventAttemptFailed}
		}
		rs[i] = delivery.Recording{ID: id, Attempt: 1, StartedAt: time.Now(), Outcome: o}
	}
	got, err := delivery.RecordBatch(ctx, pool, rs)
	require.NoError(t, err)
	require.Len(t, got, len(ids))
	check := func() {
		for _, id := range ids {
			evs := events(t, pool, id, 0)
			types := make([]herald.EventType, len(evs))
			for i, e := range evs {
				types[i] = e.Type
				require.Equal(t, client, e.ClientID)
				require.Equal(t, id, e.Data.DeliveryID)
			}
			require.Equal(t, want[id], types, "delivery %s", id)
			if types[0] == herald.EventSent {
				require.Equal(t, "SM"+id, evs[0].Data.ProviderMessageID)
				require.Equal(t, herald.StatusSent, evs[0].Data.Status)
			}
		}
	}
	check()
	_, err = pool.Exec(ctx, `UPDATE delivery SET updated_at = now() WHERE id = ANY($1::uuid[])`, ids)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE delivery SET last_error = 'x' WHERE id = $1`, ids[0])
	require.NoError(t, err)
	check()
}

// TestSendOutsideTheOutcomeStatementStillWritesItsEvent: the outcome statement writes the
// event of its sends itself and tells the status trigger so for its own transaction only
// (migration 00140). A send written by anything else (a binary from before the migration,
// psql), here on the very connection that has just recorded an outcome, gets its one event
// from the trigger; the outcome statement's sends get theirs once, not twice.
func TestSendOutsideTheOutcomeStatementStillWritesItsEvent(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	ids := deliverytest.Insert(t, pool, 3, deliverytest.Spec{ClientID: client, Status: herald.StatusSending, Attempts: 1})
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	sent := delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sms:twilio", ProviderID: "SM1"}
	got, err := delivery.RecordBatch(ctx, conn, []delivery.Recording{
		{ID: ids[0], Attempt: 1, StartedAt: time.Now(), Outcome: sent},
		{ID: ids[1], Attempt: 1, StartedAt: time.Now(), Outcome: sent},
	})
	require.NoError(t, err)
	require.Len(t, got, 2)
	_, err = conn.Exec(ctx, `UPDATE delivery SET status = 'SENT', provider = 'sms:old', sent_at = now() WHERE id = $1`, ids[2])
	require.NoError(t, err)

	for i, id := range ids {
		evs := events(t, pool, id, 0)
		require.Len(t, evs, 1, "delivery %d", i)
		require.Equal(t, herald.EventSent, evs[0].Type)
		require.Equal(t, client, evs[0].ClientID)
		require.Equal(t, herald.StatusSent, evs[0].Data.Status)
	}
	require.Equal(t, "sms:old", events(t, pool, ids[2], 0)[0].Data.Provider)
}
