package timeline_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/stacktest"
	"github.com/heraldhq/herald/internal/timeline"
)

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// retriedThenSent drives delivery id through the real transitions: QUEUED, SENDING,
// PENDING (a TRANSIENT 503, retry due at once), SENDING again, SENT.
func retriedThenSent(t *testing.T, pool *pgxpool.Pool, id string) {
	t.Helper()
	ctx := context.Background()
	marked, err := delivery.MarkQueued(ctx, pool, []delivery.Version{deliverytest.Version(t, pool, id)})
	require.NoError(t, err)
	require.Contains(t, marked, id)

	att, started, ok, err := delivery.Claim(ctx, pool, id, 0)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = delivery.Record(ctx, pool, id, att, started, delivery.Outcome{Status: herald.StatusPending,
		AttemptClass: "TRANSIENT", Error: "provider unavailable", Provider: "sim-sms", ProviderCode: "503"})
	require.NoError(t, err)
	require.True(t, ok)

	att, started, ok, err = delivery.Claim(ctx, pool, id, 1)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = delivery.Record(ctx, pool, id, att, started, delivery.Outcome{Status: herald.StatusSent,
		AttemptClass: "SENT", Provider: "sim-sms", ProviderID: "msg-42", ProviderCode: "200"})
	require.NoError(t, err)
	require.True(t, ok)
}

// TestTimelineOfARetriedDelivery: a delivery that went QUEUED → SENDING → PENDING (retry) →
// SENDING → SENT shows every step, in order, with its gap from the step before, the two
// attempts with their provider codes and the retry time, and the trace id of the accept.
// Any of the three ways in (notification id, delivery id, idempotency key) gives it.
func TestTimelineOfARetriedDelivery(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	id := deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, Traceparent: traceparent, Priority: herald.PriorityHigh})
	retriedThenSent(t, pool, id)

	var nid string
	require.NoError(t, pool.QueryRow(ctx, `SELECT notification_id::text FROM delivery WHERE id = $1`, id).Scan(&nid))
	tl, err := timeline.Load(ctx, pool, nid, "")
	require.NoError(t, err)

	require.Equal(t, nid, tl.NotificationID)
	require.Equal(t, client, tl.ClientID)
	require.Equal(t, herald.PriorityHigh, tl.Priority)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", tl.TraceID)
	require.Len(t, tl.Deliveries, 1)
	d := tl.Deliveries[0]
	require.Equal(t, id, d.ID)
	require.Equal(t, herald.StatusSent, d.Status)
	require.Equal(t, 2, d.Attempts)
	require.Equal(t, "sim-sms", d.Provider)
	require.Equal(t, "msg-42", d.ProviderMessageID)
	require.Nil(t, d.NextAttemptAt, "a final delivery has no next attempt")

	var statuses, notes []string
	for i, s := range d.Steps {
		statuses, notes = append(statuses, string(s.Status)), append(notes, s.Note)
		require.GreaterOrEqual(t, s.Since, time.Duration(0))
		if i > 0 {
			require.Equal(t, s.At.Sub(d.Steps[i-1].At), s.Since, "step %d's gap is from the step before", i)
		}
	}
	require.Equal(t, []string{"PENDING", "QUEUED", "SENDING", "PENDING", "SENDING", "SENT"}, statuses)
	require.Equal(t, []string{"accepted", "published", "attempt 1", "attempt 1 ERROR TRANSIENT (503), retry",
		"attempt 2", "attempt 2 SENT (200)"}, notes)
	require.Equal(t, tl.AcceptedAt, d.Steps[0].At.Add(-d.Steps[0].Since))

	require.Len(t, d.AttemptLog, 2)
	first, second := d.AttemptLog[0], d.AttemptLog[1]
	require.Equal(t, timeline.Attempt{Attempt: 1, Started: d.Steps[2].At, Finished: d.Steps[3].At,
		Outcome: "ERROR", ErrorClass: "TRANSIENT", Provider: "sim-sms", ProviderCode: "503",
		NextAttemptAt: first.NextAttemptAt}, first)
	require.NotNil(t, first.NextAttemptAt, "a retried attempt keeps its retry time")
	require.Equal(t, timeline.Attempt{Attempt: 2, Started: d.Steps[4].At, Finished: d.Steps[5].At,
		Outcome: "SENT", Provider: "sim-sms", ProviderCode: "200"}, second)

	for _, ref := range []string{id, nid} {
		byRef, err := timeline.Load(ctx, pool, ref, "")
		require.NoError(t, err)
		require.Equal(t, tl, byRef)
	}
	resolved, err := timeline.Resolve(ctx, pool, nid, client) // deliverytest's key is the notification id
	require.NoError(t, err)
	require.Equal(t, nid, resolved)
	resolved, err = timeline.Resolve(ctx, pool, nid, "test") // the client by name
	require.NoError(t, err)
	require.Equal(t, nid, resolved)

	var text bytes.Buffer
	require.NoError(t, timeline.WriteText(&text, tl, "http://jaeger.local:16686/"))
	require.Contains(t, text.String(), "http://jaeger.local:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736")
	require.Contains(t, text.String(), "attempt 1 ERROR TRANSIENT (503), retry")
	require.Contains(t, text.String(), "msg-42")
}

