package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/deliveryrecord"
	"github.com/heraldhq/herald/internal/tracelog"
)

// Defaults of the direct HIGH publish (herald serve's --publish-high and its producer).
const (
	// DefaultPublishHigh: an ingest process publishes its HIGH deliveries itself.
	DefaultPublishHigh = true
	// HighPublishTimeout bounds how long a direct HIGH record may wait for Kafka before it is
	// given up (kgo.RecordDeliveryTimeout): past it the relay's record has long been sent.
	HighPublishTimeout = 5 * time.Second
	// HighPublishBuffer bounds the direct HIGH records waiting for Kafka
	// (kgo.MaxBufferedRecords); beyond it a publish fails at once and the relay's counts.
	HighPublishBuffer = 1000
)

// Option configures the API beyond its Config: collaborators that only some processes have.
type Option func(*API)

// PublishHigh makes the API publish every HIGH delivery it accepts, due at once, to topic
// as soon as the accept has committed (docs/architecture.md, "HIGH does not wait for the
// WAL"). The relay still publishes the same row from the WAL: that record is the guarantee,
// this one only the shortcut, so a failed or lost publish costs latency, never a delivery,
// and dispatch drops whichever record comes second (the row is no longer PENDING). kafka
// should not linger (kgo.ProducerLinger(0)) and should bound a record's life
// (kgo.RecordDeliveryTimeout): while Kafka is away, the relay's record is the one that counts.
func PublishHigh(kafka *kgo.Client, topic string) Option {
	return func(a *API) {
		a.high = &highPublisher{kafka: kafka, topic: topic}
	}
}

// HandHigh makes the API hand each HIGH delivery that PublishHigh would publish to hand
// first: the HIGH lane of a dispatcher in the same process (dispatch.Dispatcher.Hand), which
// takes it without Kafka (docs/architecture.md, "Handed over in process"). A record hand
// does not take (no HIGH lane running here, no free worker slot) is published as without it.
// It needs PublishHigh.
func HandHigh(hand func(*kgo.Record) bool) Option {
	return func(a *API) {
		if a.high != nil {
			a.high.hand = hand
		}
	}
}

// highPublisher is the post-commit shortcut of PublishHigh.
type highPublisher struct {
	kafka *kgo.Client
	topic string
	hand  func(*kgo.Record) bool // HandHigh's, or nil
	// published counts records by outcome: ok (Kafka acknowledged), failed (produce failed or
	// the client's buffer was full; the relay's record covers both), handed (HandHigh).
	published metric.Int64Counter
}

// Outcomes of a direct HIGH publish, as the attribute "outcome".
const (
	highPublishOK     = "ok"
	highPublishFailed = "failed"
	highPublishHanded = "handed" // taken by the HIGH lane in process (HandHigh), not published
)

// promptAccept says whether the accept of in, when it is due at once, commits without
// waiting for its WAL flush, publishes, and only then waits for the flush before it answers
// (insertPrompt): a HIGH request, in a process that publishes HIGH itself. The flush, most of
// a commit's time when other sessions write much WAL (a campaign's lots, a burst of POSTs),
// then runs beside the record's way to the provider instead of before it. Until the flush,
// only a crash of the database server can lose the notification, and its request then gets no
// 202: the client's retry accepts it again, and the provider may have been called for the
// lost one too. That is the duplicate that HIGH's lanes accept already, a crash during a
// provider call being retried (RetryAmbiguous), and never a loss.
func (a *API) promptAccept(in *notificationInput) bool {
	return a.high != nil && in.Priority == herald.PriorityHigh
}

