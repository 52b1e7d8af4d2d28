package events

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync/atomic"
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
// event's id as webhook-id, so that a duplicate is one the receiver can drop. The endpoint
// answers 503 until the kill, so that the kill finds retries waiting however fast or slow
// the machine is.
func TestKilledWorkerMidRetryLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	client, _ := e.client()
	var down atomic.Bool
	down.Store(true)
	rc := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	epID := e.endpoint(client, rc.srv.URL)
	cfg := e.config()
	// A retry a second for two minutes: no message runs out of attempts while the endpoint is
	// down, on however slow a machine.
	cfg.RetrySchedule = []time.Duration{0}
	for range 120 {
		cfg.RetrySchedule = append(cfg.RetrySchedule, time.Second)
	}
	cfg.Timeout, cfg.Lease = time.Second, 3*time.Second

	spec, err := json.Marshal(childSpec{DSN: e.dsn, Config: cfg})
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	var evs []endpoint.Event
	for range 20 {
		evs = append(evs, event(client, herald.EventSent))
	}
	e.publish(evs...)
	heraldtest.WaitFor(t, 60*time.Second, "the child's first attempts", func() bool {
		select {
		case err := <-exited:
			exited <- err
			require.FailNow(t, "the events worker exited before the kill", "%v", err)
		default:
		}
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
	err = <-exited
	exited <- err
	var delivered int
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM webhook_message WHERE endpoint_id = $1 AND status = 'DELIVERED'`, epID).Scan(&delivered))
	require.Zero(t, delivered, "nothing delivered while the endpoint was down")
	failed := len(rc.got())
	down.Store(false)

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
	for _, h := range rc.got()[failed:] { // what reached the endpoint once it was up again
		var body struct {
			ID string `json:"id"`
		}
		require.NoError(t, json.Unmarshal(h.body, &body))
		require.Equal(t, body.ID, h.header.Get("webhook-id"), "a request carries its event's id as webhook-id")
		require.True(t, want[body.ID], "only published events")
		per[body.ID]++
	}
	require.Len(t, per, len(all), "every event reached the endpoint after the kill")
	fmt.Printf("TestKilledWorkerMidRetryLosesNothing: %d events, %d requests answered 503 before the kill, %d after it (%d beyond one per event, same webhook-id)\n",
		len(all), failed, len(rc.got())-failed, len(rc.got())-failed-len(all))
}
