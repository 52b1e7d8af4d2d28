package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
	"github.com/heraldhq/herald/senders/sim"
)

// The scale-out tests run herald as an operator adding processes would: one `--roles relay`
// process and three `--roles dispatch` processes on one stack (database, topics, consumer
// groups, Redis prefix), with the provider simulator's Twilio as the SMS provider and no
// rate limit. The deliveries are NORMAL, so the NORMAL lane's consumer group (one member
// per dispatch process) shares the NORMAL topic's partitions.

const (
	scaleDeliveries = 20_000
	// scaleConcurrency is --dispatch-concurrency-normal of every dispatch process: how many
	// NORMAL deliveries one process handles at once, whatever its share of partitions.
	scaleConcurrency = 8
	scaleDispatchers = 3
)

// scaleTemplate is an SMS-only template; the deliveries carry their phone number inline.
const scaleTemplate = `{"category": "scale", "channels": ["SMS"],
  "content": {"SMS": {"default": {"text": "Your code is {{.code}}"}}}}`

// scaleOut is one installation scaled out: a relay process and dispatch processes.
type scaleOut struct {
	*e2e
	clientID    string
	topic       string // the NORMAL topic
	group       string // the NORMAL lane's consumer group
	partitions  int
	adm         *kadm.Client
	dispatchers []*dispatcher
}

// dispatcher is a `--roles dispatch` process and the address of its admin listener (/metrics).
type dispatcher struct {
	*proc
	admin string
}

