// Package recovery holds the bench suite's recovery scenario: herald as separate `herald
// serve` processes (ingest, relay, two dispatch) against the local stack and the provider
// simulator, under steady load, with the relay and then one dispatch process killed (-9).
//
//	make stack-up && eval "$(deploy/local/stack.sh env)"
//	go test -run '^$' -bench ScenarioRecovery -benchtime 1x -timeout 10m ./bench/recovery
package recovery

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald/bench/internal/benchproc"
	"github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
	"github.com/heraldhq/herald/senders/sim"
)

const template = `{"category": "bench", "channels": ["SMS"], "content": {"SMS": {"default": {"text": "Your code is {{.code}}"}}}}`

// BenchmarkScenarioRecovery kill -9s the relay under load and restarts it (time until a
// row committed after the kill is in Kafka), then kill -9s one of two dispatch processes
// (time until a row on each of its partitions reaches the provider through the survivor);
// after a drain, every accepted notification must have a final delivery (lost = 0), and
// the duplicate provider calls the kills caused are counted at the simulator.
func BenchmarkScenarioRecovery(b *testing.B) {
	const rate = 100.0 // NORMAL SMS POSTs per second, open loop
	phase := result.ScaledDuration(20*time.Second, 3*time.Second)
	r := result.New("recovery", "kill -9 of the relay and of one dispatch process under load: recovery time, lost, duplicates")
	r.Load = fmt.Sprintf("NORMAL SMS POSTs open loop at %.0f/s to a `--roles ingest` process; one relay and two dispatch "+
		"processes, Twilio at the provider simulator (2–50 ms); %s of load, kill -9 of the relay and restart, %s, kill -9 of "+
		"one dispatch process, %s, then a drain", rate, phase, phase, phase)
	bin := benchproc.BuildHerald(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	dsn := stacktest.PostgresURL(b)
	topics := stacktest.KafkaTopics(b, map[string]int32{"high": 4, "normal": 4, "low": 2})
	_, prefix := stacktest.Redis(b)
	name := stacktest.Name("recovery")
	args := serveArgs(b, dsn, topics, prefix, name)
	pool, err := pgxpool.New(ctx, dsn)
	heraldtest.Must(b, err)
	defer pool.Close()
	client, err := apikey.CreateAPIClient(ctx, pool, "bench", apikey.AllScopes())
	heraldtest.Must(b, err)
	_, err = ingest.SeedTemplates(ctx, pool, fstest.MapFS{"bench.json": {Data: []byte(template)}})
	heraldtest.Must(b, err)
	simEnv, simURL := startSim(b, bin, "--sim-latency", "twilio.min=2ms,twilio.median=10ms,twilio.p99=50ms")

	apiAddr := heraldtest.FreeAddr(b)
	serve(b, bin, "ingest", apiAddr, simEnv, append([]string{"--roles", "ingest"}, args...)...)
	relay := serve(b, bin, "relay", heraldtest.FreeAddr(b), simEnv, append([]string{"--roles", "relay"}, args...)...)
	var dispatchers []*benchproc.Proc
	for i := 1; i <= 2; i++ {
		dispatchers = append(dispatchers, serve(b, bin, fmt.Sprintf("dispatch-%d", i), heraldtest.FreeAddr(b), simEnv,
			append([]string{"--roles", "dispatch"}, args...)...))
	}
	kcl, err := kgo.NewClient(kgo.SeedBrokers(stacktest.KafkaBrokers(b)...), kgo.ConsumeTopics(topics["normal"]),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	heraldtest.Must(b, err)
	defer kcl.Close()
	defer cancel() // before the client closes: the consumer below stops first
	adm := kadm.NewClient(kcl)
	group := name + "_normal"
	waitMembers(b, adm, group, topics["normal"], 2)

	// What the bench sees: each POST's due time and answer, each record's first arrival in Kafka.
	var mu sync.Mutex
	due := map[string]time.Time{} // accepted delivery id → when its POST was due
	seen := map[string]seenRecord{}
	var refused int
	go func() {
		for ctx.Err() == nil {
			fs := kcl.PollFetches(ctx)
			now := time.Now()
			mu.Lock()
			fs.EachRecord(func(rec *kgo.Record) {
				if _, ok := seen[string(rec.Key)]; !ok {
					seen[string(rec.Key)] = seenRecord{at: now, partition: rec.Partition}
				}
			})
			mu.Unlock()
		}
	}()

	b.ResetTimer()
	start := time.Now()
	cpuStart := cpuTime()
	loadDone := make(chan int)
	stopLoad := make(chan struct{})
	go func() {
		loadDone <- openLoop(ctx, start, rate, stopLoad, func(i int, at time.Time) {
			id, err := post(ctx, "http://"+apiAddr, client.Key, fmt.Sprintf("r-%d", i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused++
				return
			}
			due[id] = at
		})
	}()
	progress := result.Progress(ctx, os.Stderr, r.Scenario, 5*time.Second, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("accepted %d, refused %d, in Kafka %d", len(due), refused, len(seen))
	})
	defer progress()

	// Kill -9 the relay, start another; streaming again once a row committed after the kill
	// (its POST was due after it) is in Kafka.
	pause(phase)
	relayKill := time.Now()
	relay.Kill()
	serve(b, bin, "relay-2", heraldtest.FreeAddr(b), simEnv, append([]string{"--roles", "relay"}, args...)...)
	var relayBack time.Time
	heraldtest.WaitFor(b, 2*time.Minute, "a row committed after the relay's kill in Kafka", func() bool {
		mu.Lock()
		defer mu.Unlock()
		relayBack = firstSeenAfter(due, seen, relayKill)
		return !relayBack.IsZero()
	})

	// Kill -9 one dispatch process; its partitions go to the survivor after the session timeout.
	pause(phase)
	before := assignments(b, adm, group, topics["normal"])
	dispatchKill := time.Now()
	dispatchers[0].Kill()
	waitMembers(b, adm, group, topics["normal"], 1)
	after := assignments(b, adm, group, topics["normal"])
	victim := map[int32]bool{}
	for member, parts := range before {
		if _, survived := after[member]; !survived {
			for _, p := range parts {
				victim[p] = true
			}
		}
	}
	pause(phase)
	close(stopLoad)
	<-loadDone
	loadEnd := time.Now()
	generatorCPU := 100 * (cpuTime() - cpuStart).Seconds() / loadEnd.Sub(start).Seconds()
	progress()

	// Drain: every accepted delivery final, or lost.
	mu.Lock()
	ids := make([]string, 0, len(due))
	for id := range due {
		ids = append(ids, id)
	}
	mu.Unlock()
	var lost int
	drainErr := poll(90*time.Second, func() bool {
		heraldtest.Must(b, pool.QueryRow(ctx, `SELECT $2::int - count(*) FROM delivery WHERE id = ANY($1::uuid[])
			AND status IN ('SENT', 'FAILED', 'EXPIRED')`, ids, len(ids)).Scan(&lost))
		return lost == 0
	})
	drained := time.Now()
	b.StopTimer()

	recs := simRecords(b, simURL)
	calls := map[string]int{}
	var firstCall = map[string]time.Time{}
	sent := &result.PerSecond{T0: start}
	for _, rec := range recs {
		if rec.Provider != sim.Twilio || !rec.Outcome.Delivered() {
			continue
		}
		calls[rec.Key]++
		if _, ok := firstCall[rec.Key]; !ok {
			firstCall[rec.Key] = rec.ReceivedAt
		}
		sent.Add(rec.ReceivedAt, 1)
	}
	dups := 0
	for _, n := range calls {
		dups += max(n-1, 0)
	}
	// Per partition of the killed process: the first provider call of a row on it whose
	// POST was due after the kill (only the survivor could consume it).
	var slowest time.Duration
	var partitions []string
	mu.Lock()
	for p := range victim {
		first := time.Time{}
		for id, at := range due {
			s, ok := seen[id]
			call, called := firstCall[id]
			if ok && called && s.partition == p && at.After(dispatchKill) && (first.IsZero() || call.Before(first)) {
				first = call
			}
		}
		if first.IsZero() {
			b.Errorf("partition %d of the killed dispatch process: no row consumed after the kill", p)
			continue
		}
		slowest = max(slowest, first.Sub(dispatchKill))
		partitions = append(partitions, fmt.Sprintf("%d: %s", p, first.Sub(dispatchKill).Round(time.Millisecond)))
	}
	accepted := len(due)
	mu.Unlock()
	sort.Strings(partitions)

	r.Add(result.Figure{Name: "relay kill → streaming again", Value: relayBack.Sub(relayKill).Seconds(), Unit: "s", Better: "lower"})
	r.Add(result.Figure{Name: "dispatch kill → its partitions consumed again", Value: slowest.Seconds(), Unit: "s", Better: "lower"})
	r.Add(result.Figure{Name: "lost", Value: float64(lost), Unit: "count", Better: "lower", Target: "= 0"})
	r.Add(result.Figure{Name: "duplicate provider calls", Value: float64(dups), Unit: "count", Better: "lower"})
	r.Add(result.Figure{Name: "accepted", Value: float64(accepted), Unit: "count"})
	r.Add(result.Figure{Name: "refused", Value: float64(refused), Unit: "count", Better: "lower"})
	r.Add(result.Figure{Name: "load generator CPU", Value: generatorCPU, Unit: "% of a core", Better: "lower"})
	secs := int(drained.Sub(start)/time.Second) + 1
	top := max(sent.Peak(), 1)
	marker := func(name string, at time.Time) result.Series {
		x := at.Sub(start).Seconds()
		return result.Series{Name: name, X: []float64{x, x}, Y: []float64{0, top}}
	}
	r.Chart(result.Chart{File: "sent-over-time", Title: "provider calls per second; vertical lines: kill -9 moments",
		Kind: "line", XLabel: "seconds since the load began", YLabel: "calls per second",
		Series: []result.Series{sent.Series("sent/s", secs), marker("relay kill -9", relayKill),
			marker("dispatch kill -9", dispatchKill), marker("load ends", loadEnd)}})
	r.Note("Streaming again: the first Kafka record of a row whose POST was due after the relay's kill, %s after it "+
		"(includes starting a new relay process). Partitions of the killed dispatch process (%d of 4), time from the kill to "+
		"the first provider call of a row on each that was posted after the kill: %v; Kafka moves them once the dead "+
		"member's session times out (--kafka-session-timeout 6s).", relayBack.Sub(relayKill).Round(time.Millisecond),
		len(victim), partitions)
	r.Note("The bench process (the open-loop generator and a Kafka consumer watching the NORMAL topic) used %.1f %% of a "+
		"core during the load; herald runs in its own processes.", generatorCPU)
	r.Note("Duplicates: provider calls beyond the first per delivery (the simulator's records): a call the killed " +
		"process made whose outcome it never wrote is retried after --relay-sending-lease 10s as AMBIGUOUS.")
	if drainErr != nil || lost > 0 {
		r.Note("LOST: %d of %d accepted deliveries not final %s after the load ended.", lost, accepted, drained.Sub(loadEnd).Round(time.Second))
		b.Errorf("%d of %d accepted deliveries not final after the drain", lost, accepted)
	} else {
		r.Note("Every one of %d accepted deliveries final %s after the load ended (lost = 0).", accepted, drained.Sub(loadEnd).Round(time.Millisecond))
	}
	b.ReportMetric(relayBack.Sub(relayKill).Seconds(), "relay-recovery-s")
	b.ReportMetric(slowest.Seconds(), "dispatch-recovery-s")
	b.ReportMetric(float64(lost), "lost")
	b.ReportMetric(float64(dups), "duplicates")
	for _, n := range r.Notes {
		b.Log(n)
	}
	heraldtest.Must(b, r.Write())
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type seenRecord struct {
	at        time.Time
	partition int32
}

// firstSeenAfter is the first arrival in Kafka of a row whose POST was due after t.
func firstSeenAfter(due map[string]time.Time, seen map[string]seenRecord, t time.Time) time.Time {
	var first time.Time
	for id, at := range due {
		if s, ok := seen[id]; ok && at.After(t) && (first.IsZero() || s.at.Before(first)) {
			first = s.at
		}
	}
	return first
}
