package cdc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/sleep"
)

// Relay streams due delivery rows to Kafka. Any number of relays may run against one
// database; exactly one of them — the holder of the leader lock — streams, sweeps and reaps
// at a time. The others wait to take over.
type Relay struct {
	cfg     Config
	pool    *pgxpool.Pool
	kafka   *kgo.Client
	log     *zap.Logger
	pub     *publisher
	metrics *metrics
	// reapHook, when set (tests of this package), is called after every reaper pass.
	reapHook func()
	ready    atomic.Int32 // relayStarting, relayStandby or relayStreaming (ready.go)
}

// New returns a relay. pool serves the relay's ordinary queries (marking, sweeping,
// reaping); the replication and leader-lock sessions are opened from cfg.ConnString, or from
// the pool's connection string. kafka produces the records: give the relay its own client
// without linger (kgo.ProducerLinger(0)), so a HIGH row is not held back to fill a batch.
func New(cfg Config, pool *pgxpool.Pool, kafka *kgo.Client, log *zap.Logger) (*Relay, error) {
	if pool == nil || kafka == nil {
		return nil, errors.New("cdc: New needs a pool and a Kafka client")
	}
	if log == nil {
		log = zap.NewNop()
	}
	cfg = cfg.withDefaults(pool.Config().ConnString())
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// Produce blocks when the client's buffer is full, and a blocked stream goroutine sends no
	// status updates: the relay's own bounds must fit in the buffer.
	events := cmp.Or(cfg.EventsKafka, kafka)
	producers := map[herald.Priority]*kgo.Client{}
	clients := []*kgo.Client{kafka, events}
	for _, p := range herald.Priorities {
		producers[p] = cmp.Or(cfg.Producers[p], kafka)
		clients = append(clients, producers[p])
	}
	for _, cl := range clients {
		if buffered := optInt(cl.OptValue(kgo.MaxBufferedRecords)); buffered > 0 && int64(cfg.MaxInFlight+cfg.SweepBatch) > buffered {
			return nil, fmt.Errorf("cdc config: MaxInFlight %d + SweepBatch %d exceed a Kafka client's MaxBufferedRecords %d",
				cfg.MaxInFlight, cfg.SweepBatch, buffered)
		}
	}
	if linger, _ := producers[herald.PriorityHigh].OptValue(kgo.ProducerLinger).(time.Duration); linger > 0 {
		return nil, fmt.Errorf("cdc config: the producer of HIGH records lingers %v: HIGH records must go out at once (kgo.ProducerLinger(0))", linger)
	}
	pub := &publisher{producers: producers, events: events, topics: cfg.Topics, eventsTopic: cfg.EventsTopic, tracer: otel.Tracer(instrumentation),
		observe: cfg.ObservePublished}
	m, err := newMetrics(pub, cfg.Slot)
	if err != nil {
		return nil, err
	}
	pub.metrics = m
	return &Relay{
		cfg: cfg, pool: pool, kafka: kafka, pub: pub, metrics: m,
		log: log.With(zap.String("component", "cdc"), zap.String("slot", cfg.Slot)),
	}, nil
}

// Run campaigns for leadership and, while leader, streams, sweeps and reaps. It returns nil
// when ctx ends. A lost leadership (lock session or replication session gone) ends the term;
// Run then campaigns again after Config.LeaderRetry.
func (r *Relay) Run(ctx context.Context) error {
	defer func() { _ = r.metrics.close() }()
	for {
		err := r.campaign(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			r.log.Warn("relay term ended", zap.Error(err))
		}
		if sleep.For(ctx, r.cfg.LeaderRetry) != nil {
			return nil
		}
	}
}

// lead runs one leadership term: the stream, the sweeper, the reaper and the slot-lag probe,
// until one of them fails, the lock session is lost or ctx ends.
func (r *Relay) lead(ctx context.Context, lock *pgx.Conn) error {
	mk := newMarker(r.pool, r.cfg.MarkBatch, r.cfg.MarkGather, r.log, r.metrics)
	// The marker outlives the stream so that the records the stream drains on shutdown are
	// still marked QUEUED.
	mctx, mcancel := context.WithCancel(context.WithoutCancel(ctx))
	var mwg sync.WaitGroup
	mwg.Go(func() { mk.run(mctx) })
	defer func() {
		mcancel()
		mwg.Wait()
	}()

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return r.watchLock(gctx, lock) })
	g.Go(func() error { return r.stream(gctx, mk) })
	g.Go(func() error { return newSweeper(r.cfg, r.pool, r.pub, mk, r.metrics, r.log).run(gctx) })
	g.Go(func() error {
		rp := newReaper(r.cfg, r.pool, newLaneProgress(kadm.NewClient(r.kafka), r.cfg.Topics, r.cfg.ConsumerGroups), r.metrics, r.log)
		rp.passHook = r.reapHook
		return rp.run(gctx)
	})
	g.Go(func() error { return r.probeSlotLag(gctx) })
	return g.Wait()
}

