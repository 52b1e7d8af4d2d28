package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
	"github.com/heraldhq/herald/senders/sim"
)

// smsOTP is a HIGH SMS OTP to an inline number: no user profile needed.
const smsOTP = `{"userId": 1, "template": "otp", "channels": ["SMS"], "priority": "HIGH",
	"payload": {"code": "%06d"}, "to": {"phone": "+15550100001"}}`

// templatesDir holds the e2e otp template, seeded by serve's --templates-dir.
func templatesDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "otp.json"), []byte(otpTemplate), 0o600))
	return dir
}

// arg is the value of flag name in args (the last one given).
func arg(args []string, name string) string {
	v := ""
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name {
			v = args[i+1]
		}
	}
	return v
}

// postOTP accepts one HIGH SMS OTP and returns its delivery id.
func postOTP(t *testing.T, addr, key string, i int) string {
	t.Helper()
	status, b, err := tryJSON(context.Background(), http.MethodPost, "http://"+addr+"/api/notifications", key,
		fmt.Sprintf("otp-%d", i), fmt.Sprintf(smsOTP, i))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status, "%s", b)
	var ans struct{ Deliveries []delivery }
	require.NoError(t, json.Unmarshal(b, &ans))
	require.Len(t, ans.Deliveries, 1)
	return ans.Deliveries[0].ID
}

// callsByKey counts the simulator's calls per delivery id.
func callsByKey(recs []sim.Record) map[string]int {
	n := map[string]int{}
	for _, r := range recs {
		n[r.Key]++
	}
	return n
}

// recordsByKey counts the records of topic per key, up to its end offsets now.
func recordsByKey(t *testing.T, topic string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(stacktest.KafkaBrokers(t)...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	var want, got int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	n := map[string]int{}
	for got < want {
		f := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records of %s", got, want, topic)
		f.EachRecord(func(r *kgo.Record) { n[string(r.Key)]++; got++ })
	}
	return n
}

// In a process that does not hand HIGH to its own lane, every HIGH delivery reaches Kafka
// twice — the accepting process's record right after the commit and the relay's from the
// WAL — and the provider is called once per delivery: dispatch drops the second record, the
// row having moved on.
func TestHighPublishedTwiceCalledOnce(t *testing.T) {
	t.Parallel()
	ids, _, calls := sendOTPs(t, 40, 2, "--hand-high=false")
	for _, id := range ids {
		require.Equal(t, 1, calls[id], "provider calls of delivery %s", id)
	}
}

// A process that accepts HIGH and runs the HIGH lane (herald serve's defaults) hands each HIGH
// delivery to its lane instead of publishing it: the only record on the topic is the relay's,
// and the provider is called once per delivery.
func TestHighHandedOverInProcessCalledOnce(t *testing.T) {
	t.Parallel()
	ids, recs, calls := sendOTPs(t, 20, 1)
	for _, id := range ids {
		require.Equal(t, 1, recs[id], "records of delivery %s: the relay's only, the accepting process's was handed over", id)
		require.Equal(t, 1, calls[id], "provider calls of delivery %s", id)
	}
}

// sendOTPs serves herald (every role, with args) against a simulator, sends n HIGH OTPs and
// waits until each is SENT and has at least records records on the HIGH topic (read once every
// delivery is SENT: the relay marks or skips nothing more after that). It returns the
// deliveries, their records and their provider calls.
func sendOTPs(t *testing.T, n, records int, args ...string) (ids []string, recs, calls map[string]int) {
	t.Helper()
	st := newStack(t)
	key := st.apiKey(t)
	sm := startSim(t)
	addr := heraldtest.FreeAddr(t)
	st.serve(t, "serve", addr, sm, append([]string{"--templates-dir", templatesDir(t)}, args...)...)
	ids = make([]string, n)
	for i := range ids {
		ids[i] = postOTP(t, addr, key, i)
	}
	waitSent(t, st.dsn, ids)
	heraldtest.WaitFor(t, time.Minute, fmt.Sprintf("%d records per HIGH delivery", records), func() bool {
		recs = recordsByKey(t, arg(st.args, "--topic-high"))
		for _, id := range ids {
			if recs[id] < records {
				return false
			}
		}
		return true
	})
	return ids, recordsByKey(t, arg(st.args, "--topic-high")), callsByKey(sm.records(t))
}

// kill -9 of the accepting process after its commit and before its own HIGH publish reached
// Kafka (its producer talks to a broker that never answers): the relay, in another process,
// publishes the row from the WAL and the OTP is sent, once.
func TestHighAcceptedThenKilledBeforeItsPublishIsStillSent(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	key := st.apiKey(t)
	sm := startSim(t)
	// A Kafka that accepts connections and never answers: the direct publish cannot leave.
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = hole.Close() })
	var held sync.WaitGroup
	t.Cleanup(held.Wait)
	go func() {
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			held.Go(func() { _, _ = c.Read(make([]byte, 1)); _ = c.Close() }) // until the peer dies
		}
	}()
	ingestAddr, workAddr := heraldtest.FreeAddr(t), heraldtest.FreeAddr(t)
	ingestProc := st.serve(t, "ingest", ingestAddr, sm, "--roles", "ingest", "--templates-dir", templatesDir(t),
		"--kafka-brokers", hole.Addr().String())
	st.serve(t, "relay-dispatch", workAddr, sm, "--roles", "relay,dispatch")

	id := postOTP(t, ingestAddr, key, 1) // 202: committed
	ingestProc.kill()
	waitSent(t, st.dsn, []string{id})
	require.Equal(t, 1, callsByKey(sm.records(t))[id], "provider calls")
	require.Equal(t, 1, recordsByKey(t, arg(st.args, "--topic-high"))[id], "records of the delivery: the relay's only")
}

