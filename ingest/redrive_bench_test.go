package ingest

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/campaign"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/pgpool"
	"github.com/heraldhq/herald/internal/redrive"
	"github.com/heraldhq/herald/internal/stacktest"
)

// BenchmarkRedrive measures the re-drive executor's rate, in deliveries re-armed per second,
// beside the campaign expander's rate in the same run on the same database: first a campaign
// over HERALD_BENCH_REDRIVE_N users (default 100,000) on one channel is expanded lot by lot,
// then as many FAILED deliveries (each with its TRANSIENT attempt row) are re-driven by one
// executor. Both unpaced, lots of 1,000, no relay: the lot rates alone. Run:
//
//	go test -run '^$' -bench BenchmarkRedrive -benchtime 1x -timeout 30m ./ingest
func BenchmarkRedrive(b *testing.B) {
	ctx := context.Background()
	unrecorded(b)
	n := 100_000
	if s := os.Getenv("HERALD_BENCH_REDRIVE_N"); s != "" {
		v, err := strconv.Atoi(s)
		require.NoError(b, err)
		n = v
	}
	pool, err := pgpool.New(ctx, stacktest.PostgresURL(b), 0)
	require.NoError(b, err)
	defer pool.Close()
	client, err := apikey.CreateAPIClient(ctx, pool, "bench", apikey.AllScopes())
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `INSERT INTO template (name, category, channels) VALUES ('promo', 'marketing', '{SMS}')`)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `
INSERT INTO user_contact (user_id, phone, tags)
SELECT g, '+1555' || lpad(g::text, 9, '0'), ARRAY['all'] FROM generate_series(1, $1::int) AS g`, n)
	require.NoError(b, err)

	// The FAILED deliveries: one through the real insert, the rest cloned from it, and the
	// attempt row each would have (the lot reads the last attempt's class).
	deliverytest.Backlog(b, pool, n, deliverytest.Spec{ClientID: client.ID, Status: herald.StatusFailed, Attempts: 1, Priority: herald.PriorityLow})
	_, err = pool.Exec(ctx, `INSERT INTO delivery_attempt (delivery_id, attempt, started_at, outcome, provider, provider_code)
SELECT id, 1, now(), 'TRANSIENT', 'sms:twilio', '503' FROM delivery WHERE status = 'FAILED'`)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `VACUUM ANALYZE user_contact, delivery, delivery_attempt, notification`)
	require.NoError(b, err)

	x, err := campaign.NewExpander(campaign.ExpanderConfig{Rate: -1}, pool, zap.NewNop())
	require.NoError(b, err)
	api, err := New(Config{}, pool, zap.NewNop())
	require.NoError(b, err)
	rx, err := redrive.New(redrive.Config{Rate: -1, PollInterval: 5 * time.Millisecond}, pool, zap.NewNop())
	require.NoError(b, err)

	b.ResetTimer()
	var expandTook, redriveTook time.Duration
	for i := 0; i < b.N; i++ {
		in := &campaignInput{Name: "bench", Template: "promo", Channels: []herald.Channel{herald.ChannelSMS},
			Priority: herald.PriorityLow, Payload: []byte("{}"), Segment: &segmentInput{Tags: []string{"all"}}, Start: true}
		started := time.Now()
		_, _, err := api.createCampaign(ctx, client.ID, "bench-"+strconv.Itoa(i), in)
		require.NoError(b, err)
		for {
			worked, _, err := x.ExpandLot(ctx)
			require.NoError(b, err)
			if !worked {
				break
			}
		}
		expandTook += time.Since(started)

		started = time.Now()
		ans, _, err := redrive.Create(ctx, pool, client.ID, "bench-"+strconv.Itoa(i),
			redrive.Request{Filter: redrive.Filter{Status: []herald.Status{herald.StatusFailed}, ErrorCode: "503"}}, 0)
		require.NoError(b, err)
		require.Equal(b, int64(n), ans.Matched)
		counted := time.Since(started)
		id := ans.ID
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- rx.Run(rctx) }()
		for {
			var status string
			require.NoError(b, pool.QueryRow(ctx, `SELECT status FROM redrive WHERE id = $1`, id).Scan(&status))
			if status == redrive.StatusDone {
				break
			}
			time.Sleep(5 * time.Millisecond) // polling a condition; the executor works meanwhile
		}
		redriveTook += time.Since(started)
		b.Logf("re-drive: count and write %s, lots %s", counted.Round(time.Millisecond), (time.Since(started) - counted).Round(time.Millisecond))
		cancel()
		require.NoError(b, <-done)
		var armed int
		require.NoError(b, pool.QueryRow(ctx, `SELECT count(*) FROM delivery WHERE redrive_id = $1 AND status = 'PENDING'`, id).Scan(&armed))
		require.Equal(b, n, armed)
		// The next iteration re-drives the same rows: put them back.
		if i+1 < b.N {
			b.StopTimer()
			_, err = pool.Exec(ctx, `UPDATE delivery SET status = 'FAILED' WHERE redrive_id = $1`, id)
			require.NoError(b, err)
			b.StartTimer()
		}
	}
	b.StopTimer()
	expand := float64(n*b.N) / expandTook.Seconds()
	rearm := float64(n*b.N) / redriveTook.Seconds()
	b.ReportMetric(expand, "campaign-deliveries/s")
	b.ReportMetric(rearm, "redriven/s")
	b.Logf("%d deliveries x %d: campaign expanded in %s (%.0f deliveries/s), re-drive (count + lots) in %s (%.0f re-armed/s, %.2f of the expander)",
		n, b.N, expandTook.Round(time.Millisecond), expand, redriveTook.Round(time.Millisecond), rearm, rearm/expand)
}
