package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// writeCost is what one statement cost PostgreSQL, from EXPLAIN (ANALYZE, WAL): the WAL its
// plan wrote (heap, indexes and their full-page images; not the commit record nor the
// deferred status-event trigger, which runs at commit), its execution time and the parts of it
// in delivery_touch (the row trigger every write of a delivery runs) and in foreign-key checks.
type writeCost struct {
	records, fpi, bytes float64
	exec, touch, fk     time.Duration
}

func (c *writeCost) add(o writeCost) {
	c.records, c.fpi, c.bytes = c.records+o.records, c.fpi+o.fpi, c.bytes+o.bytes
	c.exec, c.touch, c.fk = c.exec+o.exec, c.touch+o.touch, c.fk+o.fk
}

// log writes c, the cost of n deliveries' write name, per delivery.
func (c writeCost) log(b *testing.B, name string, n float64) {
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / n }
	b.Logf("%-12s per delivery: %.1f WAL records (%.2f full-page images), %.0f WAL bytes, %.1f µs executing "+
		"(%.1f in delivery_touch, %.1f in foreign-key checks)",
		name, c.records/n, c.fpi/n, c.bytes/n, us(c.exec), us(c.touch), us(c.fk))
}

// explainWrite runs sql with args under EXPLAIN (ANALYZE, WAL, FORMAT JSON), in its own
// transaction, which commits (the next transition needs its rows).
func explainWrite(b *testing.B, pool *pgxpool.Pool, sql string, args ...any) writeCost {
	b.Helper()
	var plan []byte
	require.NoError(b, pool.QueryRow(context.Background(), "EXPLAIN (ANALYZE, WAL, FORMAT JSON) "+sql, args...).Scan(&plan))
	var doc []struct {
		Plan struct {
			Records float64 `json:"WAL Records"`
			FPI     float64 `json:"WAL FPI"`
			Bytes   float64 `json:"WAL Bytes"`
		}
		Execution float64 `json:"Execution Time"`
		Triggers  []struct {
			Name string  `json:"Trigger Name"`
			Time float64 `json:"Time"`
		}
	}
	require.NoError(b, json.Unmarshal(plan, &doc))
	p := doc[0].Plan
	c := writeCost{records: p.Records, fpi: p.FPI, bytes: p.Bytes, exec: time.Duration(doc[0].Execution * float64(time.Millisecond))}
	for _, t := range doc[0].Triggers {
		switch {
		case t.Name == "delivery_touch":
			c.touch += time.Duration(t.Time * float64(time.Millisecond))
		case strings.HasPrefix(t.Name, "RI_ConstraintTrigger"):
			c.fk += time.Duration(t.Time * float64(time.Millisecond))
		}
	}
	return c
}

// BenchmarkWritesPerDelivery measures, per delivery, what each write on a delivery's way
// costs PostgreSQL: the accept's insert (its key, notification and one SMS delivery, one
// statement per notification as ingest runs it), the relay's QUEUED mark, dispatch's claim and
// its outcome (SENT, with the attempt row), the last three as herald batches them (100 rows a
// statement). Each op is one batch of 100 deliveries through the four writes.
//
//	go test -run '^$' -bench WritesPerDelivery -benchtime 20x ./internal/delivery
func BenchmarkWritesPerDelivery(b *testing.B) {
	pool := stacktest.Postgres(b)
	client := deliverytest.Client(b, pool)
	const batch = 100
	names := []string{"insert", "mark QUEUED", "claim", "record SENT"}
	costs := make([]writeCost, len(names))
	for range b.N {
		vs := make([]delivery.Version, 0, batch)
		for range batch {
			nid, did := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
			costs[0].add(explainWrite(b, pool, delivery.InsertSQLForTest, delivery.InsertArgsForTest(delivery.Notification{
				ID: nid, ClientID: client, IdempotencyKey: nid.String(), RequestHash: []byte{0}, UserID: 1, Template: "bench",
				Category: "bench", Priority: herald.PriorityNormal, Response: []byte(`{}`), Recipient: []byte(`{"phone":"+15550000000"}`),
				Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				Deliveries:  []delivery.New{{ID: did, Channel: herald.ChannelSMS}},
			})...))
			vs = append(vs, deliverytest.Version(b, pool, did.String()))
		}
		costs[1].add(explainWrite(b, pool, delivery.MarkQueuedSQLForTest, delivery.MarkQueuedArgsForTest(vs)...))
		seen := make([]delivery.Seen, len(vs))
		rs := make([]delivery.Recording, len(vs))
		for i, v := range vs {
			seen[i] = delivery.Seen{ID: v.ID}
			rs[i] = delivery.Recording{ID: v.ID, Attempt: 1, StartedAt: time.Now(),
				Outcome: delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sms:bench", ProviderID: "SM0123456789"}}
		}
		costs[2].add(explainWrite(b, pool, delivery.ClaimBatchSQLForTest, delivery.ClaimBatchArgsForTest(seen)...))
		args, err := delivery.RecordBatchArgsForTest(rs)
		require.NoError(b, err)
		costs[3].add(explainWrite(b, pool, delivery.RecordBatchSQLForTest, args...))
	}
	n := float64(b.N * batch)
	var total writeCost
	for i, c := range costs {
		total.add(c)
		b.ReportMetric(c.bytes/n, fmt.Sprintf("WAL-B/%s", nameUnit(names[i])))
		c.log(b, names[i], n)
	}
	total.log(b, "all four", n)
}

// nameUnit makes a write's name a metric unit (no spaces).
func nameUnit(s string) string {
	out := []rune{}
	for _, r := range s {
		if r == ' ' {
			r = '-'
		}
		out = append(out, r)
	}
	return string(out)
}
