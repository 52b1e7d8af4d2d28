package events

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/endpoint"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// An event reaches the endpoint of its client as CloudEvents structured JSON, signed so that
// the Standard Webhooks reference library verifies it with the client's secret, webhook-id =
// the event id; an endpoint whose filter does not take the type gets nothing.
func TestDeliversSignedStructuredEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	client, secret := e.client()
	all := newReceiver(t, nil)
	failedOnly := newReceiver(t, nil)
	e.endpoint(client, all.srv.URL+"/hook")
	e.endpoint(client, failedOnly.srv.URL, herald.EventFailed)
	e.start(e.config())

	ev := event(client, herald.EventSent)
	e.publish(ev)
	heraldtest.WaitFor(t, 30*time.Second, "the event at the endpoint", func() bool { return len(all.got()) == 1 })
	h := all.got()[0]
	require.Equal(t, ContentType, h.header.Get("Content-Type"))
	require.Equal(t, ev.ID, h.header.Get("webhook-id"))
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(h.body, h.header), "the reference library verifies the signature")
	_, otherSecret := e.client()
	wh2, err := standardwebhooks.NewWebhook(otherSecret)
	require.NoError(t, err)
	require.Error(t, wh2.Verify(h.body, h.header), "another client's secret does not")

	var ce cloudevents.Event
	require.NoError(t, json.Unmarshal(h.body, &ce))
	require.NoError(t, ce.Validate())
	require.Equal(t, ev.ID, ce.ID())
	require.Equal(t, string(herald.EventSent), ce.Type())
	require.Equal(t, herald.EventSource, ce.Source())
	require.Equal(t, ev.Subject, ce.Subject())
	require.Equal(t, client, ce.Extensions()[herald.EventClientExtension])
	var data herald.EventData
	require.NoError(t, json.Unmarshal(ce.Data(), &data))
	require.Equal(t, ev.Subject, data.DeliveryID)

	// The filtered endpoint takes the failure only.
	failed := event(client, herald.EventFailed)
	e.publish(failed)
	heraldtest.WaitFor(t, 30*time.Second, "the failure at both endpoints", func() bool {
		return len(all.got()) == 2 && len(failedOnly.got()) == 1
	})
	require.Equal(t, []string{failed.ID}, failedOnly.ids())
}

// A client receives only the events of its own notifications.
func TestClientsReceiveOnlyTheirOwnEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, _ := e.client()
	b, _ := e.client()
	ra, rb := newReceiver(t, nil), newReceiver(t, nil)
	e.endpoint(a, ra.srv.URL)
	e.endpoint(b, rb.srv.URL)
	e.start(e.config())

	var wantA, wantB []string
	var evs []endpoint.Event
	for i := range 10 {
		owner := a
		if i%3 == 0 {
			owner = b
		}
		ev := event(owner, herald.EventSent)
		evs = append(evs, ev)
		if owner == a {
			wantA = append(wantA, ev.ID)
		} else {
			wantB = append(wantB, ev.ID)
		}
	}
	e.publish(evs...)
	heraldtest.WaitFor(t, 30*time.Second, "every event at its client's endpoint", func() bool {
		return len(ra.got()) >= len(wantA) && len(rb.got()) >= len(wantB)
	})
	require.ElementsMatch(t, wantA, ra.ids())
	require.ElementsMatch(t, wantB, rb.ids())
}

// 503 and 429 are retried on the schedule with the same webhook-id (429's Retry-After
// honoured), another 4xx is final at once, and a schedule that runs out drops the event.
func TestRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	client, _ := e.client()
	flaky := newReceiver(t, func(n int, _ *http.Request, w http.ResponseWriter) {
		switch n {
		case 0:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 1:
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	bad := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusBadRequest) })
	down := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) })
	flakyID, badID, downID := e.endpoint(client, flaky.srv.URL), e.endpoint(client, bad.srv.URL), e.endpoint(client, down.srv.URL)
	e.start(e.config())

	ev := event(client, herald.EventSent)
	e.publish(ev)
	heraldtest.WaitFor(t, 30*time.Second, "every message final", func() bool {
		s1, _ := e.message(flakyID, ev.ID)
		s2, _ := e.message(badID, ev.ID)
		s3, _ := e.message(downID, ev.ID)
		return s1 == "DELIVERED" && s2 == "DROPPED" && s3 == "DROPPED"
	})
	require.Equal(t, []string{"RETRY", "RETRY", "DELIVERED"}, e.results(flakyID, ev.ID))
	require.Equal(t, []string{ev.ID, ev.ID, ev.ID}, flaky.ids(), "the same webhook-id on every attempt")
	hs := flaky.got()
	require.GreaterOrEqual(t, hs[2].at.Sub(hs[1].at), 2*time.Second, "Retry-After: 2 honoured over the 400ms step")
	require.Equal(t, []string{"DROPPED"}, e.results(badID, ev.ID), "a 400 is final")
	require.Equal(t, []string{"RETRY", "RETRY", "RETRY", "DROPPED"}, e.results(downID, ev.ID), "four attempts, the schedule's length")
	require.Len(t, down.got(), 4)
}

// A 410 disables the endpoint: nothing more is sent, events that occur meanwhile are not
// owed to it; enabling it sends the event that met the 410.
func TestGoneDisablesUntilEnabled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	client, _ := e.client()
	gone := true
	rc := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
		if gone {
			w.WriteHeader(http.StatusGone)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	id := e.endpoint(client, rc.srv.URL)
	e.start(e.config())

	first := event(client, herald.EventSent)
	e.publish(first)
	heraldtest.WaitFor(t, 30*time.Second, "the endpoint disabled", func() bool {
		ep, err := endpoint.Get(context.Background(), e.pool, client, id)
		require.NoError(t, err)
		return ep.DisabledAt != nil
	})
	require.Equal(t, []string{"GONE"}, e.results(id, first.ID))
	st, _ := e.message(id, first.ID)
	require.Equal(t, "PENDING", st, "kept for when the endpoint comes back")

	second := event(client, herald.EventSent)
	e.publish(second)
	// The second event is read (a later marker event to another endpoint proves the
	// consumer passed it) but not owed to the disabled endpoint.
	marker := newReceiver(t, nil)
	other, _ := e.client()
	e.endpoint(other, marker.srv.URL)
	third := event(other, herald.EventSent)
	e.publish(third)
	heraldtest.WaitFor(t, 30*time.Second, "the marker event", func() bool { return len(marker.got()) == 1 })
	st, _ = e.message(id, second.ID)
	require.Empty(t, st, "no message for a disabled endpoint")
	require.Len(t, rc.got(), 1)

	gone = false
	_, err := endpoint.Enable(context.Background(), e.pool, client, id)
	require.NoError(t, err)
	heraldtest.WaitFor(t, 30*time.Second, "the first event delivered after enable", func() bool {
		s, _ := e.message(id, first.ID)
		return s == "DELIVERED"
	})
	require.Equal(t, []string{first.ID, first.ID}, rc.ids())
}
