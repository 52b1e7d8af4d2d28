package events

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/endpoint"
	"github.com/heraldhq/herald/internal/sleep"
)

// consumer reads the events topic. A polled batch becomes webhook_message rows (one
// statement) before its offsets are marked for commit; it then hands each message to its
// endpoint's queue without waiting, so no endpoint can hold the consumer up.
type consumer struct {
	r  *Role
	cl *kgo.Client
}

func (r *Role) newConsumer() (*consumer, error) {
	c := &consumer{r: r}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(r.cfg.Brokers...),
		kgo.ConsumeTopics(r.cfg.Topic),
		kgo.ConsumerGroup(r.cfg.Group),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(500 * time.Millisecond),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				r.log.Warn("commit on revoke", zap.Error(err))
			}
		}),
	}, r.cfg.ClientOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	c.cl = cl
	return c, nil
}

func (c *consumer) run(ctx context.Context) error {
	for {
		fs := c.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fs.EachError(func(t string, p int32, err error) {
			c.r.log.Warn("fetch", zap.String("topic", t), zap.Int32("partition", p), zap.Error(err))
		})
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := c.enqueue(ctx, recs); err != nil {
			return err
		}
		c.cl.MarkCommitRecords(recs...)
	}
}

// enqueue writes the messages the records owe, retrying a failed write (PostgreSQL away)
// until it succeeds or ctx ends: a record is never committed unwritten.
func (c *consumer) enqueue(ctx context.Context, recs []*kgo.Record) error {
	evs := make([]endpoint.Event, 0, len(recs))
	bodies := make([][]byte, 0, len(recs))
	for _, rec := range recs {
		ev, err := parseRecord(rec)
		if err == nil {
			var b []byte
			if b, err = ev.Body(); err == nil {
				evs, bodies = append(evs, ev), append(bodies, b)
				continue
			}
		}
		c.r.metrics.skipped.Add(ctx, 1)
		c.r.log.Warn("record skipped", zap.Int32("partition", rec.Partition), zap.Int64("offset", rec.Offset), zap.Error(err))
	}
	if len(evs) == 0 {
		return nil
	}
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		msgs, err := endpoint.Enqueue(ctx, c.r.pool, evs, bodies, c.r.cfg.Lease)
		if err == nil {
			for _, m := range msgs {
				c.r.queues.hand(m)
			}
			return nil
		}
		c.r.log.Warn("enqueue webhook messages", zap.Int("events", len(evs)), zap.Error(err))
		if err := sleep.For(ctx, wait); err != nil {
			return err
		}
	}
}

// close commits what was marked and leaves the group, within budget: on a loaded broker a
// leave can wait on the coordinator (and franz-go's Close waits for the leave), and the
// process's shutdown budget is not the group's to spend. Past the budget the close goes on in
// the background while the process exits: the broker then drops this member after its
// session timeout, and events consumed but not committed are read again by the next member,
// where their messages already exist (Enqueue: ON CONFLICT DO NOTHING).
func (c *consumer) close(budget time.Duration) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		if err := c.cl.CommitMarkedOffsets(ctx); err != nil && !errors.Is(err, context.Canceled) {
			c.r.log.Warn("final commit", zap.Error(err))
		}
		if err := c.cl.LeaveGroupContext(ctx); err != nil {
			c.r.log.Warn("leave group", zap.Error(err))
		}
		c.cl.Close()
	}()
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		c.r.log.Warn("leaving the consumer group takes longer than the shutdown allows; the broker drops this member after its session timeout",
			zap.Duration("budget", budget))
	}
}
