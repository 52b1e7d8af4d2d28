package timeline

import (
	"strconv"
	"time"

	"github.com/heraldhq/herald"
)

// steps fills in Since and Note of d's steps from the attempt log. A transition and the
// attempt row it wrote share the transaction's now(): a claim's SENDING time is its
// attempt's started_at, an outcome's time is its attempt's finished_at. A change that wrote
// no attempt row is a deferral (rate limit), a reaped QUEUED row or a cancellation.
func steps(accepted time.Time, d *Delivery) []Step {
	out := d.Steps
	prev := accepted
	for i := range out {
		s := &out[i]
		s.Since = s.At.Sub(prev)
		prev = s.At
		var from herald.Status
		if i > 0 {
			from = out[i-1].Status
		}
		s.Note = note(i, from, s, d.AttemptLog)
		if s.Status.Received() {
			s.Note = receiptNote(d.Receipts)
		}
	}
	return out
}

func note(i int, from herald.Status, s *Step, log []Attempt) string {
	if i == 0 {
		return "accepted"
	}
	started, finished := attemptAt(log, s.At)
	switch {
	case s.Status == herald.StatusQueued:
		return "published"
	case s.Status == herald.StatusSending && started != nil:
		return "attempt " + strconv.Itoa(started.Attempt)
	case s.Status == herald.StatusSending:
		return "claimed"
	case finished != nil:
		return outcomeNote(s.Status, finished)
	case s.Status == herald.StatusPending && from == herald.StatusSending:
		return "deferred (rate limit)"
	case s.Status == herald.StatusPending && from == herald.StatusQueued:
		return "queued lease over"
	case s.Status == herald.StatusPending && (from == herald.StatusFailed || from == herald.StatusExpired):
		return "re-driven"
	case s.Status == herald.StatusFailed:
		return "given up"
	case s.Status == herald.StatusCancelled:
		return "cancelled"
	}
	return ""
}

func outcomeNote(status herald.Status, a *Attempt) string {
	n := "attempt " + strconv.Itoa(a.Attempt) + " " + a.Outcome
	if a.ErrorClass != "" {
		n += " " + a.ErrorClass
	}
	if a.ProviderCode != "" {
		n += " (" + a.ProviderCode + ")"
	}
	if a.TokensRemoved > 0 {
		n += "; " + strconv.Itoa(a.TokensRemoved) + " invalid push token(s) removed from the user's profile"
	}
	switch {
	case status == herald.StatusPending && a.NextAttemptAt != nil:
		return n + ", retry"
	case status == herald.StatusPending && a.Provider == "":
		return n + ", SENDING lease over"
	}
	return n
}

// attemptAt returns the attempt that started at t and the one that finished at t.
func attemptAt(log []Attempt, t time.Time) (started, finished *Attempt) {
	for i := range log {
		if log[i].Started.Equal(t) && started == nil {
			started = &log[i]
		}
		if log[i].Finished.Equal(t) {
			finished = &log[i]
		}
	}
	return started, finished
}

// receiptNote names the receipt that moved the delivery to DELIVERED or UNDELIVERED.
func receiptNote(rs []Receipt) string {
	for _, r := range rs {
		if r.Applied {
			n := "receipt " + r.Provider + " " + r.Status
			if r.Code != "" {
				n += " (" + r.Code + ")"
			}
			return n
		}
	}
	return "receipt"
}
