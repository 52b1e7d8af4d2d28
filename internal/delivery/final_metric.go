package delivery

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/attrset"
)

// Final is how a delivery ended, for the final-outcome metric. Channel, Priority and
// Provider are empty when the caller that ended it does not know them (the sweeper's bulk
// expiry knows none; a delivery that never reached a provider has no provider).
type Final struct {
	Status   herald.Status // SENT, FAILED, EXPIRED or CANCELLED; a receipt (DELIVERED, UNDELIVERED) is not counted again
	Channel  herald.Channel
	Priority herald.Priority
	Provider string
}

// finals is herald.deliveries, exported to Prometheus as herald_deliveries_total, taken from
// the global meter provider at each use (the SDK hands back the same instrument), so that
// it follows the provider the process installs, whenever that happens.
func finals() metric.Int64Counter {
	c, err := otel.Meter("github.com/heraldhq/herald/internal/delivery").Int64Counter("herald.deliveries",
		metric.WithDescription("Deliveries that reached a final state, counted once each at that transition, by outcome "+
			"(sent, failed, expired, cancelled), channel, provider and priority. Attempts are herald.dispatch.sends."))
	if err != nil {
		otel.Handle(err)
		return noop.Int64Counter{}
	}
	return c
}

// finalAttrs are a final status's labels.
var finalAttrs = attrset.New(func(f Final) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("outcome", strings.ToLower(string(f.Status))),
		attribute.String("channel", string(f.Channel)), attribute.String("priority", string(f.Priority)),
		attribute.String("provider", f.Provider)}
})

// CountFinal counts n deliveries that ended as f. Call it once per successful final
// transition (the compare-and-set matched), never for a transition that matched nothing.
func CountFinal(ctx context.Context, f Final, n int64) {
	if n <= 0 || !f.Status.Terminal() || f.Status.Received() {
		return
	}
	finals().Add(ctx, n, finalAttrs.Of(f))
}