// TestTimelineIsScopedAndResolvesNothingElse: another client's notification, an unknown id,
// a key of another client and a name two clients share all read as ErrNotFound.
func TestTimelineIsScopedAndResolvesNothingElse(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	a, b := deliverytest.Client(t, pool), deliverytest.Client(t, pool) // both named "test"
	id := deliverytest.One(t, pool, deliverytest.Spec{ClientID: a})

	_, err := timeline.Load(ctx, pool, id, b)
	require.ErrorIs(t, err, timeline.ErrNotFound)
	tl, err := timeline.Load(ctx, pool, id, a)
	require.NoError(t, err)
	require.Len(t, tl.Deliveries, 1)
	require.Equal(t, []string{"PENDING"}, []string{string(tl.Deliveries[0].Steps[0].Status)})
	require.NotNil(t, tl.Deliveries[0].NextAttemptAt)
	require.Empty(t, tl.TraceID)

	_, err = timeline.Load(ctx, pool, "0193a0b0-0000-7000-8000-000000000000", "")
	require.ErrorIs(t, err, timeline.ErrNotFound)
	_, err = timeline.Load(ctx, pool, "not-an-id", "")
	require.ErrorIs(t, err, timeline.ErrNotFound)
	_, err = timeline.Resolve(ctx, pool, tl.NotificationID, b)
	require.ErrorIs(t, err, timeline.ErrNotFound)
	_, err = timeline.Resolve(ctx, pool, tl.NotificationID, "test")
	require.ErrorIs(t, err, timeline.ErrNotFound, "a name two clients share names neither")
	_, err = timeline.Resolve(ctx, pool, "some-key", "")
	require.ErrorIs(t, err, timeline.ErrNotFound)
}

// TestTimelineKeepsFirstAndLastStepsOfALongHistory: a delivery deferred again and again
// (SENDING → PENDING without an attempt) keeps a bounded history: its first transition and
// the latest ones.
func TestTimelineKeepsFirstAndLastStepsOfALongHistory(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	id := deliverytest.One(t, pool, deliverytest.Spec{})
	for range 20 { // 40 status changes
		att, _, ok, err := delivery.Claim(ctx, pool, id, 0)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = delivery.Unclaim(ctx, pool, id, att, 0)
		require.NoError(t, err)
		require.True(t, ok)
	}
	tl, err := timeline.Load(ctx, pool, id, "")
	require.NoError(t, err)
	steps := tl.Deliveries[0].Steps
	require.Len(t, steps, 1+32, "the created step and at most 32 transitions")
	require.Equal(t, herald.StatusSending, steps[1].Status, "the first transition is kept")
	require.Equal(t, "claimed", steps[1].Note)
	require.Equal(t, herald.StatusPending, steps[len(steps)-1].Status, "the last transition is kept")
	require.Equal(t, "deferred (rate limit)", steps[len(steps)-1].Note)
	for i := 1; i < len(steps); i++ {
		require.False(t, steps[i].At.Before(steps[i-1].At), "steps stay in time order")
	}
}

