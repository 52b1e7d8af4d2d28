package dispatch

import (
	"context"

	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
)

// applyHeldReceipts applies the provider receipts that came before the SENT outcomes of batch
// were committed (delivery.ApplyHeld; docs/receipts.md), once the workers have their answer:
// one statement on the held receipts' primary key when none is held. A failure is logged and
// left to the receipts sweeper, which applies held receipts of sent deliveries too.
func (r *outcomeWriter) applyHeldReceipts(batch []*outcomeWrite, recorded map[string]struct{}) {
	var sent []string
	for _, w := range batch {
		if _, ok := recorded[w.rec.ID]; ok && w.rec.Outcome.Status == herald.StatusSent {
			sent = append(sent, w.rec.ID)
		}
	}
	if len(sent) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), dbWriteTimeout)
	defer cancel()
	applied, err := delivery.ApplyHeld(ctx, r.pool, sent)
	if err != nil {
		r.log.Warn("held receipts not applied; the receipts sweeper applies them", zap.Int("deliveries", len(sent)), zap.Error(err))
		return
	}
	for _, a := range applied {
		delivery.CountReceipt(ctx, a.Provider, a.Outcome, a.Result)
	}
}
