package route

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const instrumentation = "github.com/heraldhq/herald/dispatch/route"

// metrics are the router's OTel instruments (Prometheus names in docs/operations.md).
type metrics struct {
	decisions metric.Int64Counter // attempts routed, by account and reason
	steps     metric.Int64Counter // health steps, by account and direction
	reg       metric.Registration
}

func newMetrics(r *Router) (*metrics, error) {
	m := otel.Meter(instrumentation)
	var (
		ms  metrics
		err error
	)
	if ms.decisions, err = m.Int64Counter("herald.route.decisions",
		metric.WithDescription("Attempts routed to each provider account, by reason (weight, failover, pinned, probe).")); err != nil {
		return nil, err
	}
	if ms.steps, err = m.Int64Counter("herald.route.steps",
		metric.WithDescription("Health steps of each provider account (down: it gave up a share; up: a probe gave it back).")); err != nil {
		return nil, err
	}
	share, err := m.Float64ObservableGauge("herald.route.share",
		metric.WithDescription("Share of first attempts each provider account takes by its weight and current health (0..1)."))
	if err != nil {
		return nil, err
	}
	level, err := m.Int64ObservableGauge("herald.route.health_level",
		metric.WithDescription("Health level of each provider account: 0 healthy, up to the routing steps (no traffic but probes)."))
	if err != nil {
		return nil, err
	}
	ms.reg, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for _, s := range r.channels {
			levels := s.view.get()
			if r.usable() {
				if lv, err := r.st.levels(ctx, s.keys); err == nil {
					levels = lv
					s.view.set(lv)
				}
			}
			sh := shares(s.weights, levels, r.cfg.Steps)
			for i, a := range s.accounts {
				attrs := metric.WithAttributes(attribute.String("channel", string(s.ch)), attribute.String("account", a.name),
					attribute.String("standby", strconv.FormatBool(a.standby)))
				o.ObserveFloat64(share, sh[i], attrs)
				o.ObserveInt64(level, int64(levels[i]), attrs)
			}
		}
		return nil
	}, share, level)
	if err != nil {
		return nil, err
	}
	return &ms, nil
}

func (m *metrics) decided(ctx context.Context, s *Sender, i int, reason string) {
	a := s.accounts[i]
	m.decisions.Add(ctx, 1, metric.WithAttributes(attribute.String("channel", string(s.ch)),
		attribute.String("account", a.name), attribute.String("standby", strconv.FormatBool(a.standby)),
		attribute.String("reason", reason)))
}

func (m *metrics) stepped(ctx context.Context, s *Sender, i int, down bool) {
	dir := "up"
	if down {
		dir = "down"
	}
	m.steps.Add(ctx, 1, metric.WithAttributes(attribute.String("channel", string(s.ch)),
		attribute.String("account", s.accounts[i].name), attribute.String("direction", dir)))
}

func (m *metrics) close() error { return m.reg.Unregister() }
