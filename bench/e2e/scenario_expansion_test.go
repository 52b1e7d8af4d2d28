package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// BenchmarkScenarioExpansion is the suite's expansion scenario: a LOW campaign by segment
// (POST /api/campaigns) expanded by the in-process expander unpaced (--campaign-rate -1), lot
// after lot of 1,000 users, each lot one transaction; then, in the same run, the same number
// of rows written by COPY (idempotency keys, notifications, deliveries) in transactions of
// 1,000 users committed as a lot commits (synchronous_commit off): what PostgreSQL takes to
// store those rows at its fastest, with no read, no rules and no answer per user. The relay
// streams through both, and no dispatch lane runs, so that both phases write the same rows
// beside the same work. The expander's rate runs from the campaign's creation to its last
// lot's commit (the campaign row's created_at and updated_at), COPY's from its first
// transaction's start to its last commit.
//
//	go test -run '^$' -bench ScenarioExpansion -benchtime 1x -timeout 10m ./bench/e2e
func BenchmarkScenarioExpansion(b *testing.B) {
	const lot = 1000
	n := result.Scaled(200_000, 2000) / lot * lot
	r := result.New("expansion", "campaign expansion unpaced against COPY of the same rows")
	r.Load = fmt.Sprintf("a LOW SMS campaign by segment of %d users (POST /api/campaigns), expanded unpaced by the "+
		"in-process expander in lots of %d; then COPY of as many idempotency keys, notifications and deliveries in "+
		"transactions of %d; the relay streaming, no dispatch lane", n, lot, lot)
	s := startStack(b, options{poolConns: 8, expander: true, campaignRate: -1, dispatchOff: true})
	ctx := context.Background()
	s.addUsers(b, n)
	s.settle(b)
	loadBefore := result.LoadAverage()

	b.ResetTimer()
	id, err := s.startCampaign("expansion", herald.PriorityLow)
	heraldtest.Must(b, err)
	heraldtest.WaitForEvery(b, 10*time.Minute, 50*time.Millisecond, "the campaign expanded", func() bool {
		status, _, err := s.campaignState(ctx, id)
		heraldtest.Must(b, err)
		return status != string(herald.CampaignExpanding)
	})
	var expanded int64
	var created, lastLot time.Time
	var client uuid.UUID
	var response []byte
	heraldtest.Must(b, s.pool.QueryRow(ctx, `SELECT c.expanded, c.created_at, c.updated_at, c.client_id,
		(SELECT n.response::text FROM notification n WHERE n.campaign_id = c.id LIMIT 1)
		FROM campaign c WHERE c.id = $1`, id).Scan(&expanded, &created, &lastLot, &client, &response))
	if expanded != int64(n) {
		b.Fatalf("campaign expanded %d of %d users", expanded, n)
	}
	expRate := float64(expanded) / lastLot.Sub(created).Seconds()
	expPer := &result.PerSecond{T0: created}
	rows, err := s.pool.Query(ctx, `SELECT created_at FROM notification WHERE campaign_id = $1`, id)
	heraldtest.Must(b, err)
	for rows.Next() {
		var at time.Time
		heraldtest.Must(b, rows.Scan(&at))
		expPer.Add(at, 1)
	}
	heraldtest.Must(b, rows.Err())
	s.settle(b)

	copyStart := time.Now()
	copyPer := &result.PerSecond{T0: copyStart}
	for from := 0; from < n; from += lot {
		heraldtest.Must(b, copyLot(ctx, s, client, response, from, lot))
		copyPer.Add(time.Now(), lot)
	}
	copyTook := time.Since(copyStart)
	b.StopTimer()
	copyRate := float64(n) / copyTook.Seconds()
	secs := int(max(lastLot.Sub(created), copyTook)/time.Second) + 1
	r.Chart(result.Chart{File: "rows-per-second", Title: "deliveries written per second: the expander unpaced, then COPY of as many",
		Kind: "line", XLabel: "seconds into the phase", YLabel: "deliveries per second",
		Series: []result.Series{expPer.Series("expansion", secs), copyPer.Series("COPY", secs)}})

	r.Add(result.Figure{Name: "expansion, unpaced", Value: expRate, Unit: "deliveries/s", Better: "higher"})
	r.Add(result.Figure{Name: "COPY of the same rows", Value: copyRate, Unit: "deliveries/s", Better: "higher"})
	r.Add(result.Figure{Name: "expansion ÷ COPY", Value: expRate / copyRate, Unit: "ratio", Better: "higher", Target: "≥ 0.8"})
	r.Add(result.Figure{Name: "expansion time", Value: lastLot.Sub(created).Seconds(), Unit: "s", Better: "lower"})
	r.Add(result.Figure{Name: "COPY time", Value: copyTook.Seconds(), Unit: "s", Better: "lower"})
	r.Note("The expander reads each lot's users with their facts, applies the routing rules and writes one answer per " +
		"notification, then the lot's rows in one INSERT … SELECT (delivery.InsertLot) and the campaign's cursor, one " +
		"commit; COPY writes the rows alone, the response column with the bytes of one of the expander's answers.")
	r.Note("Load average before %s, after %s (2 cores, shared with PostgreSQL, Kafka, Redis and the relay).",
		loadBefore, result.LoadAverage())
	b.ReportMetric(expRate, "expanded/s")
	b.ReportMetric(copyRate, "copied/s")
	b.Logf("%d users: expansion %.0f deliveries/s, COPY %.0f rows/s: %.2f of COPY", n, expRate, copyRate, expRate/copyRate)
	heraldtest.Must(b, r.Write())
}

// copyLot writes the rows of users from+1 … from+n as a lot of the expander would (an
// idempotency key, a LOW notification of template bench and one SMS delivery each, UUIDv7
// ids) by COPY, in one transaction committed without waiting for the WAL flush.
func copyLot(ctx context.Context, s *stack, client uuid.UUID, response []byte, from, n int) error {
	keys, notes, dels := make([][]any, n), make([][]any, n), make([][]any, n)
	campaign := uuid.Must(uuid.NewV7())
	hash := []byte{0}
	now := time.Now()
	for i := range n {
		nid, did := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
		user := int64(from + i + 1)
		key := "copy-" + strconv.FormatInt(user, 10)
		keys[i] = []any{client, key, nid, hash}
		notes[i] = []any{nid, client, key, hash, user, "bench", "bench", "LOW", response, campaign}
		dels[i] = []any{did, nid, "SMS", "LOW", now}
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return err
		}
		for _, c := range []struct {
			table string
			cols  []string
			rows  [][]any
		}{
			{"idempotency_key", []string{"client_id", "idempotency_key", "notification_id", "request_hash"}, keys},
			{"notification", []string{"id", "client_id", "idempotency_key", "request_hash", "user_id", "template", "category",
				"priority", "response", "campaign_id"}, notes},
			{"delivery", []string{"id", "notification_id", "channel", "priority", "next_attempt_at"}, dels},
		} {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{c.table}, c.cols, pgx.CopyFromRows(c.rows)); err != nil {
				return fmt.Errorf("copy %s: %w", c.table, err)
			}
		}
		return nil
	})
}
