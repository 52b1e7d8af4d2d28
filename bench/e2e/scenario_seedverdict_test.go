package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// seedVerdict is what the seed-load figures say about the machine: whether the API held the
// steady rate and the burst, whether delivery kept up, what HIGH got.
type seedVerdict struct {
	steadyRate, steadyShare, steadyP99 float64
	burstRate                          float64
	burstOffered, burstAccepted        int
	peakAccepted, burstP99             float64
	refusals                           string
	acceptedPerS, sentPerS             float64
	campaign                           int
	maxBacklog                         float64
	drained                            bool
	drainTime, drainCap                time.Duration
	left                               int64
	sentRate, peakSent                 float64
	highP50, highP99, highBurstP99     float64
	highBurst, highUnsent              int
	poolConns                          int32
	maxPoolWait                        float64 // ms, the worst second's mean
	// The burst's POSTs the generator could not send (every worker busy), and herald's
	// answer time of the NORMAL POSTs it did send against the bound the admission wait sets.
	burstUnsent                int
	answerP99, answerTargetP99 float64 // ms
}

func (v seedVerdict) notes() []string {
	var out []string
	if v.steadyShare >= 0.99 && v.steadyP99 <= 1000 {
		out = append(out, fmt.Sprintf("The API held the steady %.0f POST/s: %.1f %% accepted, p99 %.0f ms from the due time.",
			v.steadyRate, 100*v.steadyShare, v.steadyP99))
	} else {
		out = append(out, fmt.Sprintf("The API did not hold the steady %.0f POST/s: %.1f %% accepted, p99 %.0f ms from the "+
			"due time; at most %.0f POSTs were accepted in any second.", v.steadyRate, 100*v.steadyShare, v.steadyP99, v.peakAccepted))
	}
	burstShare := float64(v.burstAccepted) / float64(max(v.burstOffered, 1))
	if burstShare >= 0.99 && v.burstP99 <= 1000 {
		out = append(out, fmt.Sprintf("The burst of %d POSTs at %.0f/s was absorbed: %.1f %% accepted, p99 %.0f ms.",
			v.burstOffered, v.burstRate, 100*burstShare, v.burstP99))
	} else {
		out = append(out, fmt.Sprintf("The burst saturated the API: %d of %d POSTs offered at %.0f/s accepted (%.1f %%), "+
			"answer p99 %.0f ms; the most accepted in one second was %.0f, about what this machine takes; refused over the run: %s.",
			v.burstAccepted, v.burstOffered, v.burstRate, 100*burstShare, v.burstP99, v.peakAccepted, v.refusals))
	}
	switch {
	case v.drained && v.sentPerS >= 0.95*v.acceptedPerS:
		out = append(out, fmt.Sprintf("Delivery kept up: %.0f provider calls/s during the load against %.0f accepted POST/s "+
			"(plus the campaign's %d); the backlog peaked at %.0f and drained %s after the load.",
			v.sentPerS, v.acceptedPerS, v.campaign, v.maxBacklog, v.drainTime.Round(time.Millisecond)))
	case v.drained:
		out = append(out, fmt.Sprintf("Delivery fell behind during the load (%.0f provider calls/s against %.0f accepted "+
			"POST/s plus the campaign's %d; backlog peak %.0f) and caught up %s after it.",
			v.sentPerS, v.acceptedPerS, v.campaign, v.maxBacklog, v.drainTime.Round(time.Millisecond)))
	default:
		out = append(out, fmt.Sprintf("Delivery saturated: %.0f provider calls/s during the load (peak %.0f/s) against %.0f "+
			"accepted POST/s plus the campaign's %d; the backlog peaked at %.0f and %d deliveries still waited %s after the load; "+
			"at the run's mean of %.0f calls/s they take about %s more.", v.sentPerS, v.peakSent, v.acceptedPerS, v.campaign,
			v.maxBacklog, v.left, v.drainCap, v.sentRate, time.Duration(float64(v.left)/max(v.sentRate, 1)*float64(time.Second)).Round(time.Second)))
	}
	if v.burstUnsent > 0 {
		out = append(out, fmt.Sprintf("The generator could not send %d of the burst's POSTs on time (every worker busy): "+
			"herald never saw them, and they are not counted as refused.", v.burstUnsent))
	}
	if v.answerP99 <= v.answerTargetP99 {
		out = append(out, fmt.Sprintf("Every NORMAL POST was answered in time: sent → answer p99 %.0f ms (bound %.0f ms, the admission wait + 100 ms).",
			v.answerP99, v.answerTargetP99))
	} else {
		out = append(out, fmt.Sprintf("NORMAL POSTs were not all answered in time: sent → answer p99 %.0f ms, above the bound of %.0f ms "+
			"(the admission wait + 100 ms).", v.answerP99, v.answerTargetP99))
	}
	if v.maxPoolWait >= 100 {
		out = append(out, fmt.Sprintf("The API's PostgreSQL pool (%d connections) ran out: in the "+
			"worst second an acquire waited %.0f ms on average, so POSTs queued for a connection.",
			v.poolConns, v.maxPoolWait))
	}
	verdict := "meets"
	if v.highP99 > 200 { // the seed load's HIGH target (docs/benchmarks.md "Targets")
		verdict = "misses"
	}
	during := fmt.Sprintf("p99 %.1f ms during the burst", v.highBurstP99)
	if v.highBurst == 0 {
		during = "no HIGH POST due during the burst was accepted"
	}
	out = append(out, fmt.Sprintf("HIGH OTPs: p50 %.1f ms, p99 %.1f ms over the run (%s p99 ≤ 200 ms); %s; %d not sent by the end.",
		v.highP50, v.highP99, verdict, during, v.highUnsent))
	return out
}

