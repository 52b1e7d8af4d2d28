package relay

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/google/uuid"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/bench/internal/benchproc"
	"github.com/heraldhq/herald/bench/internal/settle"
	"github.com/heraldhq/herald/bench/relay/openloop"
	"github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// row is one delivery the generator wrote.
type row struct {
	id          string
	due, commit time.Time
}

// latency is one phase's outcome for one system and rate.
type latency struct {
	rate      int
	fromDue   *hdrhistogram.Histogram // due → visible: the figure (no coordinated omission)
	insert    *hdrhistogram.Histogram // due → COMMIT returned: the load generator's part
	commit    *hdrhistogram.Histogram // COMMIT returned → visible
	ack       *hdrhistogram.Histogram // COMMIT returned → Kafka acknowledged the record
	load      openloop.Stats
	invisible int // rows not visible when the phase gave up waiting
	// stages splits commit → Kafka ack for herald's relay (nil for the others).
	stages *breakdown
	// requests are herald's relay's produce requests during the phase (nil for the others).
	requests *requestStats
	// walRate is the WAL the whole PostgreSQL cluster wrote per second during the phase,
	// other databases' included: a logical replication slot reads all of it.
	walRate float64
	// cpu is the CPU used during s's slices (cpuUse), and otherCPU during the other
	// system's (zero without one).
	cpu, otherCPU cpuUse
}

// cpuUse is the CPU the whole machine, the PostgreSQL server, this process (the relay under
// test, the generator and the watching consumer) and the local broker (when there is one:
// brokerSeen) used over some slices.
type cpuUse struct {
	machine, postgres, self, broker, took time.Duration
	brokerSeen                            bool
}

// cores is u's CPU times as average numbers of busy cores.
func (u cpuUse) cores() (machine, postgres, self, broker float64) {
	if u.took <= 0 {
		return 0, 0, 0, 0
	}
	t := u.took.Seconds()
	return u.machine.Seconds() / t, u.postgres.Seconds() / t, u.self.Seconds() / t, u.broker.Seconds() / t
}

// cpuSample is the CPU times cpuUse adds up, so far.
func cpuSample(b testing.TB, pg benchproc.Postgres, broker int) cpuUse {
	var u cpuUse
	var err error
	u.machine, err = benchproc.MachineCPU()
	heraldtest.Must(b, err)
	u.postgres, err = pg.CPU()
	heraldtest.Must(b, err)
	u.self, err = benchproc.CPUOf(os.Getpid())
	heraldtest.Must(b, err)
	if broker > 0 {
		u.broker, err = benchproc.CPUOf(broker)
		heraldtest.Must(b, err)
	}
	return u
}

// measureCPU adds to u what was used while fn ran.
func (u *cpuUse) measureCPU(b testing.TB, pg benchproc.Postgres, broker int, fn func()) {
	c0, t0 := cpuSample(b, pg, broker), time.Now()
	fn()
	took := time.Since(t0)
	c1 := cpuSample(b, pg, broker)
	u.machine += c1.machine - c0.machine
	u.postgres += c1.postgres - c0.postgres
	u.self += c1.self - c0.self
	u.broker += c1.broker - c0.broker
	u.took += took
	u.brokerSeen = broker > 0
}

// localBrokerPID is the local broker's process id, or 0 when there is no single local broker.
func localBrokerPID() int {
	jit, err := settle.FindBrokerJIT()
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(jit.PID())
	return pid
}

