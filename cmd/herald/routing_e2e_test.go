package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/senders/sim"
)

// TestEndToEndSMSFailoverToVonage runs SMS routed between the simulator's Twilio (weight
// 100) and Vonage (standby) over their real protocols while Twilio answers 503 to every call.
// Twilio's 503 is ambiguous (the message may have been accepted), so HIGH moves to Vonage
// and is delivered there once, while NORMAL stays on Twilio, as its policy says, and goes out
// there once Twilio heals; Twilio's probes then bring SMS back to it.
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
	waitFor(t, 60*time.Second, "every HIGH SMS sent", func() bool {
		sent, _ := byPrio("HIGH")
		return sent == len(outage)/2
	})
	_, final := byPrio("NORMAL")
	require.Zero(t, final, "NORMAL waits for Twilio")
	e.sim.setFaults(t, sim.Twilio, `{}`)
	c := e.waitAllFinal(t, len(outage), 60*time.Second)
	require.Equal(t, map[string]int{"SENT": len(outage)}, c)
	got := delivered(e.sim.records(t))
	for _, d := range outage {
		want := sim.Vonage
		if e.priorityOf(t, d.ID) == "NORMAL" {
			want = sim.Twilio
		}
		require.Equal(t, 1, got[want][d.ID]+got[otherSMS(want)][d.ID], "delivery %s delivered once", d.ID)
		require.Equal(t, 1, got[want][d.ID], "delivery %s by %s", d.ID, want)
	}

	n := 0
	before := len(got[sim.Twilio])
	waitFor(t, 60*time.Second, "Twilio to take HIGH SMS again", func() bool {
		n++
		e.post(t, "after-"+time.Now().Format("150405.000"), 4, 3, "SMS")
		return len(delivered(e.sim.records(t))[sim.Twilio]) >= before+4
	})
	t.Logf("Twilio takes SMS again after %d rounds of 4 notifications", n)
}

func otherSMS(p string) string {
	if p == sim.Twilio {
		return sim.Vonage
	}
	return sim.Twilio
}

func (e *e2e) priorityOf(t *testing.T, id string) string {
	var p string
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT priority FROM delivery WHERE id = $1`, id).Scan(&p))
	return p
}
