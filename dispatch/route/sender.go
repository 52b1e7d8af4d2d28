package route

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/senders"
)

// Sender is the routed sender of one channel: a dispatch.RoutedSender over its accounts.
type Sender struct {
	r        *Router
	ch       herald.Channel
	accounts []account
	weights  []int
	keys     []string // the accounts' health hashes
	index    map[string]int
	view     view
}

// account is one account and its two faces: the sender that records each call's outcome as
// an ordinary call, and the one that records it as the half-open probe.
type account struct {
	name          string
	standby       bool
	plain, probed dispatch.Sender
}

func (r *Router) newSender(ch herald.Channel, accs []Account) (*Sender, error) {
	if len(accs) == 0 {
		return nil, fmt.Errorf("route %s: no account", ch)
	}
	s := &Sender{r: r, ch: ch, index: map[string]int{}}
	weighted := false
	for i, a := range accs {
		if a.Sender == nil {
			return nil, fmt.Errorf("route %s: account %d has no sender", ch, i)
		}
		if _, ok := a.Sender.(dispatch.FanOutSender); ok {
			return nil, fmt.Errorf("route %s: %s is a fan-out sender, which cannot be routed", ch, a.Sender.Provider())
		}
		name := a.Sender.Provider()
		if _, dup := s.index[name]; dup {
			return nil, fmt.Errorf("route %s: account %s twice", ch, name)
		}
		if a.Weight < 0 {
			return nil, fmt.Errorf("route %s: account %s: negative weight %d", ch, name, a.Weight)
		}
		weighted = weighted || a.Weight > 0
		s.index[name] = i
		s.weights = append(s.weights, a.Weight)
		s.keys = append(s.keys, r.cfg.RedisPrefix+"route:{"+strings.ToLower(string(ch))+"}:"+name)
		s.accounts = append(s.accounts, account{name: name, standby: a.Weight == 0,
			plain:  health{Sender: a.Sender, s: s, i: i},
			probed: health{Sender: a.Sender, s: s, i: i, probe: true}})
	}
	if !weighted {
		return nil, fmt.Errorf("route %s: every account is a standby (weight 0); give one a weight", ch)
	}
	s.view.levels = make([]int, len(accs))
	return s, nil
}

// Provider names the channel's routing, not an account: dispatch asks Route for the account
// of each attempt, and limits, measures and logs that one.
func (s *Sender) Provider() string { return strings.ToLower(string(s.ch)) + ":routed" }

// Send routes m like a first attempt and sends it. Dispatch calls Route instead, so that the
// account's rate limit is applied; Send is for callers without one.
func (s *Sender) Send(ctx context.Context, m *senders.Message) (senders.Result, error) {
	return s.Route(ctx, dispatch.RouteAttempt{DeliveryID: m.DeliveryID, Channel: m.Channel, Priority: m.Priority,
		Attempt: m.Attempt}).Send(ctx, m)
}

// Route implements dispatch.RoutedSender: a retry after an ambiguous outcome stays on that
// attempt's account unless the priority's FailoverAmbiguous allows a move; a retry after a
// transient error (or an ambiguous one that may move) leaves that account for the others;
// any other attempt goes by the accounts' shares, unless it is the due half-open probe of a
// degraded account.
func (s *Sender) Route(ctx context.Context, a dispatch.RouteAttempt) dispatch.Sender {
	cfg := s.r.cfg
	last, known := s.index[a.LastAccount]
	avoid := -1
	switch {
	case known && a.LastOutcome == "AMBIGUOUS" && !cfg.FailoverAmbiguous[a.Priority]:
		s.r.m.decided(ctx, s, last, "pinned")
		return s.accounts[last].plain
	case known && (a.LastOutcome == "TRANSIENT" || a.LastOutcome == "AMBIGUOUS"):
		avoid = last
	}
	var late time.Duration
	if a.Priority == herald.PriorityHigh {
		late = cfg.ProbeInterval // HIGH probes only what no other priority probed for an interval
	}
	probe, levels := -1, []int(nil)
	if s.r.usable() {
		var err error
		probe, levels, err = s.r.st.decide(ctx, s.keys, avoid, late)
		if err != nil {
			s.r.failed(err)
			probe, levels = -1, nil
		} else {
			s.view.set(levels)
		}
	}
	if levels == nil {
		levels = s.view.get()
	}
	if probe >= 0 {
		s.r.m.decided(ctx, s, probe, "probe")
		return s.accounts[probe].probed
	}
	reason := "weight"
	sh := shares(s.weights, levels, cfg.Steps)
	if avoid >= 0 {
		reason = "failover"
		sh = failoverShares(s.weights, levels, cfg.Steps, avoid)
	}
	i := pick(sh, rnd())
	s.r.m.decided(ctx, s, i, reason)
	return s.accounts[i].plain
}

// RetryAtOnce implements dispatch.RoutedSender: the priority's RetryAtOnce allows it, the
// retry leaves its account (a transient error, or an ambiguous outcome that FailoverAmbiguous
// lets move) and another account takes traffic.
func (s *Sender) RetryAtOnce(a dispatch.RouteAttempt) bool {
	cfg := s.r.cfg
	i, ok := s.index[a.LastAccount]
	moves := a.LastOutcome == "TRANSIENT" || (a.LastOutcome == "AMBIGUOUS" && cfg.FailoverAmbiguous[a.Priority])
	if !ok || !moves || !cfg.RetryAtOnce[a.Priority] {
		return false
	}
	for j, lv := range s.view.get() {
		if j != i && lv < s.r.cfg.Steps {
			return true
		}
	}
	return false
}

// record counts one call's outcome in the account's shared health.
func (s *Sender) record(ctx context.Context, i int, failed, probe bool) {
	if !s.r.usable() {
		return
	}
	level, changed, err := s.r.st.record(ctx, s.keys[i], failed, probe)
	if err != nil {
		s.r.failed(err)
		return
	}
	s.view.setOne(i, level)
	if changed {
		s.r.m.stepped(ctx, s, i, failed)
		s.r.log.Warn("provider account health changed", zap.String("channel", string(s.ch)),
			zap.String("account", s.accounts[i].name), zap.Int("level", level), zap.Int("steps", s.r.cfg.Steps),
			zap.Bool("probe", probe))
	}
}

// health is an account's sender that records the outcome of each call in the account's
// shared health. A call cut off by shutdown says nothing of the provider and is not counted.
type health struct {
	dispatch.Sender
	s     *Sender
	i     int
	probe bool
}

func (h health) Send(ctx context.Context, m *senders.Message) (senders.Result, error) {
	res, err := h.Sender.Send(ctx, m)
	res.Provider = h.Sender.Provider() // the attempt log names the account
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		return res, err
	}
	failed := false
	if err != nil {
		class, _ := senders.Classify(err)
		failed = class != senders.Permanent // a permanent error is the message's, not the provider's
	}
	h.s.record(context.WithoutCancel(ctx), h.i, failed, h.probe)
	return res, err
}
