package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// A HIGH-only dispatcher (Config.Run) is ready on its own lane alone, and beside a NORMAL and
// LOW one on the same groups each process takes its own priorities' deliveries and no other:
// every delivery is sent once, by the process that runs its lane.
func TestHighOnlyDispatcherBesideANormalAndLowOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	highCfg, restCfg := e.config(), e.config()
	restCfg.Lanes = highCfg.Lanes // the same groups: two processes of one deployment
	highCfg.Run = []herald.Priority{herald.PriorityHigh}
	restCfg.Run = []herald.Priority{herald.PriorityNormal, herald.PriorityLow}
	highSender, restSender := &MemorySender{}, &MemorySender{}

	// The HIGH dispatcher is ready with nobody consuming NORMAL or LOW.
	high := e.start(highCfg, nil, smsOnly(highSender))
	heraldtest.WaitFor(t, time.Minute, "HIGH-only dispatcher ready", func() bool { return high.Ready(ctx) == nil })
	rest := e.start(restCfg, nil, smsOnly(restSender))
	heraldtest.WaitFor(t, time.Minute, "NORMAL and LOW dispatcher ready", func() bool { return rest.Ready(ctx) == nil })

	byPrio := map[herald.Priority][]string{}
	var all []string
	for _, p := range herald.Priorities {
		byPrio[p] = e.insertN(5, fixture{Channel: herald.ChannelSMS, Priority: p})
		all = append(all, byPrio[p]...)
	}
	e.publish(all...)
	e.waitStatus(time.Minute, []herald.Status{herald.StatusSent}, all...)

	for _, c := range highSender.Calls() {
		require.Equal(t, herald.PriorityHigh, c.Message.Priority, "the HIGH-only dispatcher sent delivery %s", c.Message.DeliveryID)
	}
	for _, c := range restSender.Calls() {
		require.NotEqual(t, herald.PriorityHigh, c.Message.Priority, "the NORMAL and LOW dispatcher sent HIGH delivery %s", c.Message.DeliveryID)
	}
	require.Len(t, highSender.Calls(), len(byPrio[herald.PriorityHigh]))
	require.Len(t, restSender.Calls(), len(byPrio[herald.PriorityNormal])+len(byPrio[herald.PriorityLow]))
	for _, id := range all {
		require.Equal(t, 1, highSender.CallCount(id)+restSender.CallCount(id), "delivery %s", id)
	}
}
