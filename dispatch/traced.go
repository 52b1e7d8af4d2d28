package dispatch

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
)

// traced decorates a Sender with the dispatch.send span: a client span around the provider
// call, passed to the sender in its context, with the attempt number and the provider. A
// FanOutSender stays one, its span around the whole fan-out.
type traced struct{ Sender }

type tracedFanOut struct {
	traced
	f FanOutSender
}

// tracedRouted is traced for a RoutedSender: the account it routes each attempt to is
// traced as itself, so the span names the account, and routing still sees a RoutedSender.
type tracedRouted struct{ RoutedSender }

func (s tracedRouted) Route(ctx context.Context, a RouteAttempt) Sender {
	return traced{s.RoutedSender.Route(ctx, a)}
}

// traceSends wraps every sender of ss with its span.
func traceSends(ss map[herald.Channel]Sender) map[herald.Channel]Sender {
	out := make(map[herald.Channel]Sender, len(ss))
	for ch, s := range ss {
		if rs, ok := s.(RoutedSender); ok {
			out[ch] = tracedRouted{rs}
			continue
		}
		if f, ok := s.(FanOutSender); ok {
			out[ch] = tracedFanOut{traced: traced{s}, f: f}
			continue
		}
		out[ch] = traced{s}
	}
	return out
}

func (s traced) Send(ctx context.Context, m *senders.Message) (senders.Result, error) {
	ctx, span := s.start(ctx, m)
	res, err := s.Sender.Send(ctx, m)
	endSpan(span, err)
	return res, err
}

func (s tracedFanOut) SendEach(ctx context.Context, m *senders.Message, admit func(ctx context.Context, account string) error) (senders.Result, error) {
	ctx, span := s.start(ctx, m)
	res, err := s.f.SendEach(ctx, m, admit)
	endSpan(span, err)
	return res, err
}

func (s tracedFanOut) Accounts() []string { return s.f.Accounts() }

func (s traced) start(ctx context.Context, m *senders.Message) (context.Context, trace.Span) {
	return tracer.Start(ctx, "dispatch.send", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.Int("herald.attempt", m.Attempt), attribute.String("herald.provider", s.Provider())))
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "send failed")
	}
	span.End()
}