// TestTimelineOfASuppressedNotification: a notification whose every channel was suppressed
// has a timeline without deliveries, and says so.
func TestTimelineOfASuppressedNotification(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	id := uuid.Must(uuid.NewV7())
	ok, err := delivery.Insert(ctx, pool, delivery.Notification{ID: id, ClientID: client, IdempotencyKey: "k",
		RequestHash: []byte{1}, UserID: 3, Template: "promo", Category: "marketing", Priority: herald.PriorityLow,
		Response: []byte(`{}`)})
	require.NoError(t, err)
	require.True(t, ok)
	tl, err := timeline.Load(ctx, pool, id.String(), "")
	require.NoError(t, err)
	require.Equal(t, id.String(), tl.NotificationID)
	require.Empty(t, tl.Deliveries)
	require.NotNil(t, tl.Deliveries, "an empty list, not null, in JSON")
	var text bytes.Buffer
	require.NoError(t, timeline.WriteText(&text, tl, ""))
	require.Contains(t, text.String(), "no deliveries")
	require.NotContains(t, text.String(), "jaeger")
}

// TestTimelineShowsReceipts: a sent delivery that a provider's receipts refined to DELIVERED
// shows the DELIVERED step with the receipt that made it, and every receipt (provider status,
// code, time); the text form lists them.
func TestTimelineShowsReceipts(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	id := deliverytest.One(t, pool, deliverytest.Spec{})
	retriedThenSent(t, pool, id)
	at := time.Now().UTC().Truncate(time.Millisecond)
	for _, r := range []delivery.Receipt{
		{DeliveryID: id, Provider: "sms:twilio", Status: "sent", At: at},
		{DeliveryID: id, Provider: "sms:twilio", Status: "delivered", Result: herald.StatusDelivered, At: at.Add(time.Second)},
		{DeliveryID: id, Provider: "sms:twilio", Status: "undelivered", Code: "30005", Result: herald.StatusUndelivered, At: at.Add(2 * time.Second)},
	} {
		_, err := delivery.ApplyReceipt(ctx, pool, r, time.Minute)
		require.NoError(t, err)
	}
	tl, err := timeline.Load(ctx, pool, id, "")
	require.NoError(t, err)
	d := tl.Deliveries[0]
	require.Equal(t, herald.StatusDelivered, d.Status)
	last := d.Steps[len(d.Steps)-1]
	require.Equal(t, herald.StatusDelivered, last.Status)
	require.Equal(t, "receipt sms:twilio delivered", last.Note)
	require.Len(t, d.Receipts, 3)
	require.Equal(t, timeline.Receipt{Provider: "sms:twilio", Status: "undelivered", Code: "30005", At: at.Add(2 * time.Second),
		ReceivedAt: d.Receipts[2].ReceivedAt, Applied: false}, d.Receipts[2])
	require.True(t, d.Receipts[1].Applied)

	var buf bytes.Buffer
	require.NoError(t, timeline.WriteText(&buf, tl, ""))
	require.Contains(t, buf.String(), "RECEIPT")
	require.Contains(t, buf.String(), "30005")
}

// TestTimelineNamesRemovedPushTokens: a push attempt whose provider reported a token invalid
// (FCM UNREGISTERED) shows, in its attempt log and in the step it ended, that the token was
// removed from the user's profile.
func TestTimelineNamesRemovedPushTokens(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	id := deliverytest.One(t, pool, deliverytest.Spec{Channel: herald.ChannelPush, Status: herald.StatusSending, Attempts: 1})
	ok, err := delivery.Record(ctx, pool, id, 1, time.Now(), delivery.Outcome{Status: herald.StatusFailed,
		AttemptClass: "PERMANENT", Error: "fcm: UNREGISTERED", Provider: "push:fcm", ProviderCode: "UNREGISTERED", TokensRemoved: 1})
	require.NoError(t, err)
	require.True(t, ok)

	tl, err := timeline.Load(ctx, pool, id, "")
	require.NoError(t, err)
	require.Len(t, tl.Deliveries, 1)
	d := tl.Deliveries[0]
	require.Len(t, d.AttemptLog, 1)
	require.Equal(t, 1, d.AttemptLog[0].TokensRemoved)
	last := d.Steps[len(d.Steps)-1]
	require.Equal(t, herald.StatusFailed, last.Status)
	require.Contains(t, last.Note, "1 invalid push token(s) removed from the user's profile")
}