// latencyPhase writes rate rows/s for d, open loop, one notification and one delivery per
// transaction (herald's insert, as ingest runs it: the statement and its COMMIT in one round
// trip), and measures each row from its due time to its record's arrival at s.watch. Rows
// not visible within tail after the last insert are counted at the moment the wait ended:
// a lower bound of their latency, and s.name's figures say how many.
//
// With other, the phase is cut into slices (sliceCount) and other runs a slice of another
// system's phase of the same rate and length after each of s's, or before it in every
// other pair (A B B A …), so that a burst of the machine's other load, or its drift, falls on
// both systems alike. s's relay keeps running through other's slices; its figures are over
// its own slices only.
func (s *system) latencyPhase(b *testing.B, rate int, d, tail time.Duration, other func(rate int, slice time.Duration)) latency {
	n := 1
	if other != nil {
		n = sliceCount(d)
	}
	slice := d / time.Duration(n)
	out := latency{rate: rate, fromDue: result.NewLatency(), insert: result.NewLatency(), commit: result.NewLatency(), ack: result.NewLatency()}
	if s.requests != nil {
		s.requests.reset()
	}
	var all []row
	var wal int64
	var busy time.Duration // the time of s's slices, inserts and waits
	for i := range n {
		if other != nil && i%2 == 1 {
			out.otherCPU.measureCPU(b, s.pg, s.broker, func() { other(rate, slice) })
		}
		out.cpu.measureCPU(b, s.pg, s.broker, func() {
			rows, w, took := s.slice(b, rate, slice, tail, &out)
			all, wal, busy = append(all, rows...), wal+w, busy+took
		})
		if other != nil && i%2 == 0 {
			out.otherCPU.measureCPU(b, s.pg, s.broker, func() { other(rate, slice) })
		}
	}
	out.walRate = float64(wal) / busy.Seconds()
	if s.stages != nil {
		bd := s.stages.breakdown(all)
		out.stages = &bd
		rs := s.requests.stats(busy)
		out.requests = &rs
	}
	return out
}

// sliceCount is how many slices an interleaved phase of length d is cut into: slices of
// about sliceLength, at least one.
func sliceCount(d time.Duration) int { return max(1, int((d+sliceLength/2)/sliceLength)) }

// sliceLength is the length of a slice of an interleaved phase: long enough that a slice's
// tail wait and the switch to the other system are a small part of it, short enough that
// the machine's bursts of other load (seconds) fall on both systems.
const sliceLength = 2 * time.Second

// slice is one slice of a latency phase: it writes the rows, waits for them (up to tail),
// and adds them to out. It returns the rows, the cluster's WAL written and the time taken.
func (s *system) slice(b *testing.B, rate int, d, tail time.Duration, out *latency) ([]row, int64, time.Duration) {
	ctx := context.Background()
	rows := make([]row, int(float64(rate)*d.Seconds()))
	var mu sync.Mutex
	n, base := 0, s.watch.count()
	stop := result.Progress(ctx, os.Stderr, "relay", 5*time.Second, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("%s at %d rows/s: %d inserted, %d visible", s.name, rate, n, s.watch.count()-base)
	})
	defer stop()
	wal0, t0 := s.walLSN(b), time.Now()
	st, err := openloop.Run(ctx, openloop.Config{Rate: float64(rate), Duration: d, Workers: generatorConns},
		func(ctx context.Context, i int, due time.Time) error {
			id, err := s.insert(ctx, herald.Priorities[i%3])
			if err != nil {
				return err
			}
			commit := time.Now()
			rows[i] = row{id: id, due: due, commit: commit}
			mu.Lock()
			n++
			mu.Unlock()
			return nil
		})
	heraldtest.Must(b, err)
	rows = slices.DeleteFunc(rows, func(r row) bool { return r.id == "" }) // skipped by the generator

	out.load = out.load.Add(st)
	deadline := time.Now().Add(tail)
	s.waitVisible(rows, deadline)
	wal, took := s.walLSN(b)-wal0, time.Since(t0)
	for _, r := range rows {
		at, ok := s.watch.visible(r.id)
		if !ok {
			at = deadline
			out.invisible++
		} else {
			_ = out.commit.RecordValue(max(1, at.Sub(r.commit).Microseconds()))
		}
		if acked, ok := s.acks.get(r.id); ok {
			_ = out.ack.RecordValue(max(1, acked.Sub(r.commit).Microseconds()))
		}
		_ = out.fromDue.RecordValue(max(1, at.Sub(r.due).Microseconds()))
		_ = out.insert.RecordValue(max(1, r.commit.Sub(r.due).Microseconds()))
	}
	return rows, wal, took
}