// waitSent waits until every delivery of ids is SENT.
func waitSent(t *testing.T, dsn string, ids []string) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	heraldtest.WaitFor(t, time.Minute, fmt.Sprintf("%d deliveries SENT", len(ids)), func() bool {
		var sent int
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM delivery WHERE id = ANY($1::uuid[]) AND status = 'SENT'`, ids).Scan(&sent))
		return sent == len(ids)
	})
}

// After /readyz first answers 200, every role can work: the relay streams from its slot,
// every dispatch lane is a member of its group, and the first HIGH OTP goes out at once. The
// figure (POST → provider call of that first OTP) is logged; its target is 200 ms.
func TestFirstHighOTPAfterReady(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	key := st.apiKey(t)
	sm := startSim(t)
	addr := heraldtest.FreeAddr(t)
	args := append(append([]string{"serve", "--http-addr", addr}, st.args...), "--templates-dir", templatesDir(t))
	began := time.Now()
	p := start(t, "serve", sm.env, args...)
	heraldtest.WaitForEvery(t, 90*time.Second, 5*time.Millisecond, "/readyz 200", func() bool {
		if p.exited() {
			t.Fatal("herald serve exited")
		}
		status, _, err := tryJSON(context.Background(), http.MethodGet, "http://"+addr+"/readyz", "", "", "")
		return err == nil && status == http.StatusOK
	})
	ready := time.Since(began)
	// What ready promises, checked at once: the relay streams from its slot, and every
	// dispatch lane is the one member of its group, which is stable (assignment done).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, st.dsn)
	require.NoError(t, err)
	defer pool.Close()
	var streaming bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(bool_or(active), false) FROM pg_replication_slots WHERE slot_name = $1`,
		arg(st.args, "--relay-slot")).Scan(&streaming))
	require.True(t, streaming, "relay streaming from its slot when /readyz is 200")
	adm := kadm.NewClient(mustClient(t))
	for _, prio := range []string{"high", "normal", "low"} {
		group := arg(st.args, "--dispatch-group-"+prio)
		described, err := adm.DescribeGroups(ctx, group)
		require.NoError(t, err)
		require.NoError(t, described.Error())
		require.Equal(t, "Stable", described[group].State, "group %s", group)
		require.Len(t, described[group].Members, 1, "members of group %s", group)
	}

	posted := time.Now()
	id := postOTP(t, addr, key, 1)
	answered := time.Since(posted)
	var rec sim.Record
	heraldtest.WaitForEvery(t, time.Minute, 2*time.Millisecond, "the first OTP at the provider", func() bool {
		for _, r := range sm.records(t) {
			if r.Key == id {
				rec = r
				return true
			}
		}
		return false
	})
	t.Logf("first HIGH OTP after /readyz: POST → provider call %.1f ms (POST answered in %.1f ms; /readyz 200 %.2f s after the start); target ≤ 200 ms",
		float64(rec.ReceivedAt.Sub(posted).Microseconds())/1000, float64(answered.Microseconds())/1000, ready.Seconds())
}

// mustClient is a Kafka client of the stack, closed with the test.
func mustClient(t *testing.T) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(stacktest.KafkaBrokers(t)...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}