// stream sets up topics, publication and slot, then runs one replication session.
func (r *Relay) stream(ctx context.Context, mk *marker) error {
	if err := ensureTopics(ctx, r.kafka, r.cfg); err != nil {
		return err
	}
	if err := ensurePublication(ctx, r.pool, r.cfg.Publication); err != nil {
		return err
	}
	rc, err := replicationConfig(r.cfg.ConnString, "herald-relay")
	if err != nil {
		return err
	}
	conn, err := pgconn.ConnectConfig(ctx, rc)
	if err != nil {
		return fmt.Errorf("open replication session: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if err := r.dropLostSlot(ctx, conn); err != nil {
		return err
	}
	created, err := ensureSlot(ctx, conn, r.cfg.Slot)
	if err != nil {
		return err
	}
	if created {
		r.log.Info("created replication slot; rows committed before it reach Kafka through the sweeper")
	}
	var start pglogrepl.LSN
	if err := r.pool.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`,
		r.cfg.Slot).Scan(&start); err != nil {
		return fmt.Errorf("read confirmed position of slot %s: %w", r.cfg.Slot, err)
	}
	st := newStream(r.cfg, conn, start, r.pub, mk, r.log)
	st.started = func() { r.ready.Store(relayStreaming) }
	err = st.run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// dropLostSlot drops the slot if PostgreSQL invalidated it (it fell behind
// max_slot_wal_keep_size): such a slot can never stream again, and a relay that only retried
// would be down for good. ensureSlot then creates a new one; the rows in the gap reach Kafka
// through the sweeper's grace-period scan.
func (r *Relay) dropLostSlot(ctx context.Context, conn *pgconn.PgConn) error {
	var status string
	err := r.pool.QueryRow(ctx, `SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = $1`,
		r.cfg.Slot).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && status != "lost" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read status of slot %s: %w", r.cfg.Slot, err)
	}
	r.log.Error("replication slot was invalidated (max_slot_wal_keep_size); dropping and recreating it, the sweeper publishes what the gap held")
	if err := pglogrepl.DropReplicationSlot(ctx, conn, r.cfg.Slot, pglogrepl.DropReplicationSlotOptions{}); err != nil {
		return fmt.Errorf("drop lost slot %s: %w", r.cfg.Slot, err)
	}
	return nil
}

// slotLagSQL reads the slot's lag in bytes and in time. The time is PostgreSQL's own flush_lag
// of the walsender that serves the slot: how long recently flushed WAL waited for the relay's
// confirmation. It is NULL while the stream is caught up and idle (0 here) and while no
// walsender serves the slot (-1: unknown; the leader metric tells that story). A slot still
// being created has no confirmed position yet: no row, nothing measured.
const slotLagSQL = `
SELECT (pg_current_wal_lsn() - s.confirmed_flush_lsn)::bigint,
       CASE WHEN s.active_pid IS NULL THEN -1
            ELSE coalesce((extract(epoch FROM r.flush_lag) * 1000)::bigint, 0) END
  FROM pg_replication_slots s
  LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
 WHERE s.slot_name = $1 AND s.confirmed_flush_lsn IS NOT NULL`

// probeSlotLag measures how far the slot's confirmed position is behind the server's WAL.
func (r *Relay) probeSlotLag(ctx context.Context) error {
	t := time.NewTicker(r.cfg.StatusInterval)
	defer t.Stop()
	for {
		var lag, lagMilli int64
		err := r.pool.QueryRow(ctx, slotLagSQL, r.cfg.Slot).Scan(&lag, &lagMilli)
		switch {
		case err == nil:
			r.metrics.slotLagBytes.Store(lag)
			r.metrics.slotLagMilli.Store(lagMilli)
		case errors.Is(err, pgx.ErrNoRows), ctx.Err() != nil:
		default:
			r.log.Warn("measure slot lag", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NewProducers makes Config.Producers as herald serve does: a client of its own, with opts
// and without linger, for NORMAL's records and one for LOW's; HIGH's go out on the relay's
// client (docs/cdc.md, "One producer per priority"). On an error it closes the clients it
// made.
func NewProducers(opts ...kgo.Opt) (map[herald.Priority]*kgo.Client, error) {
	out := map[herald.Priority]*kgo.Client{}
	for _, p := range []herald.Priority{herald.PriorityNormal, herald.PriorityLow} {
		cl, err := kgo.NewClient(append(slices.Clip(opts), kgo.ProducerLinger(0))...)
		if err != nil {
			CloseProducers(out)
			return nil, fmt.Errorf("kafka client for %s records: %w", p, err)
		}
		out[p] = cl
	}
	return out, nil
}

// CloseProducers closes the clients of NewProducers.
func CloseProducers(producers map[herald.Priority]*kgo.Client) {
	for _, cl := range producers {
		cl.Close()
	}
}

func optInt(v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int64:
		return n
	}
	return 0
}
