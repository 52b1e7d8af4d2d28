package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/cdc"
	"github.com/heraldhq/herald/dispatch"
)

func TestGroupFlagsReachRelayAndDispatch(t *testing.T) {
	t.Setenv("HERALD_DISPATCH_GROUP_LOW", "env-low")
	var g groupFlags
	f := newFlags("serve")
	g.register(f)
	require.NoError(t, f.Parse([]string{"--dispatch-group-high", "g-high", "--redis-prefix", "p:", "--kafka-session-timeout", "6s"}))

	var d dispatch.Config
	g.applyDispatch(&d)
	require.Equal(t, "g-high", d.Lanes[herald.PriorityHigh].Group)
	require.Equal(t, "herald-dispatch-normal", d.Lanes[herald.PriorityNormal].Group)
	require.Equal(t, "env-low", d.Lanes[herald.PriorityLow].Group)
	require.Equal(t, "p:", d.RedisPrefix)
	require.Len(t, d.ClientOptions, 1)
	require.Equal(t, 6*time.Second, g.sessionTimeout)

	var r cdc.Config
	g.applyRelay(&r)
	require.Equal(t, map[herald.Priority]string{herald.PriorityHigh: "g-high",
		herald.PriorityNormal: "herald-dispatch-normal", herald.PriorityLow: "env-low"}, r.ConsumerGroups)
}
