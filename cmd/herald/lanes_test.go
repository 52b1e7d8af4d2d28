package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// --lanes (HERALD_LANES) names the lanes dispatch runs: every priority by default, and a
// name that is no priority, or one named twice, is refused.
func TestServeLanesFlag(t *testing.T) {
	parse := func(args ...string) ([]herald.Priority, error) {
		var c serveConfig
		f := newFlags("serve")
		c.register(f)
		require.NoError(t, f.Parse(args))
		dc, err := c.Dispatch.config(c.Topics, []string{"b:9092"}, time.Second)
		return dc.Run, err
	}
	run, err := parse()
	require.NoError(t, err)
	require.Equal(t, herald.Priorities, run)
	run, err = parse("--lanes", "HIGH")
	require.NoError(t, err)
	require.Equal(t, []herald.Priority{herald.PriorityHigh}, run)
	t.Setenv("HERALD_LANES", "NORMAL,LOW")
	run, err = parse()
	require.NoError(t, err)
	require.Equal(t, []herald.Priority{herald.PriorityNormal, herald.PriorityLow}, run)
	for _, bad := range []string{"URGENT", "HIGH,HIGH", ","} {
		_, err = parse("--lanes", bad)
		require.Error(t, err, "--lanes %q", bad)
	}
}

// A HIGH-only dispatcher, `herald serve --roles dispatch --lanes HIGH`, is ready once its
// HIGH lane has its assignment, joins no NORMAL or LOW group, and sends the OTPs that a
// process with the API and the relay accepts.
func TestHighOnlyDispatchProcess(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	key := st.apiKey(t)
	sm := startSim(t)
	api, high := heraldtest.FreeAddr(t), heraldtest.FreeAddr(t)
	st.serve(t, "api-relay", api, sm, "--roles", "ingest,relay", "--templates-dir", templatesDir(t))
	st.serve(t, "high-dispatch", high, sm, "--roles", "dispatch", "--lanes", "HIGH")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(mustClient(t))
	for prio, members := range map[string]int{"high": 1, "normal": 0, "low": 0} {
		group := arg(st.args, "--dispatch-group-"+prio)
		described, err := adm.DescribeGroups(ctx, group)
		require.NoError(t, err)
		require.Len(t, described[group].Members, members, "members of group %s", group)
	}
	ids := []string{postOTP(t, api, key, 1), postOTP(t, api, key, 2)}
	waitSent(t, st.dsn, ids)
}
