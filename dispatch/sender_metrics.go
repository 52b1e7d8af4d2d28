package dispatch

import (
	"context"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/attrset"
	"github.com/heraldhq/herald/senders"
)

// measured decorates a Sender with the provider metrics: the duration of each call by
// outcome, failed calls by class, and, for a delivery's first attempt, the time from the
// API's accept to the call (the HIGH latency SLO reads it). A FanOutSender stays one (see
// measure).
type measured struct {
	Sender
	m *metrics
}

// measuredFanOut is measured for a FanOutSender: SendEach is timed as one call of the
// sender's own provider, like Send.
type measuredFanOut struct {
	measured
	f FanOutSender
}

// measure wraps every sender of ss with its metrics.
func measure(ss map[herald.Channel]Sender, m *metrics) map[herald.Channel]Sender {
	out := make(map[herald.Channel]Sender, len(ss))
	for ch, s := range ss {
		if s == nil {
			continue
		}
		if rs, ok := s.(RoutedSender); ok {
			out[ch] = measuredRouted{RoutedSender: rs, m: m}
			continue
		}
		if f, ok := s.(FanOutSender); ok {
			out[ch] = measuredFanOut{measured: measured{Sender: s, m: m}, f: f}
			continue
		}
		out[ch] = measured{Sender: s, m: m}
	}
	return out
}

func (s measured) Send(ctx context.Context, msg *senders.Message) (senders.Result, error) {
	begin := s.called(ctx, msg)
	res, err := s.Sender.Send(ctx, msg)
	s.done(ctx, msg, begin, err)
	return res, err
}

func (s measuredFanOut) SendEach(ctx context.Context, msg *senders.Message, admit func(ctx context.Context, account string) error) (senders.Result, error) {
	var (
		once  sync.Once
		begin time.Time // set by the first admitted call; SendEach returns after its calls
	)
	res, err := s.f.SendEach(ctx, msg, func(ctx context.Context, account string) error {
		err := admit(ctx, account)
		if err == nil {
			once.Do(func() { begin = s.called(ctx, msg) })
		}
		return err
	})
	if !begin.IsZero() { // at least one call went out
		s.done(ctx, msg, begin, err)
	}
	return res, err
}

func (s measuredFanOut) Accounts() []string { return s.f.Accounts() }

// callAttrs are the accept → call latency's labels: priority, channel, provider.
var callAttrs = attrset.New(func(k [3]string) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("priority", k[0]), attribute.String("channel", k[1]),
		attribute.String("provider", k[2])}
})

// A call's labels: provider, channel and its outcome (for its duration) or class (for its
// error).
var callOutcomeAttrs, callClassAttrs = callDoneAttrs("outcome"), callDoneAttrs("class")

func callDoneAttrs(last string) *attrset.Cache[[3]string] {
	return attrset.New(func(k [3]string) []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("provider", k[0]), attribute.String("channel", k[1]),
			attribute.String(last, k[2])}
	})
}

// called records the accept → call latency of a first attempt (for HIGH, also the adaptive
// limits' signal) and returns the call's start.
func (s measured) called(ctx context.Context, msg *senders.Message) time.Time {
	now := time.Now()
	if msg.Attempt == 1 && !msg.AcceptedAt.IsZero() {
		if msg.Priority == herald.PriorityHigh {
			s.m.adapt.ObserveHigh(now.Sub(msg.AcceptedAt))
		}
		s.m.acceptToCall.Record(ctx, now.Sub(msg.AcceptedAt).Seconds(),
			callAttrs.Of([3]string{string(msg.Priority), string(msg.Channel), s.Provider()}))
	}
	return now
}

// done records a call's duration and, for a failure, its class.
func (s measured) done(ctx context.Context, msg *senders.Message, begin time.Time, err error) {
	outcome := "ok"
	if err != nil {
		class, _ := senders.Classify(err)
		outcome = strings.ToLower(class.String())
	}
	k := [3]string{s.Provider(), string(msg.Channel), outcome}
	s.m.calls.Record(ctx, time.Since(begin).Seconds(), callOutcomeAttrs.Of(k))
	if err != nil {
		s.m.callErrors.Add(ctx, 1, callClassAttrs.Of(k))
	}
}
