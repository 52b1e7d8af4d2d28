package ingest

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/cdc"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/campaign"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/pgpool"
	"github.com/heraldhq/herald/internal/stacktest"
)

// BenchmarkCampaignExpansion measures the expansion rate, in deliveries per second, of a
// campaign by segment over HERALD_BENCH_CAMPAIGN_USERS users (default 1,000,000) on one
// channel, with the CDC relay streaming the new rows to Kafka at the same time (unless
// HERALD_BENCH_RELAY=0). One expander works as one ingest process does, lot after lot. Run:
//
//	go test -run '^$' -bench BenchmarkCampaignExpansion -benchtime 1x -timeout 30m ./ingest
func BenchmarkCampaignExpansion(b *testing.B) {
	ctx := context.Background()
	unrecorded(b)
	users := 1_000_000
	if s := os.Getenv("HERALD_BENCH_CAMPAIGN_USERS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(b, err)
		users = n
	}
	dbURL := stacktest.PostgresURL(b)
	pool, err := pgpool.New(ctx, dbURL, 0)
	require.NoError(b, err)
	defer pool.Close()
	client, err := apikey.CreateAPIClient(ctx, pool, "bench", apikey.AllScopes())
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `INSERT INTO template (name, category, channels) VALUES ('promo', 'marketing', '{SMS}')`)
	require.NoError(b, err)
	// Every user has a phone and the tag; one in ten has preferences, so that the rules run
	// on both kinds of users.
	_, err = pool.Exec(ctx, `
INSERT INTO user_contact (user_id, phone, tags)
SELECT g, '+1555' || lpad(g::text, 9, '0'), ARRAY['all'] FROM generate_series(1, $1::int) AS g`, users)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `
INSERT INTO user_preference (user_id, opt_outs)
SELECT g, '[{"channel":"EMAIL"}]' FROM generate_series(10, $1::int, 10) AS g`, users)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `VACUUM ANALYZE user_contact, user_preference`)
	require.NoError(b, err)

	if os.Getenv("HERALD_BENCH_RELAY") != "0" {
		stopRelay := startBenchRelay(b, dbURL)
		defer stopRelay()
	}
	x, err := campaign.NewExpander(campaign.ExpanderConfig{}, pool, zap.NewNop())
	require.NoError(b, err)
	api, err := New(Config{}, pool, zap.NewNop())
	require.NoError(b, err)

	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		in := &campaignInput{Name: "bench", Template: "promo", Channels: []herald.Channel{herald.ChannelSMS},
			Priority: herald.PriorityLow, Payload: []byte("{}"), Segment: &segmentInput{Tags: []string{"all"}}, Start: true}
		started := time.Now()
		resp, _, err := api.createCampaign(ctx, client.ID, "bench-"+strconv.Itoa(i), in)
		require.NoError(b, err)
		for {
			worked, _, err := x.ExpandLot(ctx)
			require.NoError(b, err)
			if !worked {
				break
			}
		}
		total += time.Since(started)
		var expanded int64
		var status string
		require.NoError(b, pool.QueryRow(ctx, `SELECT expanded, status FROM campaign WHERE id = $1`, resp.ID).Scan(&expanded, &status))
		require.Equal(b, int64(users), expanded)
		require.Equal(b, string(herald.CampaignActive), status)
	}
	b.StopTimer()
	rate := float64(users*b.N) / total.Seconds()
	b.ReportMetric(rate, "deliveries/s")
	b.Logf("%d users x 1 channel x %d campaigns expanded in %s: %.0f deliveries/s", users, b.N, total.Round(time.Millisecond), rate)

	// The same rows written by bare SQL in the same run, in lots of 1,000 per transaction
	// committed as a lot commits (synchronous_commit off), UUIDv7 ids made in Go: no read, no
	// rules, no per-user answer. What PostgreSQL alone takes for them on this machine at this
	// moment; the expander's rate is read against it.
	started := time.Now()
	for lot := 0; lot < users/1000; lot++ {
		nids, dids, gs := make([]uuid.UUID, 1000), make([]uuid.UUID, 1000), make([]int32, 1000)
		for i := range nids {
			nids[i], dids[i], gs[i] = uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()), int32(lot*1000+i+1)
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, benchBaselineLot, client.ID, nids, dids, gs)
			return err
		})
		require.NoError(b, err)
	}
	base := float64(users/1000*1000) / time.Since(started).Seconds()
	b.ReportMetric(base, "baseline-rows/s")
	b.Logf("baseline, bare INSERT ... SELECT of the same rows in lots of 1,000: %.0f deliveries/s (expander %.2f of it)", base, rate/base)
}

// benchBaselineLot writes 1,000 notifications and their deliveries in the shape InsertLot
// writes them.
const benchBaselineLot = `
WITH u AS (SELECT * FROM unnest($2::uuid[], $3::uuid[], $4::int[]) AS u (nid, did, g)),
k AS (
    INSERT INTO idempotency_key (client_id, idempotency_key, notification_id, request_hash)
    SELECT $1, 'baseline-' || u.g, u.nid, decode('00', 'hex') FROM u
    ON CONFLICT (client_id, idempotency_key) DO NOTHING
    RETURNING notification_id
),
n AS (
    INSERT INTO notification (id, client_id, idempotency_key, request_hash, user_id, template,
                              category, payload, priority, response)
    SELECT u.nid, $1, 'baseline-' || u.g, decode('00', 'hex'), u.g, 'promo', 'marketing', '{}', 'LOW',
           '{"id": "x", "deliveries": [], "suppressed": []}'
    FROM u JOIN k ON k.notification_id = u.nid
    RETURNING id, priority, expires_at
)
INSERT INTO delivery (id, notification_id, channel, priority, expires_at)
SELECT u.did, n.id, 'SMS', n.priority, n.expires_at FROM n JOIN u ON u.nid = n.id`

// startBenchRelay runs the CDC relay on the benchmark's database with topics of its own.
func startBenchRelay(b *testing.B, dbURL string) func() {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	relayPool, err := pgpool.New(ctx, dbURL, 0)
	require.NoError(b, err)
	topics := stacktest.KafkaTopics(b, map[string]int32{"high": 12, "normal": 6, "low": 2})
	kcl, err := kgo.NewClient(kgo.SeedBrokers(stacktest.KafkaBrokers(b)...), kgo.ProducerLinger(0))
	require.NoError(b, err)
	slot := stacktest.Name("bench")
	relay, err := cdc.New(cdc.Config{Slot: slot, Publication: slot, Topics: map[herald.Priority]string{
		herald.PriorityHigh: topics["high"], herald.PriorityNormal: topics["normal"], herald.PriorityLow: topics["low"],
	}}, relayPool, kcl, zap.NewNop())
	require.NoError(b, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = relay.Run(ctx)
	}()
	heraldtest.WaitFor(b, time.Minute, "the relay streaming", func() bool {
		var streaming bool
		require.NoError(b, relayPool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_replication r
			JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1 AND r.state = 'streaming')`, slot).Scan(&streaming))
		return streaming
	})
	return func() {
		cancel()
		wg.Wait()
		kcl.Close()
		relayPool.Close()
	}
}
