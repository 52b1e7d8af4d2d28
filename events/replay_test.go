package events

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/endpoint"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// outbox writes an event into delivery_event as a transition would, occurring at.
func (e *env) outbox(client string, t herald.EventType, at time.Time) endpoint.Event {
	e.t.Helper()
	id, err := deliverytest.IDAt(at)
	require.NoError(e.t, err)
	ev := event(client, t)
	ev.ID, ev.Time = id.String(), at.UTC().Truncate(time.Microsecond)
	_, err = e.pool.Exec(context.Background(), `INSERT INTO delivery_event (id, type, client_id, notification_id, delivery_id, occurred_at, data)
		VALUES ($1, $2, $3, $4, $4, $5, $6)`, ev.ID, string(t), client, ev.Subject, ev.Time, ev.Data)
	require.NoError(e.t, err)
	return ev
}

// Replay since a time owes the endpoint the client's events from the outbox since then,
// those of its filter only, and sends them (again, for those already delivered) with their
// own ids as webhook-id.
func TestReplaySinceATime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	client, _ := e.client()
	other, _ := e.client()
	rc := newReceiver(t, nil)
	id := e.endpoint(client, rc.srv.URL, herald.EventSent, herald.EventFailed)
	e.start(e.config())

	now := time.Now()
	e.outbox(client, herald.EventSent, now.Add(-10*time.Minute)) // before since
	want := []string{
		e.outbox(client, herald.EventSent, now.Add(-4*time.Minute)).ID,
		e.outbox(client, herald.EventFailed, now.Add(-3*time.Minute)).ID,
	}
	e.outbox(client, herald.EventAttemptFailed, now.Add(-2*time.Minute)) // not in the filter
	e.outbox(other, herald.EventSent, now.Add(-2*time.Minute))           // another client's

	ep, err := endpoint.Get(context.Background(), e.pool, client, id)
	require.NoError(t, err)
	n, err := endpoint.Replay(context.Background(), e.pool, ep, now.Add(-5*time.Minute))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	heraldtest.WaitFor(t, 30*time.Second, "the replayed events", func() bool { return len(rc.got()) == 2 })
	require.ElementsMatch(t, want, rc.ids())
	heraldtest.WaitFor(t, 10*time.Second, "both delivered", func() bool {
		a, _ := e.message(id, want[0])
		b, _ := e.message(id, want[1])
		return a == "DELIVERED" && b == "DELIVERED"
	})

	// Replaying delivered events sends them again, same ids.
	n, err = endpoint.Replay(context.Background(), e.pool, ep, now.Add(-5*time.Minute))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	heraldtest.WaitFor(t, 30*time.Second, "the second replay", func() bool { return len(rc.got()) == 4 })
	require.ElementsMatch(t, append(want, want...), rc.ids())
	heraldtest.WaitFor(t, 10*time.Second, "the second delivery recorded", func() bool { return len(e.results(id, want[0])) == 2 })
	require.Equal(t, []string{"DELIVERED", "DELIVERED"}, e.results(id, want[0]))
}
