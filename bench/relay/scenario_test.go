package relay

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/bench/internal/riverbench"
	"github.com/heraldhq/herald/bench/internal/settle"
	"github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// The relay scenario's load. Durations and the backlog scale with BENCH_SCALE; the rates do
// not.
var rates = []int{100, 1000, 5000}

// phaseDuration is how long the phase at rate runs. The middle rate's, whose p99 is the one
// compared with River's, runs three times as long: at 1,000 rows/s a stall of the shared
// machine of 70 ms holds back some 100 rows, the p99 of a 10 s phase's 10,000 and a third of
// it in 30 s, where both systems' p99 is their own tail again (docs/benchmarks.md, "The middle
// rate's phase, 30 s").
func phaseDuration(rate int) time.Duration {
	ms := 10_000
	if rate == rates[1] {
		ms = 30_000
	}
	return time.Duration(result.Scaled(ms, 1_000)) * time.Millisecond
}

// tailLimit is how long a phase waits, after its last insert, for the rows still in flight.
func tailLimit() time.Duration { return time.Duration(result.Scaled(5_000, 1_000)) * time.Millisecond }

// warmUpDuration is the unmeasured phase that warms the broker before the first system's
// phases (warmUp).
func warmUpDuration() time.Duration {
	return time.Duration(result.Scaled(5_000, 1_000)) * time.Millisecond
}

func backlogSize() int { return result.Scaled(100_000, 1_000) }

// pollDrainLimit bounds the polling relay's drain: at a few hundred rows/s the whole backlog
// would take minutes. herald's relay and River drain it whole (within drainLimit).
func pollDrainLimit() time.Duration {
	return time.Duration(result.Scaled(10_000, 2_000)) * time.Millisecond
}

const drainLimit = 3 * time.Minute

const (
	groupHerald  = "herald relay"
	groupPolling = "polling relay"
	groupRiver   = "River"
)

// BenchmarkScenarioRelay measures herald's CDC relay beside River and the seed's polling
// relay on the same load, each on its own scratch database and topics: latency from a row's
// due time to its record at a Kafka consumer (River: to its worker) at 100, 1,000 and 5,000
// rows/s, open loop; and the drain rate of a backlog written before the relay starts.
// herald's and River's phases run interleaved, in slices (latencyPhase), both running
// throughout; the polling relay's run after them. It runs once whatever b.N.
func BenchmarkScenarioRelay(b *testing.B) {
	res := result.New("relay", "due → visible at a Kafka consumer: herald's CDC relay vs River vs the seed's polling relay")
	backlog := backlogSize()
	res.Load = fmt.Sprintf("open loop at %d, %d and %d rows/s for %v, %v and %v, one notification + one delivery per transaction "+
		"(priorities in turn), %d writer connections; herald's and River's phases interleaved in slices of %v; "+
		"then a backlog of %d due rows written before the relay starts",
		rates[0], rates[1], rates[2], phaseDuration(rates[0]), phaseDuration(rates[1]), phaseDuration(rates[2]),
		generatorConns, sliceLength, backlog)
	bin := riverbench.Build(b) // compiled before anything is measured

	s := heraldSystem(b)
	quiet(b, res, s.name, "the phases")
	stop := s.start(b)
	s.warmUp(b, res, true)
	river := riverbench.Start(b, bin, "-tail", tailLimit().String(), "-backlog", strconv.Itoa(backlog), "-conns", strconv.Itoa(generatorConns))
	stop = s.phases(b, res, stop, river.Slice)
	stop()
	// herald's drain before River's: a slot decodes all the WAL written since it last
	// confirmed, other databases' included, and River's drain writes a great deal of it.
	s.reportDrain(b, res, s.drainPhase(b, backlog, drainLimit))
	quiet(b, res, groupRiver, "the drain")
	mergeRiver(res, river.Finish()) // River's phases reported, then its backlog drained alone

	s = pollingSystem(b)
	quiet(b, res, s.name, "the phases")
	stop = s.start(b)
	s.warmUp(b, res, false)
	stop = s.phases(b, res, stop, nil)
	stop()
	s.reportDrain(b, res, s.drainPhase(b, backlog, pollDrainLimit()))

	compare(b, res)
	charts(res)
	heraldtest.Must(b, res.Write())
}

// phases runs and reports s's latency phase at each rate, interleaved with other's when
// other is not nil. A phase that left rows invisible is followed by a restart of the relay
// (stop is the running relay's; phases returns the one running at the end), and the rows
// still PENDING are cancelled, so that the next phase starts without a backlog.
func (s *system) phases(b *testing.B, res *result.Result, stop func(), other func(rate int, slice time.Duration)) func() {
	for _, rate := range rates {
		before := s.sampleJIT(b)
		t0 := time.Now()
		l := s.latencyPhase(b, rate, phaseDuration(rate), tailLimit(), other)
		s.report(b, res, l)
		if share, ok := s.jitShare(b, before, time.Since(t0)); ok {
			res.Add(result.Figure{Group: s.name, Name: rateName(rate) + " broker compiler's share of a core", Value: share * 100, Unit: "%", Better: "lower"})
		}
		if l.invisible > 0 {
			stop()
			cancelled := s.cancelPending(b)
			res.Note("%s at %d rows/s: %d of %d rows were not visible %v after the last insert; they count with the latency they had then "+
				"(a lower bound), and %d rows still PENDING were cancelled before the next phase.",
				s.name, rate, l.invisible, l.fromDue.TotalCount(), tailLimit(), cancelled)
			stop = s.start(b)
		}
	}
	return stop
}

