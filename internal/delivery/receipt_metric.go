package delivery

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/heraldhq/herald"
)

// Results of a receipt that never reaches ApplyReceipt, for CountReceipt.
const (
	// ReceiptRejected: a bad or missing signature (403), or a request over 1 MiB (413);
	// nothing changed.
	ReceiptRejected ReceiptOutcome = "rejected"
	// ReceiptMalformed: signed, but not a receipt herald can read (no delivery id, a bad
	// body); answered 200 so that the provider stops retrying, nothing changed.
	ReceiptMalformed ReceiptOutcome = "malformed"
	// ReceiptExpired: held until the end of its hold, and its send never recorded.
	ReceiptExpired ReceiptOutcome = "expired"
)

// receipts is herald.receipts, exported to Prometheus as herald_receipts_total.
func receipts() metric.Int64Counter {
	c, err := otel.Meter("github.com/heraldhq/herald/internal/delivery").Int64Counter("herald.receipts",
		metric.WithDescription("Provider receipts, by provider account and result: delivered and undelivered (applied), "+
			"logged, duplicate, held, ignored, expired (held, the send never recorded), rejected (signature), malformed."))
	if err != nil {
		otel.Handle(err)
		return noop.Int64Counter{}
	}
	return c
}

// CountReceipt counts one receipt of provider with outcome o; an applied receipt is counted
// by its result (delivered, undelivered).
func CountReceipt(ctx context.Context, provider string, o ReceiptOutcome, result herald.Status) {
	name := string(o)
	if o == ReceiptApplied {
		name = strings.ToLower(string(result))
	}
	receipts().Add(ctx, 1, metric.WithAttributes(attribute.String("provider", provider), attribute.String("result", name)))
}