// insertPrompt writes note with delivery.InsertPromptDurable on a connection of db: once the
// rows are visible it ends the accept's span (accept, whose context is ctx: the accept is
// done), publishes note (publishHigh), and waits for the flush in a span of its own,
// ingest.durable, beside the accept in the request's trace (request).
func (a *API) insertPrompt(request, ctx context.Context, accept trace.Span, db *pgxpool.Pool, note delivery.Notification) (bool, error) {
	conn, err := db.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	var durable trace.Span
	inserted, err := delivery.InsertPromptDurable(ctx, conn.Conn(), note, func() {
		accept.AddEvent("visible")
		accept.End()
		a.publishHigh(request, note)
		_, durable = a.tracer.Start(request, "ingest.durable",
			trace.WithAttributes(attribute.String("herald.notification_id", note.ID.String())))
	})
	if durable != nil {
		if err != nil {
			durable.SetStatus(codes.Error, err.Error())
		}
		durable.End()
	}
	return inserted, err
}

// awaitDurable returns once the notification id a replay answers for is durable
// (delivery.AwaitDurable), in a span of its own.
func (a *API) awaitDurable(ctx context.Context, id string) error {
	ctx, span := a.tracer.Start(ctx, "ingest.durable", trace.WithAttributes(attribute.String("herald.notification_id", id)))
	defer span.End()
	if err := delivery.AwaitDurable(ctx, a.poolFor(herald.PriorityHigh)); err != nil {
		span.SetStatus(codes.Error, err.Error())
		return fmt.Errorf("notification %s: %w", id, err)
	}
	return nil
}

// publishHigh hands the HIGH deliveries of n, visible a moment ago, to Kafka, without
// waiting for the acknowledgement: the 202 answer does not wait for Kafka. A delivery due
// later (sendAt; HIGH has no quiet hours) is left to the sweeper, as the relay leaves it.
// Each record gets a producer span in the request's trace; its traceparent header is that
// span, so the worker's spans hang below it as below the relay's.
func (a *API) publishHigh(ctx context.Context, n delivery.Notification) {
	p := a.high
	if p == nil || n.Priority != herald.PriorityHigh || n.NextAttemptAt != nil {
		return
	}
	for _, d := range n.Deliveries {
		id := d.ID.String()
		sctx, span := a.tracer.Start(ctx, "ingest publish", trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.destination.name", p.topic),
			attribute.String("herald.delivery_id", id),
			attribute.Int("herald.attempt", 0),
			attribute.String("herald.source", "ingest"),
		))
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(sctx, carrier)
		rec, err := deliveryrecord.New(p.topic, herald.DeliveryMessage{DeliveryID: id, NotificationID: n.ID.String(),
			Channel: d.Channel, Priority: n.Priority}, carrier.Get(herald.HeaderTraceparent))
		if err != nil {
			a.highPublished(sctx, span, id, err)
			continue
		}
		if p.hand != nil && p.hand(rec) {
			span.SetAttributes(attribute.Bool("herald.handed", true))
			a.countHigh(highPublishHanded)
			span.End()
			continue
		}
		// TryProduce never blocks the request: with the client's buffer full (Kafka away) it
		// fails at once, and the relay's record is the one that counts.
		p.kafka.TryProduce(context.WithoutCancel(sctx), rec, func(_ *kgo.Record, err error) {
			a.highPublished(sctx, span, id, err)
		})
	}
}

// highPublished records the outcome of one direct HIGH publish and ends its span.
func (a *API) highPublished(ctx context.Context, span trace.Span, id string, err error) {
	outcome := highPublishOK
	if err != nil {
		outcome = highPublishFailed
		span.RecordError(err)
		span.SetStatus(codes.Error, "produce failed")
		if !errors.Is(err, kgo.ErrMaxBuffered) {
			a.log.Warn("direct HIGH publish failed; the relay publishes the delivery from the WAL",
				tracelog.Delivery(ctx, id), zap.Error(err))
		}
	}
	a.countHigh(outcome)
	span.End()
}

// countHigh counts one direct HIGH record by outcome.
func (a *API) countHigh(outcome string) {
	if a.high.published != nil {
		a.high.published.Add(context.Background(), 1, metric.WithAttributes(attribute.String("outcome", outcome)))
	}
}