// insert writes one notification with one SMS delivery, due now, in its own transaction.
func (s *system) insert(ctx context.Context, p herald.Priority) (string, error) {
	nid, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	did, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	ok, err := delivery.Insert(ctx, s.accept, delivery.Notification{
		ID: nid, ClientID: s.clientID, IdempotencyKey: nid.String(), RequestHash: []byte{0},
		UserID: 1, Template: "bench", Category: "bench", Priority: p, Response: []byte(`{}`),
		Deliveries: []delivery.New{{ID: did, Channel: herald.ChannelSMS}},
	})
	if err == nil && !ok {
		err = fmt.Errorf("idempotency key %s taken", nid)
	}
	if err != nil {
		return "", fmt.Errorf("insert delivery: %w", err)
	}
	return did.String(), nil
}

// walLSN is the cluster's current WAL position, in bytes.
func (s *system) walLSN(b *testing.B) int64 {
	var lsn int64
	heraldtest.Must(b, s.pool.QueryRow(context.Background(), `SELECT (pg_current_wal_lsn() - '0/0')::bigint`).Scan(&lsn))
	return lsn
}

// waitVisible waits until every row is visible or deadline passes, and reports whether all
// are. It walks the rows once, in insert order, waiting at the first one not yet visible.
func (s *system) waitVisible(rows []row, deadline time.Time) bool {
	for i := 0; i < len(rows); {
		if _, ok := s.watch.visible(rows[i].id); ok {
			i++
			continue
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// cancelPending ends the rows a relay left PENDING (CANCELLED), so that the next phase
// starts without a backlog. Run with the relay stopped.
func (s *system) cancelPending(b *testing.B) int {
	tag, err := s.pool.Exec(context.Background(), `UPDATE delivery SET status = 'CANCELLED' WHERE status = 'PENDING'`)
	heraldtest.Must(b, err)
	return int(tag.RowsAffected())
}

// drain is the drain of a backlog by one system.
type drain struct {
	rows    int           // backlog size
	visible int           // rows visible when the drain ended
	elapsed time.Duration // relay start → all visible (or the cap)
	first   time.Duration // relay start → the first row visible (sampled every 50 ms)
	curve   result.Series // rows visible over seconds since the relay started
}

func (d drain) rate() float64 { return float64(d.visible) / d.elapsed.Seconds() }

// streamRate is the rate once rows flowed: from the first row visible to the end, without
// the relay's start-up (over at least one 50 ms sample, the resolution of first).
func (d drain) streamRate() float64 {
	return float64(d.visible) / max(d.elapsed-d.first, drainSample).Seconds()
}

// drainSample is how often a drain samples the rows visible.
const drainSample = 50 * time.Millisecond

// drainPhase writes a backlog of n due rows (10,000 per transaction, priorities in turn)
// while no relay runs, starts the relay and measures until every row is visible, or until
// limit passes (the polling relay would take minutes).
func (s *system) drainPhase(b *testing.B, n int, limit time.Duration) drain {
	for from, i := 0, 0; from < n; from, i = from+10000, i+1 {
		deliverytest.Backlog(b, s.pool, min(10000, n-from), deliverytest.Spec{ClientID: s.clientID,
			Template: "bench", Category: "bench", Priority: herald.Priorities[i%3]})
	}
	base := s.watch.count()
	d := drain{rows: n, curve: result.Series{Name: s.name}}
	ctx := context.Background()
	stopProgress := result.Progress(ctx, os.Stderr, "relay", 5*time.Second, func() string {
		return fmt.Sprintf("%s draining %d: %d visible", s.name, n, s.watch.count()-base)
	})
	defer stopProgress()
	start := time.Now()
	stop := s.start(b)
	defer stop()
	deadline := start.Add(limit)
	for {
		now := time.Now()
		d.visible = s.watch.count() - base
		if d.visible > 0 && d.first == 0 {
			d.first = now.Sub(start)
		}
		d.curve.X = append(d.curve.X, now.Sub(start).Seconds())
		d.curve.Y = append(d.curve.Y, float64(d.visible))
		if d.visible >= n || now.After(deadline) {
			d.elapsed = now.Sub(start)
			stopProgress() // before the relay's shutdown, which is not part of the drain
			return d
		}
		time.Sleep(drainSample)
	}
}
