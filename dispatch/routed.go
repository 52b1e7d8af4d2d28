package dispatch

import (
	"context"

	"github.com/heraldhq/herald"
)

// RoutedSender stands for several provider accounts of one channel (dispatch/route): it
// picks the account of each attempt. Dispatch asks Route right after the claim, before the
// rate-limit decision, and then treats the returned Sender as the channel's sender for that
// attempt: its Provider() is the account the limiter counts, the metrics and the attempt log
// name, and that the next attempt's RouteAttempt.LastAccount will be.
type RoutedSender interface {
	Sender
	// Route returns the sender of the account attempt a goes to. It always returns one:
	// without its shared health (Redis unreachable) it routes by what it last knew.
	Route(ctx context.Context, a RouteAttempt) Sender
	// RetryAtOnce reports whether the retry of a failed attempt skips the retry policy's
	// backoff: it moves to another account that can take it now, and the priority's policy
	// says so. a describes the retry: a.LastAccount and a.LastOutcome are the attempt that
	// just failed.
	RetryAtOnce(a RouteAttempt) bool
}

// RouteAttempt is what a RoutedSender is told of an attempt.
type RouteAttempt struct {
	DeliveryID string
	Channel    herald.Channel
	Priority   herald.Priority
	// Attempt is the attempt's 1-based number.
	Attempt int
	// LastAccount is the account of the previous attempt, "" for a first attempt or when it
	// is unknown (an attempt the reaper logged after its worker died).
	LastAccount string
	// LastOutcome is the previous attempt's outcome (TRANSIENT, AMBIGUOUS, ...), "" if none.
	LastOutcome string
}

// routeAttempt describes attempt att of r.
func routeAttempt(r *row, att int) RouteAttempt {
	return RouteAttempt{DeliveryID: r.ID, Channel: r.Channel, Priority: r.Priority, Attempt: att,
		LastAccount: deref(r.LastProvider), LastOutcome: deref(r.LastOutcome)}
}

// pickAccount returns the sender of attempt att of r: the account its RoutedSender picks,
// or sender itself.
func pickAccount(ctx context.Context, r *row, sender Sender, att int) Sender {
	if rs, ok := sender.(RoutedSender); ok {
		return rs.Route(ctx, routeAttempt(r, att))
	}
	return sender
}

// retryAtOnce reports whether the retry after attempt att of r, which failed on account with
// outcome class, goes to another account without waiting (RoutedSender.RetryAtOnce).
func (l *lane) retryAtOnce(r *row, att int, account, class string) bool {
	rs, ok := l.d.senders[r.Channel].(RoutedSender)
	return ok && rs.RetryAtOnce(RouteAttempt{DeliveryID: r.ID, Channel: r.Channel, Priority: r.Priority,
		Attempt: att + 1, LastAccount: account, LastOutcome: class})
}

// moveAccount is the route of attempt att of r, the retry at once of the attempt before it,
// which failed on account with outcome class (retryHere): the account the channel's
// RoutedSender picks for that retry.
func (l *lane) moveAccount(ctx context.Context, r *row, att int, account, class string) route {
	s := l.d.senders[r.Channel].(RoutedSender).Route(ctx, RouteAttempt{DeliveryID: r.ID, Channel: r.Channel,
		Priority: r.Priority, Attempt: att, LastAccount: account, LastOutcome: class})
	return route{sender: s, account: s.Provider()}
}

// measuredRouted is measured for a RoutedSender: every account it routes to is measured as
// itself.
type measuredRouted struct {
	RoutedSender
	m *metrics
}

func (s measuredRouted) Route(ctx context.Context, a RouteAttempt) Sender {
	return measured{Sender: s.RoutedSender.Route(ctx, a), m: s.m}
}
