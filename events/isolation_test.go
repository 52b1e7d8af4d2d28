package events

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/endpoint"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// One endpoint holds every request for 30 s; another endpoint, of the same client and of
// another, receives each of its events within 2 s of the event's time while the first is
// held. The events go out over the whole hold, one every 200 ms, so that the slow
// endpoint's queue and workers are full for all of it.
func TestSlowEndpointDelaysNoOther(t *testing.T) {
	t.Parallel()
	const hold = 30 * time.Second
	e := newEnv(t)
	a, _ := e.client()
	b, _ := e.client()
	release := make(chan struct{})
	slow := newReceiver(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		select {
		case <-release:
		case <-time.After(hold):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	})
	t.Cleanup(func() { close(release) })
	sameClient, otherClient := newReceiver(t, nil), newReceiver(t, nil)
	e.endpoint(a, slow.srv.URL)
	e.endpoint(a, sameClient.srv.URL)
	e.endpoint(b, otherClient.srv.URL)
	cfg := e.config()
	cfg.Timeout, cfg.Lease = 2*hold, 4*hold
	e.start(cfg)

	start := time.Now()
	sent := map[string]time.Time{}
	var ofA, ofB []endpoint.Event
	for time.Since(start) < hold {
		ea, eb := event(a, herald.EventSent), event(b, herald.EventSent)
		e.publish(ea, eb)
		sent[ea.ID], sent[eb.ID] = ea.Time, eb.Time
		ofA, ofB = append(ofA, ea), append(ofB, eb)
		time.Sleep(200 * time.Millisecond) // the pace of the load, not a wait for a result
	}
	heraldtest.WaitFor(t, 10*time.Second, "every event at the fast endpoints", func() bool {
		return len(sameClient.got()) >= len(ofA) && len(otherClient.got()) >= len(ofB)
	})
	require.Less(t, len(slow.got()), len(ofA), "the slow endpoint was still holding when the load ended")
	worst := time.Duration(0)
	for _, rc := range []*receiver{sameClient, otherClient} {
		for _, h := range rc.got() {
			lag := h.at.Sub(sent[h.header.Get("webhook-id")])
			worst = max(worst, lag)
			require.Less(t, lag, 2*time.Second, "event %s reached a fast endpoint %v after it occurred", h.header.Get("webhook-id"), lag)
		}
	}
	fmt.Printf("TestSlowEndpointDelaysNoOther: %d+%d events to the fast endpoints during a %v hold, worst lag %v; slow endpoint got %d requests\n",
		len(ofA), len(ofB), hold, worst, len(slow.got()))
}