// quiet waits, before what of system name, for the cluster to deal with what the systems
// before it left (settle.Cluster): each is measured on a cluster as quiet as the first one
// had. The polling relay's last phase leaves tens of thousands of rows it did not publish,
// cancelled in one statement, and herald's drain a hundred thousand rows marked QUEUED,
// whose vacuum otherwise runs during the next measurement.
func quiet(b *testing.B, res *result.Result, name, what string) {
	waited := settle.Cluster(b, os.Getenv(stacktest.EnvPostgres), time.Minute)
	b.Logf("%s: the cluster settled in %s before %s (a CHECKPOINT, no autovacuum worker at work)", name, waited.Round(100*time.Millisecond), what)
	res.Add(result.Figure{Group: name, Name: "cluster settled before " + what, Value: waited.Seconds(), Unit: "s"})
}

// warmUp publishes a few rows before the measured phases: connections, topic metadata and
// producer ids are in place when the first phase starts. The run's first system also runs
// the middle rate, unmeasured, in rounds of warmUpDuration until the broker's just-in-time
// compiler is done with its produce and fetch paths (settle.BrokerJIT): a broker that has
// just started (this scenario run alone right after the stack started, or first in the
// suite, as it was until the suite ran it later) interprets them, and compiles them at its
// raised priority while the phases measure. A relay run right after the stack started had
// herald's p99 at 1,000 rows/s at 254 ms, the next one on the same stack at 35 ms
// (docs/benchmarks.md, "The broker's compiler, before the relay is measured").
func (s *system) warmUp(b *testing.B, res *result.Result, broker bool) {
	var ids []row
	for i := range 10 {
		id, err := s.insert(b.Context(), herald.Priorities[i%3])
		heraldtest.Must(b, err)
		ids = append(ids, row{id: id})
	}
	if !s.waitVisible(ids, time.Now().Add(time.Minute)) {
		b.Fatalf("%s: warm-up rows not visible after a minute", s.name)
	}
	if !broker {
		return
	}
	jit, err := settle.FindBrokerJIT()
	if err != nil {
		b.Logf("%s: the broker's compiler is not measured (%v): one warm-up round", s.name, err)
	} else {
		b.Logf("%s: the broker's compiler threads are read from process %s", s.name, jit.PID())
		s.jit = jit
	}
	start := time.Now()
	for round := 1; ; round++ {
		before := s.sampleJIT(b)
		t0 := time.Now()
		l := s.latencyPhase(b, rates[1], warmUpDuration(), tailLimit(), nil)
		line := fmt.Sprintf("%s: broker warm-up round %d at %d rows/s for %v: %d rows, %d not visible, commit → visible p99 %.2f ms",
			s.name, round, rates[1], warmUpDuration(), l.fromDue.TotalCount(), l.invisible, float64(l.commit.ValueAtQuantile(99))/1000)
		share, measured := s.jitShare(b, before, time.Since(t0))
		if measured {
			line += fmt.Sprintf("; the broker's compiler threads used %.0f %% of a core", share*100)
		}
		b.Log(line)
		// Not measured: quiet when the compiler is not read at all, and not when one of its
		// threads ended (a lower bound).
		if quiet := s.jit == nil || measured && share < jitQuiet; quiet || round == warmUpRounds {
			res.Add(result.Figure{Group: s.name, Name: "broker warm-up before the phases", Value: time.Since(start).Seconds(), Unit: "s"})
			if measured {
				res.Add(result.Figure{Group: s.name, Name: "broker compiler's share of a core in the last warm-up round", Value: share * 100, Unit: "%"})
			}
			return
		}
	}
}

// sampleJIT samples the broker's compiler threads, or returns nil when they are not measured.
// A sample that fails ends the measurement (logged).
func (s *system) sampleJIT(b *testing.B) settle.JITSample {
	if s.jit == nil {
		return nil
	}
	sample, err := s.jit.Sample()
	if err != nil {
		b.Logf("%s: the broker's compiler is no longer measured (%v)", s.name, err)
		s.jit = nil
	}
	return sample
}

// jitShare is the share of a core the broker's compiler threads used over took since before
// (sampleJIT). ok is false when they are not measured, or when a compiler thread ended in
// between (HotSpot ends those it no longer needs): the share would then be a lower bound, which
// cannot say that the compiler was quiet.
func (s *system) jitShare(b *testing.B, before settle.JITSample, took time.Duration) (share float64, ok bool) {
	if before == nil {
		return 0, false
	}
	after := s.sampleJIT(b)
	if after == nil {
		return 0, false
	}
	used, whole := after.Since(before)
	if !whole {
		b.Logf("%s: a compiler thread of the broker ended while it was measured", s.name)
	}
	return used.Seconds() / took.Seconds(), whole
}

// The broker warm-up ends after the first round in which the broker's compiler threads used
// less than jitQuiet of a core, or after warmUpRounds rounds.
const (
	jitQuiet     = 0.05
	warmUpRounds = 12
)
