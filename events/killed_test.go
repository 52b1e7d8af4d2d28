package events

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/endpoint"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// An events worker killed with SIGKILL in the middle of its retries loses nothing: every
// event reaches the endpoint once the survivor takes over (the killed worker's claims run
// out, its uncommitted records come again), and every request of an event carries that
// event's id as webhook-id, so that a duplicate is one the receiver can drop.
func TestKilledWorkerMidRetryLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	client, _ := e.client()
	var mu sync.Mutex
	tries := map[string]int{}
	rc := newReceiver(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		mu.Lock()
		id := r.Header.Get("webhook-id")
		tries[id]++
		n := tries[id]
		mu.Unlock()
		if n <= 2 { // two failures per event: the kill finds retries waiting
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	epID := e.endpoint(client, rc.srv.URL)
	cfg := e.config()
	cfg.RetrySchedule = []time.Duration{0, time.Second, time.Second, time.Second, time.Second, time.Second, time.Second}
	cfg.Timeout, cfg.Lease = time.Second, 3*time.Second

	spec, err := json.Marshal(childSpec{DSN: e.dsn, Config: cfg})
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	var evs []endpoint.Event
	for range 20 {
		evs = append(evs, event(client, herald.EventSent))
	}
	e.publish(evs...)
	heraldtest.WaitFor(t, 60*time.Second, "the child's first attempts", func() bool {
		var retrying int
		require.NoError(t, e.pool.QueryRow(context.Background(),
			`SELECT count(*) FROM webhook_message WHERE endpoint_id = $1 AND status = 'PENDING' AND attempts >= 1`, epID).Scan(&retrying))
		return retrying >= 10
	})
	late := make([]endpoint.Event, 0, 20)
	for range 20 {
		late = append(late, event(client, herald.EventSent))
	}
	e.publish(late...) // some read and not committed, or not read at all, at the kill
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	killed = true
	var delivered int
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM webhook_message WHERE endpoint_id = $1 AND status = 'DELIVERED'`, epID).Scan(&delivered))
	require.Less(t, delivered, 40, "the kill found work undone")

	e.start(cfg) // same group: the survivor
	all := append(evs, late...)
	heraldtest.WaitFor(t, 90*time.Second, "every event delivered", func() bool {
		for _, ev := range all {
			if s, _ := e.message(epID, ev.ID); s != "DELIVERED" {
				return false
			}
		}
		return true
	})
	want := map[string]bool{}
	for _, ev := range all {
		want[ev.ID] = true
	}
	per := map[string]int{}
	for _, h := range rc.got() {
		var body struct {
			ID string `json:"id"`
		}
		require.NoError(t, json.Unmarshal(h.body, &body))
		require.Equal(t, body.ID, h.header.Get("webhook-id"), "a request carries its event's id as webhook-id")
		require.True(t, want[body.ID], "only published events")
		per[body.ID]++
	}
	require.Len(t, per, len(all), "every event reached the endpoint")
	extra := 0
	for _, n := range per {
		extra += n - 3 // two 503s and the 2xx
	}
	fmt.Printf("TestKilledWorkerMidRetryLosesNothing: %d events, %d requests, %d beyond the planned three per event (same webhook-id) caused by the kill\n",
		len(all), len(rc.got()), extra)
}
