package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
)

// FanOutSender is a Sender that makes several provider calls for one message (PUSH: one per
// device, senders/push), each to the provider account of its own platform. Dispatch then
// rate-limits every call, not the message: a user with 20 devices takes 20 slots, each of
// its call's account ("push:fcm", "push:apns"). A limit on the FanOutSender's own Provider()
// is refused by New, since no call is made under it.
type FanOutSender interface {
	Sender
	// SendEach is Send with admit called right before each provider call, with that call's
	// provider account. A call whose admit returns an error is not made; that error is the
	// call's outcome.
	SendEach(ctx context.Context, m *senders.Message, admit func(ctx context.Context, account string) error) (senders.Result, error)
	// Accounts lists the provider accounts its calls may go to.
	Accounts() []string
}

// checkFanOutLimits refuses a rate limit keyed by a fan-out sender's own account.
func checkFanOutLimits(limits map[string]int, ss map[herald.Channel]Sender) error {
	for ch, s := range ss {
		if f, ok := s.(FanOutSender); ok {
			if _, limited := limits[f.Provider()]; limited {
				return fmt.Errorf("rate limit on %q: %s calls are limited per provider account %v", f.Provider(), ch, f.Accounts())
			}
		}
	}
	return nil
}

// sendEach is send for a FanOutSender. The first call waits for its slot up to the lane's
// RateWait like any delivery; if it is refused (or the delivery expires while waiting) no
// provider was called, so the claim is handed back (or the delivery EXPIRED) without using
// an attempt. Once a call went out, later calls wait for their slots within the whole send's
// deadline (RateWait + SendTimeout, the SENDING hold); a call refused even then is not made
// and counts as a Transient failure of its device.
func (l *lane) sendEach(w *work, sender FanOutSender) error {
	rateWait := max(l.cfg.RateWait, 0)
	g := &gate{l: l, r: w.r, att: w.claimed.Attempt, firstDeadline: time.Now().Add(rateWait)}
	sendCtx, cancel := context.WithTimeout(w.ctx, rateWait+l.d.cfg.SendTimeout)
	res, sendErr := sender.SendEach(sendCtx, w.m, g.admit)
	cancel()
	calls, refused, expired, limErr := g.result()
	switch {
	case calls > 0 || (!refused && !expired && limErr == nil):
		// A provider was called, or the message failed before any call (no device).
		return l.finish(w, w.route.account, res, sendErr)
	case expired:
		return l.record(w, expiredWaiting)
	}
	return l.deferAttempt(w, w.route.account, g.wait, limErr)
}

// gate admits the calls of one fan-out, each against the limit of its own account. The first
// admission is decided alone (the other calls wait for it): it waits up to the lane's
// RateWait, and if it fails every call fails the same way, so that nothing was sent and the
// delivery is deferred or expired as a whole. Once it succeeded, each further call waits for
// its own slot up to ctx's deadline.
type gate struct {
	l             *lane
	r             *row
	att           int
	firstDeadline time.Time

	first    sync.Mutex // held while the first admission is decided
	decided  bool
	firstErr error

	mu      sync.Mutex
	calls   int           // calls admitted
	refused bool          // a call was refused by the limiter
	expired bool          // the delivery expired before its first call
	wait    time.Duration // the longest wait the limiter named for a refused call
	err     error         // the first limiter error
}

var errExpiredWaiting = errors.New("delivery expired while waiting for rate-limit capacity")

// admit waits for one slot of account for one provider call.
func (g *gate) admit(ctx context.Context, account string) error {
	g.first.Lock()
	if !g.decided {
		defer g.first.Unlock()
		g.decided = true
		g.firstErr = g.admitOne(ctx, account, g.firstDeadline, true)
		return g.firstErr
	}
	g.first.Unlock()
	if g.firstErr != nil {
		return g.firstErr
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = g.firstDeadline
	}
	return g.admitOne(ctx, account, deadline, false)
}

// admitOne asks the limiter for one call until deadline, dropping stale admissions.
func (g *gate) admitOne(ctx context.Context, account string, deadline time.Time, first bool) error {
	for stale := 0; ; stale++ {
		allowed, wait, dec, err := g.l.waitForRate(ctx, account, g.att, deadline)
		if err == nil && allowed && stale == maxStaleAdmissions {
			allowed, wait = false, 100*time.Millisecond // too slow to use admissions in time
		}
		switch {
		case err != nil:
			g.mu.Lock()
			g.err = cmp.Or(g.err, err)
			g.mu.Unlock()
			return senders.TransientError("rate_limit_unavailable", 0, fmt.Errorf("rate limit %s: %w", account, err))
		case !allowed:
			g.mu.Lock()
			g.refused, g.wait = true, max(g.wait, wait)
			g.mu.Unlock()
			return senders.TransientError("rate_limited", wait, fmt.Errorf("no rate-limit capacity on %s in time", account))
		case first && g.r.expiredNow():
			g.mu.Lock()
			g.expired = true
			g.mu.Unlock()
			return senders.PermanentError("expired", errExpiredWaiting)
		case g.l.d.limiter.fresh(dec, time.Now()):
			g.mu.Lock()
			g.calls++
			g.mu.Unlock()
			return nil
		}
		g.l.signal(signalStaleAdmission)
	}
}

func (g *gate) result() (calls int, refused, expired bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls, g.refused, g.expired, g.err
}