func TestSeedVerdictSaysWhereItSaturates(t *testing.T) {
	held := seedVerdict{steadyRate: 600, steadyShare: 1, steadyP99: 30, burstRate: 20000, burstOffered: 1000,
		burstAccepted: 1000, peakAccepted: 900, burstP99: 400, acceptedPerS: 650, sentPerS: 640, campaign: 2000,
		maxBacklog: 300, drained: true, drainTime: 2 * time.Second, highP50: 4, highP99: 15, answerP99: 120, answerTargetP99: 600}
	got := strings.Join(held.notes(), "\n")
	require.Contains(t, got, "The API held the steady 600 POST/s")
	require.Contains(t, got, "was absorbed")
	require.Contains(t, got, "Delivery kept up")
	require.NotContains(t, got, "pool")
	require.NotContains(t, got, "could not send")
	require.Contains(t, got, "answered in time: sent → answer p99 120 ms (bound 600 ms")
	require.Contains(t, got, "(meets p99 ≤ 200 ms); no HIGH POST due during the burst was accepted")

	saturated := held
	saturated.steadyShare, saturated.steadyP99 = 0.78, 9000
	saturated.burstAccepted, saturated.burstP99, saturated.refusals = 117, 10000, "883 timeout"
	saturated.sentPerS, saturated.drained, saturated.left, saturated.sentRate = 110, false, 20587, 109
	saturated.poolConns, saturated.maxPoolWait = 48, 850
	saturated.burstUnsent, saturated.answerP99 = 5000, 2500
	saturated.drainCap, saturated.highP99, saturated.highBurst, saturated.highBurstP99 = 15*time.Second, 16000, 4, 14639.1
	got = strings.Join(saturated.notes(), "\n")
	require.Contains(t, got, "did not hold the steady 600 POST/s: 78.0 % accepted")
	require.Contains(t, got, "The burst saturated the API: 117 of 1000")
	require.Contains(t, got, "Delivery saturated: 110 provider calls/s")
	require.Contains(t, got, "about 3m9s more")
	require.Contains(t, got, "could not send 5000 of the burst's POSTs")
	require.Contains(t, got, "not all answered in time: sent → answer p99 2500 ms, above the bound of 600 ms")
	require.Contains(t, got, "(48 connections) ran out: in the worst second an acquire waited 850 ms")
	require.Contains(t, got, "(misses p99 ≤ 200 ms); p99 14639.1 ms during the burst")
}
