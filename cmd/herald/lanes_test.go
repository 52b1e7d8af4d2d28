package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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

// --ingest-priorities (HERALD_INGEST_PRIORITIES) names the priorities the API accepts: every
// one by default; HIGH alone makes the process an OTP pool's; a name that is no priority, one
// named twice, or none at all is refused with the flag's name.
func TestServeIngestPrioritiesFlag(t *testing.T) {
	parse := func(args ...string) (serveConfig, error) { return parseServe(t, args...) }
	c, err := parse()
	require.NoError(t, err)
	require.Equal(t, herald.Priorities, c.Ingest.Priorities)
	require.False(t, c.Ingest.HighOnly())
	c, err = parse("--ingest-priorities", "HIGH")
	require.NoError(t, err)
	require.True(t, c.Ingest.HighOnly())
	t.Setenv("HERALD_INGEST_PRIORITIES", "NORMAL,LOW")
	c, err = parse()
	require.NoError(t, err)
	require.Equal(t, []herald.Priority{herald.PriorityNormal, herald.PriorityLow}, c.Ingest.Priorities)
	for _, bad := range []string{"URGENT", "HIGH,HIGH", ","} {
		_, err = parse("--ingest-priorities", bad)
		require.ErrorContains(t, err, "--ingest-priorities", "%q", bad)
	}
}

// An OTP pool, `herald serve --roles ingest,dispatch --lanes HIGH --ingest-priorities HIGH`,
// beside a process that runs the rest: the pool accepts and sends the OTPs posted to it,
// refuses a NORMAL notification (422 priority_not_accepted, nothing written) and runs no
// campaign expander and no re-drive executor, which the other process runs.
func TestOTPPoolProcess(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	key := st.apiKey(t)
	sm := startSim(t)
	main, pool := heraldtest.FreeAddr(t), heraldtest.FreeAddr(t)
	rest := st.serve(t, "rest", main, sm, "--roles", "ingest,relay,dispatch", "--lanes", "NORMAL,LOW", "--templates-dir", templatesDir(t))
	otp := st.serve(t, "otp-pool", pool, sm, "--roles", "ingest,dispatch", "--lanes", "HIGH", "--ingest-priorities", "HIGH")

	ids := []string{postOTP(t, pool, key, 1), postOTP(t, pool, key, 2)}
	waitSent(t, st.dsn, ids)

	normal := strings.Replace(fmt.Sprintf(smsOTP, 3), `"HIGH"`, `"NORMAL"`, 1)
	status, b, err := tryJSON(context.Background(), http.MethodPost, "http://"+pool+"/api/notifications", key, "normal-3", normal)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, status, "%s", b)
	require.Contains(t, string(b), `"priority_not_accepted"`)
	db, err := pgxpool.New(context.Background(), st.dsn)
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_key WHERE idempotency_key = 'normal-3'`).Scan(&n))
	require.Zero(t, n, "the refused request wrote nothing")
	status, b, err = tryJSON(context.Background(), http.MethodPost, "http://"+main+"/api/notifications", key, "normal-3", normal)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status, "the other process accepts it: %s", b)

	started := func(p *proc) []string {
		raw, err := os.ReadFile(p.log)
		require.NoError(t, err)
		for _, line := range strings.Split(string(raw), "\n") {
			var l struct {
				Msg        string   `json:"msg"`
				Components []string `json:"components"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "herald started" {
				return l.Components
			}
		}
		t.Fatalf("herald %s logged no start", p.name)
		return nil
	}
	require.NotContains(t, started(otp), "campaign expander")
	require.NotContains(t, started(otp), "re-drive executor")
	require.Contains(t, started(otp), "dispatch")
	require.Subset(t, started(rest), []string{"campaign expander", "re-drive executor", "relay", "dispatch"})

	// Each pool's sessions are named after their work (application_name): the pools of HIGH's
	// accepts and of the other POSTs' apart from the main pool, dispatch's, the relay's and the
	// expander's.
	var names []string
	require.NoError(t, db.QueryRow(context.Background(), `SELECT array_agg(DISTINCT application_name)
		FROM pg_stat_activity WHERE datname = current_database()`).Scan(&names))
	require.Subset(t, names, []string{"herald", "herald-accept", "herald-high", "herald-dispatch", "herald-relay", "herald-expander"})
}