func newScaleOut(t *testing.T) *scaleOut {
	t.Helper()
	ctx := context.Background()
	// A provider that takes a few milliseconds, as a real one does: a kill then meets
	// calls in flight.
	e := &e2e{st: newStack(t), sim: startSim(t, "--sim-latency", "twilio.min=2ms,twilio.median=10ms,twilio.p99=50ms")}
	pool, err := pgxpool.New(ctx, e.st.dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e.pool = pool
	s := &scaleOut{e2e: e, topic: flagValue(t, e.st.args, "--topic-normal"), group: flagValue(t, e.st.args, "--dispatch-group-normal")}
	s.partitions, err = strconv.Atoi(flagValue(t, e.st.args, "--partitions-normal"))
	require.NoError(t, err)
	c, err := apikey.CreateAPIClient(ctx, pool, "scale", apikey.AllScopes())
	require.NoError(t, err)
	s.clientID = c.ID
	_, err = ingest.SeedTemplates(ctx, pool, fstest.MapFS{"scale.json": {Data: []byte(scaleTemplate)}})
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(stacktest.KafkaBrokers(t)...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	s.adm = kadm.NewClient(cl)

	e.first = e.st.serve(t, "relay", heraldtest.FreeAddr(t), e.sim, append([]string{"--roles", "relay"}, fastRecovery...)...)
	slot := flagValue(t, e.st.args, "--relay-slot")
	heraldtest.WaitFor(t, 60*time.Second, "the relay to stream from its slot", func() bool {
		var streaming bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_replication r
			JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1 AND r.state = 'streaming')`,
			slot).Scan(&streaming))
		return streaming
	})
	for i := 1; i <= scaleDispatchers; i++ {
		addr, admin := heraldtest.FreeAddr(t), heraldtest.FreeAddr(t)
		args := append([]string{"--roles", "dispatch", "--dispatch-concurrency-normal", strconv.Itoa(scaleConcurrency),
			"--admin-addr", admin}, fastRecovery...)
		s.dispatchers = append(s.dispatchers, &dispatcher{proc: e.st.serve(t, fmt.Sprintf("dispatch-%d", i), addr, e.sim, args...), admin: admin})
	}
	s.waitGroup(t, scaleDispatchers)
	return s
}

// flagValue returns the value that follows name in args.
func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	i := slices.Index(args, name)
	require.True(t, i >= 0 && i+1 < len(args), "no %s in the stack's flags", name)
	return args[i+1]
}

// waitGroup waits until the NORMAL lane's group is stable with members members, every
// partition of the topic assigned and each member holding at least one.
func (s *scaleOut) waitGroup(t *testing.T, members int) {
	t.Helper()
	heraldtest.WaitFor(t, 60*time.Second, fmt.Sprintf("%d dispatch processes sharing the %d NORMAL partitions", members, s.partitions), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		groups, err := s.adm.DescribeGroups(ctx, s.group)
		if err != nil {
			return false
		}
		g, ok := groups[s.group]
		if !ok || g.Err != nil || g.State != "Stable" || len(g.Members) != members {
			return false
		}
		assigned := map[int32]bool{}
		for _, m := range g.Members {
			a, ok := m.Assigned.AsConsumer()
			if !ok {
				return false
			}
			held := 0
			for _, tp := range a.Topics {
				if tp.Topic == s.topic {
					for _, p := range tp.Partitions {
						assigned[p] = true
						held++
					}
				}
			}
			if held == 0 {
				return false
			}
		}
		return len(assigned) == s.partitions
	})
}

// insertDeliveries writes n NORMAL SMS notifications, one delivery each, through the real
// insert transition in transactions of 1,000, as a campaign's expansion does, and returns the
// delivery ids. The relay streams them from the WAL like any accepted notification.
func (s *scaleOut) insertDeliveries(t *testing.T, n int) []string {
	t.Helper()
	spec := deliverytest.Spec{
		ClientID: s.clientID, Template: "scale", Category: "scale",
		Payload: `{"code": "123456"}`, Recipient: `{"phone": "+15550100000"}`,
		Channel: herald.ChannelSMS, Priority: herald.PriorityNormal,
	}
	ids := make([]string, 0, n)
	for len(ids) < n {
		ids = append(ids, deliverytest.Insert(t, s.pool, min(1000, n-len(ids)), spec)...)
	}
	return ids
}

// sent returns how many attempts a dispatch process recorded SENT, from its /metrics.
func (d *dispatcher) sent(t *testing.T) int {
	t.Helper()
	resp, err := httpClient.Get("http://" + d.admin + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var n float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "herald_dispatch_sends_total{") && strings.Contains(line, `outcome="SENT"`) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			require.NoError(t, err, line)
			n += v
		}
	}
	require.NoError(t, sc.Err())
	return int(n)
}

// twilioCalls counts the simulator's delivered Twilio requests per idempotency key (the
// delivery id), and checks that every one belongs to a delivery of ids.
func (s *scaleOut) twilioCalls(t *testing.T, ids []string) map[string]int {
	t.Helper()
	calls := delivered(s.sim.records(t))[sim.Twilio]
	known := make(map[string]bool, len(ids))
	for _, id := range ids {
		known[id] = true
	}
	for key := range calls {
		require.True(t, known[key], "a provider call with key %q that is no delivery of this test", key)
	}
	return calls
}

// TestScaleOutThreeDispatchersSendEachOnce sends 20,000 deliveries through one relay and
// three dispatch processes: every delivery ends SENT, each reached the provider exactly
// once, and every dispatch process took its share.
func TestScaleOutThreeDispatchersSendEachOnce(t *testing.T) {
	t.Parallel()
	s := newScaleOut(t)
	start := time.Now()
	ids := s.insertDeliveries(t, scaleDeliveries)
	c := s.waitAllFinal(t, len(ids), 240*time.Second)
	took := time.Since(start)
	require.Equal(t, map[string]int{"SENT": len(ids)}, c)

	calls := s.twilioCalls(t, ids)
	for _, id := range ids {
		require.Equal(t, 1, calls[id], "provider calls of delivery %s", id)
	}
	st := s.sim.stats(t)[sim.Twilio]
	require.Equal(t, int64(len(ids)), st.Requests, "every request to the provider delivered one delivery")
	require.Zero(t, st.Duplicates)

	var total int
	var each []string
	for _, d := range s.dispatchers {
		n := d.sent(t)
		require.Positive(t, n, "dispatch process %s sent nothing", d.name)
		total += n
		each = append(each, fmt.Sprintf("%s=%d", d.name, n))
	}
	require.Equal(t, len(ids), total, "the processes' SENT attempts add up to the deliveries")
	t.Logf("%d deliveries SENT once each in %s (%.0f/s) by %d dispatch processes: %s",
		len(ids), took.Round(time.Millisecond), float64(len(ids))/took.Seconds(), len(s.dispatchers), strings.Join(each, " "))
}

// TestScaleOutDispatcherKilled kill -9s one of three dispatch processes after some
// thousands of 20,000 deliveries are sent. Its partitions move to the two survivors; every
// delivery still ends SENT. The kill may duplicate the calls the killed process had in
// flight; they are counted and printed, and bounded.
func TestScaleOutDispatcherKilled(t *testing.T) {
	t.Parallel()
	s := newScaleOut(t)
	start := time.Now()
	ids := s.insertDeliveries(t, scaleDeliveries)
	victim := s.dispatchers[0]
	heraldtest.WaitFor(t, 120*time.Second, "some thousands of deliveries sent, some by the process to kill", func() bool {
		return s.counts(t)["SENT"] >= 4000 && victim.sent(t) > 0
	})
	victim.kill()
	atKill := s.counts(t)
	t.Logf("killed %s with %d of %d deliveries sent: %v", victim.name, atKill["SENT"], len(ids), atKill)
	require.Less(t, final(atKill), len(ids), "the kill must come before the end")

	// Kafka hands the dead member's partitions to the survivors once its session times out
	// (--kafka-session-timeout 6s).
	s.waitGroup(t, scaleDispatchers-1)
	c := s.waitAllFinal(t, len(ids), 240*time.Second)
	took := time.Since(start)

	rows, err := s.pool.Query(context.Background(), `SELECT id::text, status, coalesce(last_error, '') FROM delivery`)
	require.NoError(t, err)
	var notSent []string
	for rows.Next() {
		var id, status, cause string
		require.NoError(t, rows.Scan(&id, &status, &cause))
		if status != "SENT" {
			notSent = append(notSent, fmt.Sprintf("%s %s (%s)", id, status, cause))
		}
	}
	require.NoError(t, rows.Err())
	rows.Close()
	for _, d := range notSent {
		t.Logf("not sent: %s", d)
	}
	require.Equal(t, map[string]int{"SENT": len(ids)}, c, "with a healthy provider every delivery ends SENT")

	calls := s.twilioCalls(t, ids)
	var dups, twice int
	for _, id := range ids {
		require.GreaterOrEqual(t, calls[id], 1, "SENT delivery %s never reached the provider", id)
		if calls[id] > 1 {
			dups += calls[id] - 1
			twice++
		}
	}
	require.Equal(t, int64(dups), s.sim.stats(t)[sim.Twilio].Duplicates)
	var reaped int // the reaper writes its AMBIGUOUS attempt rows without a provider
	require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT count(*) FROM delivery_attempt
		WHERE outcome = 'AMBIGUOUS' AND provider IS NULL`).Scan(&reaped))
	t.Logf("kill -9 of one of %d dispatch processes: %d deliveries SENT in %s; rows the killed process left SENDING "+
		"(reaped as AMBIGUOUS): %d; duplicate provider calls: %d (%d deliveries called more than once; bound %d)",
		scaleDispatchers, len(ids), took.Round(time.Millisecond), reaped, dups, twice, scaleConcurrency)
	// A duplicate is a call the killed process made whose outcome it never wrote: the row
	// stayed SENDING, the reaper returned it to PENDING after --relay-sending-lease with an
	// AMBIGUOUS attempt, and a survivor called again (NORMAL retries ambiguous outcomes).
	// Only calls in flight at the kill can be such calls; the killed process had at most
	// --dispatch-concurrency-normal NORMAL deliveries in flight (every delivery here is
	// NORMAL, so its other lanes had none), and the survivors are not killed, so each of
	// those deliveries is called again at most once.
	require.LessOrEqual(t, dups, scaleConcurrency, "duplicates beyond the killed process's in-flight calls")
}
