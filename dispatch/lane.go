package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/adapt"
	"github.com/heraldhq/herald/internal/sleep"
)

// revokeWait bounds how long a revoke waits for the revoked partitions' in-flight
// deliveries before it commits what is finished; it stays well under Kafka's rebalance
// timeout (60 s by default).
const revokeWait = 20 * time.Second

// lane is one priority's consumer: its own kgo client and group, its own concurrency.
// Nothing in one lane waits on another.
type lane struct {
	d        *Dispatcher
	prio     herald.Priority
	cfg      LaneConfig
	log      *zap.Logger
	attrs    metric.MeasurementOption
	tracker  *offsetTracker
	outcomes *outcomeWriter

	limit *adapt.Limiter // NORMAL and LOW: the adaptive share of Concurrency; nil for HIGH
	hand  handoff        // records handed over in process (Dispatcher.Hand): HIGH's

	cl       *kgo.Client
	commitMu sync.Mutex    // serialises commits so that committed offsets only grow
	stopping chan struct{} // closed when the lane stops taking records
	assigned atomic.Bool   // the group has been joined and an assignment received (ready.go)
}

func newLane(d *Dispatcher, p herald.Priority) *lane {
	return &lane{
		d: d, prio: p, cfg: d.cfg.Lanes[p],
		log:      d.log.With(zap.String("lane", string(p))),
		attrs:    metric.WithAttributes(attribute.String("priority", string(p))),
		tracker:  newOffsetTracker(),
		outcomes: newOutcomeWriter(d.pool, d.log.With(zap.String("lane", string(p)))),
		stopping: make(chan struct{}),
		limit:    laneLimit(d.cfg.Adapt, p, d.cfg.Lanes[p].Concurrency),
	}
}

func (l *lane) open() error {
	opts := []kgo.Opt{
		kgo.SeedBrokers(l.d.cfg.Brokers...),
		kgo.ConsumerGroup(l.cfg.Group),
		kgo.ConsumeTopics(l.cfg.Topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(l.onAssigned),
		kgo.OnPartitionsRevoked(l.onRevoked),
		kgo.OnPartitionsLost(l.onLost),
	}
	cl, err := kgo.NewClient(append(opts, l.d.cfg.ClientOptions...)...)
	if err != nil {
		return err
	}
	l.cl = cl
	return nil
}

// run polls and fans records out to at most Concurrency goroutines until ctx ends, then
// drains: stop fetching, let in-flight deliveries finish within ShutdownTimeout (then cancel
// them), commit, leave the group.
func (l *lane) run(ctx context.Context) (cancelled int) {
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	w := &workers{sem: make(chan struct{}, l.cfg.Concurrency)}
	l.outcomes.start()
	commitCtx, stopCommits := context.WithCancel(context.WithoutCancel(ctx))
	commitsDone := make(chan struct{})
	go func() {
		defer close(commitsDone)
		l.commitLoop(commitCtx)
	}()

	parkCtx, stopParking := context.WithCancel(ctx)
	parked := l.followLimit(parkCtx, w)

	l.hand.open(workCtx, w, l.runBatch, func(it batchItem, settled bool) { l.freeSlot(w, it, settled) })
	l.poll(ctx, workCtx, w)
	l.hand.close()

	stopParking()
	<-parked
	close(l.stopping)
	l.cl.PauseFetchTopics(l.cfg.Topic)
	cancelled = l.drain(w, cancelWork)
	l.outcomes.stop() // every worker is done: no outcome is still to be handed over
	stopCommits()
	<-commitsDone
	l.commit(context.WithoutCancel(ctx), nil)
	l.cl.Close() // leaves the group; the final revoke commits nothing new
	return cancelled
}

// workers are a lane's worker slots and the batches running in them.
type workers struct {
	sem chan struct{} // one token per busy slot
	wg  sync.WaitGroup
}

// freeSlot settles one record of a batch: its offset may be committed once settled (else the
// shutdown deadline cut it off and it is left uncommitted), and its worker slot is free again.
func (l *lane) freeSlot(w *workers, it batchItem, settled bool) {
	if settled && it.tr != nil { // a handed record (tr nil) has no offset
		l.tracker.done(it.tr)
	}
	<-w.sem
	l.signal(signalProcessed)
}

// poll hands what each poll returns to the path, in batches, until ctx ends. A record not
// started by then is left uncommitted for the next owner of its partition.
func (l *lane) poll(ctx, workCtx context.Context, w *workers) {
	finish := func(it batchItem, settled bool) { l.freeSlot(w, it, settled) }
	for {
		fetches := l.cl.PollRecords(ctx, l.cfg.Concurrency)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		fetches.EachError(func(topic string, p int32, err error) {
			l.log.Warn("fetch", zap.String("topic", topic), zap.Int32("partition", p), zap.Error(err))
		})
		recs := fetches.Records()
		if len(recs) == 0 && len(fetches.Errors()) > 0 {
			// Kafka is unreachable or the group is rebalancing: do not spin on errors.
			_ = sleep.For(ctx, time.Second)
			continue
		}
		items := make([]batchItem, len(recs))
		for i, r := range recs {
			items[i] = batchItem{rec: r, tr: l.tracker.add(r)}
		}
		for len(items) > 0 {
			var batch []batchItem
			var ok bool
			if batch, items, ok = l.nextBatch(ctx, w.sem, items); !ok {
				return
			}
			if len(batch) == 0 {
				continue
			}
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				l.runBatch(workCtx, batch, finish)
			}()
		}
	}
}

