package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/senders/sim"
)

// TestEndToEndSMSFailoverToVonage runs SMS routed between the simulator's Twilio (weight
// 100) and Vonage (standby) over their real protocols while Twilio answers 503 to every call.
// Twilio's 503 is ambiguous (the message may have been accepted), so HIGH moves to Vonage
// and is delivered there once, while a NORMAL delivery that met Twilio stays there, as its
// policy says, and goes out once Twilio heals (NORMAL first attempts after Twilio stepped
// down go to Vonage); Twilio's probes then bring SMS back to it.
func TestEndToEndSMSFailoverToVonage(t *testing.T) {
	t.Parallel()
	e := newE2EWith(t, 3, []string{"--sms-providers", "twilio=100,vonage=0", "--route-min-failures", "3",
		"--route-step-interval", "100ms", "--route-probe-interval", "500ms", "--retry-max-attempts", "500"})
	e.sim.setFaults(t, sim.Twilio, `{"unavailable": 1}`)
	outage := e.post(t, "outage", 20, 3, "SMS") // HIGH and NORMAL in turn
	byPrio := func(prio string) (sent, final int) {
		require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status = 'SENT'),
			count(*) FILTER (WHERE status IN ('SENT', 'FAILED', 'EXPIRED')) FROM delivery WHERE priority = $1`, prio).Scan(&sent, &final))
		return sent, final
	}
	heraldtest.WaitFor(t, 60*time.Second, "every HIGH SMS sent", func() bool {
		sent, _ := byPrio("HIGH")
		return sent == len(outage)/2
	})
	e.sim.setFaults(t, sim.Twilio, `{}`)
	c := e.waitAllFinal(t, len(outage), 60*time.Second)
	require.Equal(t, map[string]int{"SENT": len(outage)}, c)
	got := delivered(e.sim.records(t))
	for _, d := range outage {
		require.Equal(t, 1, got[sim.Twilio][d.ID]+got[sim.Vonage][d.ID], "delivery %s delivered once", d.ID)
		prio := e.priorityOf(t, d.ID)
		if prio == "HIGH" {
			require.Equal(t, 1, got[sim.Vonage][d.ID], "HIGH delivery %s by Vonage", d.ID)
		}
		// NORMAL: once an attempt was ambiguous at Twilio, every later one stays there.
		pinned := false
		for _, a := range e.attemptsOf(t, d.ID) {
			if pinned {
				require.Equal(t, "sms:twilio", a[1], "NORMAL delivery %s left Twilio after an ambiguous outcome", d.ID)
			}
			pinned = pinned || (prio == "NORMAL" && a[0] == "AMBIGUOUS" && a[1] == "sms:twilio")
		}
	}

	n := 0
	before := len(got[sim.Twilio])
	heraldtest.WaitFor(t, 60*time.Second, "Twilio to take HIGH SMS again", func() bool {
		n++
		e.post(t, "after-"+time.Now().Format("150405.000"), 4, 3, "SMS")
		return len(delivered(e.sim.records(t))[sim.Twilio]) >= before+4
	})
	t.Logf("Twilio takes SMS again after %d rounds of 4 notifications", n)
}

// attemptsOf returns the outcome and provider account of each attempt of delivery id.
func (e *e2e) attemptsOf(t *testing.T, id string) [][2]string {
	rows, err := e.pool.Query(context.Background(), `SELECT outcome, coalesce(provider, '') FROM delivery_attempt
		WHERE delivery_id = $1 ORDER BY attempt`, id)
	require.NoError(t, err)
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var a [2]string
		require.NoError(t, rows.Scan(&a[0], &a[1]))
		out = append(out, a)
	}
	require.NoError(t, rows.Err())
	return out
}

func (e *e2e) priorityOf(t *testing.T, id string) string {
	var p string
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT priority FROM delivery WHERE id = $1`, id).Scan(&p))
	return p
}
