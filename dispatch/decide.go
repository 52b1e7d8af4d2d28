package dispatch

import (
	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/tracelog"
)

// verdict is what the path does with a delivery row read for a record.
type verdict int

const (
	verdictSkip    verdict = iota // finished, a call in flight elsewhere, or not due: nothing to do
	verdictSend                   // due, and allowed another attempt: lease, claim, send
	verdictExpire                 // expired before a claim: end it EXPIRED without a call
	verdictGiveUp                 // no attempt may follow: end it FAILED without a call
	verdictStale                  // the read is older than the record: read again
	verdictUnknown                // the record names a delivery this database does not hold
)

// decide is the one decision of the path: what to do with r, read for the record msg (r is
// nil when the read found no row). With mayBeStale a read older than the record is not
// believed (verdictStale); without it, the record is taken at its word. A row not yet due (a
// scheduled send or a retry) is left to the sweeper, which publishes it when due. The reason
// of verdictGiveUp goes into the row's last_error.
func (l *lane) decide(r *row, msg herald.DeliveryMessage, mayBeStale bool) (v verdict, reason string) {
	switch {
	case r == nil && mayBeStale:
		return verdictStale, ""
	case r == nil:
		return verdictUnknown, ""
	case mayBeStale && olderThan(r, msg):
		return verdictStale, ""
	case r.Status.Terminal(), r.Status == herald.StatusSending:
		return verdictSkip, ""
	case r.Expired:
		return verdictExpire, ""
	case !r.Due:
		return verdictSkip, ""
	}
	if reason := l.giveUpReason(r); reason != "" {
		return verdictGiveUp, reason
	}
	return verdictSend, ""
}

// olderThan reports whether r is a version from before the one msg was made from: the
// record was made from a PENDING version with msg.Attempts attempts, so fewer attempts, or
// SENDING with as many (a claim adds one), is older.
func olderThan(r *row, msg herald.DeliveryMessage) bool {
	return r.Attempts < msg.Attempts || (r.Status == herald.StatusSending && r.Attempts == msg.Attempts)
}

// giveUpReason is the retry policy for a due PENDING row, the give-up rule of the path: it
// says why no attempt may follow, or "". A row whose last attempt went through the outcome
// of a provider call is only ever scheduled again within the policy (outcome); this catches
// the rows that did not: the reaper returned them from SENDING (the worker died, or its
// outcome could not be written) and logged that attempt AMBIGUOUS.
func (l *lane) giveUpReason(r *row) string {
	if limit := l.d.cfg.RetryPolicies[r.Channel].MaxAttempts; r.budgetUsed(r.Attempts) >= limit {
		return "attempts exhausted"
	}
	if r.LastOutcome != nil && herald.AttemptOutcome(*r.LastOutcome) == herald.AttemptAmbiguous && !*l.cfg.RetryAmbiguous {
		return "ambiguous outcome not retried"
	}
	return ""
}

// budgetUsed is how much of the attempt budget attempt number attempt has used: the
// attempts since the row was last re-driven (a re-drive gives a fresh budget while the
// attempt numbers go on), all of them for a row never re-driven.
func (r *row) budgetUsed(attempt int) int { return attempt - r.RedriveBase }

// outcomeGaveUp labels, in the attempts metric, a delivery ended FAILED by giveUpReason. It
// is no attempt outcome: no attempt row is written for it.
const outcomeGaveUp herald.AttemptOutcome = "GAVE_UP"

// settle carries out a verdict that makes no provider call.
func (l *lane) settle(w *work, v verdict, reason string) result {
	r := w.r
	switch v {
	case verdictStale:
		return resStale
	case verdictUnknown:
		l.log.Warn("record names an unknown delivery", tracelog.Delivery(w.ctx, w.msg.DeliveryID))
	case verdictExpire:
		ok, err := delivery.Expire(w.ctx, l.d.pool, r.ID, r.Attempts)
		return l.settled(w, ok, err, herald.AttemptExpired, herald.StatusExpired)
	case verdictGiveUp:
		ok, err := delivery.GiveUp(w.ctx, l.d.pool, r.ID, r.Attempts, reason)
		return l.settled(w, ok, err, outcomeGaveUp, herald.StatusFailed)
	}
	return resDone
}

// settled is the result of a transition made without a claim: one that matched nothing (the
// row moved on) reads the row again.
func (l *lane) settled(w *work, ok bool, err error, outcome herald.AttemptOutcome, status herald.Status) result {
	switch {
	case err != nil:
		w.err = err
		return resFailed
	case !ok:
		return resAgain
	}
	l.ended(w.ctx, w.r, outcome, status, "")
	return resDone
}