// nextBatch takes the next batch off items, one worker slot per record: the first record of a
// batch waits for a free slot, the others join it while slots are free at once. In the HIGH
// lane that is all: a lone record never waits for company. The other lanes wait up to
// batchWait for more slots to free when records are waiting for them, so that a steady flow,
// which frees one slot at a time, still makes batches. ok=false: ctx ended first.
func (l *lane) nextBatch(ctx context.Context, sem chan struct{}, items []batchItem) (batch, rest []batchItem, ok bool) {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil, items, false
	}
	var gather *time.Timer
	defer func() {
		if gather != nil {
			gather.Stop()
		}
	}()
	for len(items) > 0 && len(batch) < maxClaimBatch {
		if len(batch) > 0 && !l.slot(ctx, sem, &gather) {
			break
		}
		it := items[0]
		items = items[1:]
		if !l.tracker.start(it.tr) { // its partition was revoked: the new owner gets it
			<-sem
			if len(batch) == 0 {
				break // its slot went back: wait for one again
			}
			continue
		}
		batch = append(batch, it)
	}
	return batch, items, true
}

// drain waits for the running batches up to ShutdownTimeout, then cancels them (cancel) and
// waits for them to return; it returns how many records were still in flight then.
func (l *lane) drain(w *workers, cancel context.CancelFunc) (cancelled int) {
	drained := make(chan struct{})
	go func() { w.wg.Wait(); close(drained) }()
	t := time.NewTimer(l.d.cfg.ShutdownTimeout)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
		cancelled, _ = l.tracker.inFlight(nil)
		l.log.Warn("shutdown deadline: cancelling in-flight deliveries", zap.Int("in_flight", cancelled))
		cancel()
		<-drained
	}
	return cancelled
}

// unreachable reports whether err says the database could not be reached (as opposed to a
// query that failed).
func unreachable(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) || pgconn.SafeToRetry(err)
}

func (l *lane) commitLoop(ctx context.Context) {
	t := time.NewTicker(l.d.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.commit(ctx, nil)
		}
	}
}

// commit synchronously commits the finished prefix of the given partitions (all when nil).
func (l *lane) commit(ctx context.Context, parts map[string][]int32) {
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	offsets := l.tracker.uncommitted(parts)
	if len(offsets) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var commitErr error
	l.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err == nil {
			commitErr = responseError(resp)
		}
	})
	if commitErr != nil {
		if ctx.Err() == nil {
			l.log.Warn("commit offsets", zap.Error(commitErr))
		}
		return
	}
	l.tracker.committed(offsets)
}

// onRevoked waits (bounded) for the revoked partitions' in-flight deliveries, commits their
// finished prefix with a blocking commit, and forgets them.
func (l *lane) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	deadline := time.NewTimer(revokeWait)
	defer deadline.Stop()
wait:
	for {
		n, changed := l.tracker.inFlight(revoked)
		if n == 0 {
			break
		}
		select {
		case <-changed:
		case <-deadline.C:
			l.log.Warn("revoke: committing without deliveries still in flight", zap.Int("in_flight", n))
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	l.commit(context.WithoutCancel(ctx), revoked)
	l.tracker.drop(revoked)
}

// onLost forgets lost partitions without committing: another member may own them already.
func (l *lane) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	l.tracker.drop(lost)
}

// responseError returns the first per-partition error of an offset commit response.
func responseError(resp *kmsg.OffsetCommitResponse) error {
	if resp == nil {
		return nil
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("commit %s/%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// batchWait bounds how long a NORMAL or LOW batch waits for more worker slots to free.
const batchWait = 2 * time.Millisecond

// slot takes one more worker slot for the batch being made: at once if one is free; in the
// HIGH lane not at all otherwise; in the others within batchWait of the batch's first wait
// (*gather, started then).
func (l *lane) slot(ctx context.Context, sem chan struct{}, gather **time.Timer) bool {
	select {
	case sem <- struct{}{}:
		return true
	default:
	}
	if l.prio == herald.PriorityHigh {
		return false
	}
	if *gather == nil {
		*gather = time.NewTimer(batchWait)
	}
	select {
	case sem <- struct{}{}:
		return true
	case <-(*gather).C:
		return false
	case <-ctx.Done():
		return false
	}
}
