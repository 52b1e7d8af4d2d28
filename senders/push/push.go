// Package push delivers a PUSH message to every registered device of the recipient, handing
// each token to the sender of its platform (senders/fcm, senders/apns). The delivery counts
// as sent if any device accepted it; tokens the platforms report as gone are returned in
// Result.InvalidTokens so that dispatch removes them from push_token.
package push

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/heraldhq/herald/senders"
)

// PlatformSender sends to one device: the single token in m.To.PushTokens.
type PlatformSender interface {
	Send(ctx context.Context, m *senders.Message) (senders.Result, error)
	Provider() string
}

// Config configures the fan-out sender.
type Config struct {
	// MaxParallel bounds the devices sent to at once for one message. Default 8.
	MaxParallel int
	// Timeout bounds one fan-out as a whole. Default 30s (each platform sender has its own
	// per-request timeout below this).
	Timeout time.Duration
	// Provider is the provider-account name reported to dispatch. Default "push".
	Provider string
}

// DefaultMaxParallel is Config.MaxParallel's default.
const DefaultMaxParallel = 8

// Sender fans a PUSH message out to every device. It is safe for concurrent use.
type Sender struct {
	cfg       Config
	platforms map[string]PlatformSender
	log       *zap.Logger
}

// New returns a fan-out sender. platforms maps a token platform ("FCM", "APNS") to its
// sender; a platform without a sender fails its devices permanently.
func New(cfg Config, platforms map[string]PlatformSender, log *zap.Logger) (*Sender, error) {
	if cfg.MaxParallel == 0 {
		cfg.MaxParallel = DefaultMaxParallel
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Provider == "" {
		cfg.Provider = "push"
	}
	if cfg.MaxParallel < 0 || cfg.Timeout < 0 {
		return nil, errors.New("push: MaxParallel and Timeout must not be negative")
	}
	norm := make(map[string]PlatformSender, len(platforms))
	for p, s := range platforms {
		if s != nil {
			norm[strings.ToUpper(p)] = s
		}
	}
	if len(norm) == 0 {
		return nil, errors.New("push: no platform sender")
	}
	return &Sender{cfg: cfg, platforms: norm, log: log.With(zap.String("component", "senders.push"))}, nil
}

// Provider returns the provider-account name, "push" by default.
func (s *Sender) Provider() string { return s.cfg.Provider }

type outcome struct {
	res senders.Result
	err error
}

// Accounts returns the provider accounts of the platform senders, one per platform: each
// device call is rate-limited under its platform's account (see SendEach).
func (s *Sender) Accounts() []string {
	var out []string
	for _, ps := range s.platforms {
		if !slices.Contains(out, ps.Provider()) {
			out = append(out, ps.Provider())
		}
	}
	slices.Sort(out)
	return out
}

// Send delivers m to every token in m.To.PushTokens. It returns success if any device
// accepted; otherwise the most hopeful failure: Ambiguous over Transient over Permanent.
// Result.InvalidTokens is set in both cases.
func (s *Sender) Send(ctx context.Context, m *senders.Message) (senders.Result, error) {
	return s.SendEach(ctx, m, nil)
}

// SendEach is Send with admit, when not nil, called right before each device's provider
// call with its platform sender's account (dispatch's rate limiter: one slot per call). A
// device whose admit fails is not sent to and has admit's error as its outcome.
func (s *Sender) SendEach(ctx context.Context, m *senders.Message, admit func(ctx context.Context, account string) error) (senders.Result, error) {
	res := senders.Result{Provider: s.cfg.Provider}
	tokens := m.To.PushTokens
	if len(tokens) == 0 {
		return res, senders.PermanentError("no_device", fmt.Errorf("push delivery %s: recipient has no registered device", m.DeliveryID))
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()

	outcomes := make([]outcome, len(tokens))
	sem := make(chan struct{}, s.cfg.MaxParallel)
	var wg sync.WaitGroup
	for i, tok := range tokens {
		ps, ok := s.platforms[strings.ToUpper(tok.Platform)]
		if !ok {
			outcomes[i].err = senders.PermanentError("unknown_platform", fmt.Errorf("no sender for platform %q", tok.Platform))
			continue
		}
		one := *m
		one.To.PushTokens = []senders.PushToken{tok}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if admit != nil {
				if err := admit(ctx, ps.Provider()); err != nil {
					outcomes[i].err = err
					return
				}
			}
			r, err := ps.Send(ctx, &one)
			outcomes[i] = outcome{r, err}
		}()
	}
	wg.Wait()
	return s.combine(m, res, outcomes)
}

func (s *Sender) combine(m *senders.Message, res senders.Result, outcomes []outcome) (senders.Result, error) {
	accepted := 0
	var best *senders.Error
	for _, o := range outcomes {
		res.InvalidTokens = append(res.InvalidTokens, o.res.InvalidTokens...)
		if o.err == nil {
			accepted++
			if res.ProviderMessageID == "" {
				res.ProviderMessageID = o.res.ProviderMessageID
			}
			continue
		}
		_, se := senders.Classify(o.err)
		if se == nil {
			se = senders.AmbiguousError("unclassified", errors.New("unclassified platform error"))
		}
		if best == nil || rank(se) > rank(best) || (rank(se) == rank(best) && se.RetryAfter > best.RetryAfter) {
			best = se
		}
	}
	res.Code = strconv.Itoa(accepted) + "/" + strconv.Itoa(len(outcomes))
	if accepted > 0 {
		if accepted < len(outcomes) {
			s.log.Debug("push sent to some devices", zap.String("delivery_id", m.DeliveryID),
				zap.Int("accepted", accepted), zap.Int("devices", len(outcomes)))
		}
		return res, nil
	}
	s.log.Debug("push send failed on every device", zap.String("delivery_id", m.DeliveryID),
		zap.Stringer("class", best.Class), zap.String("code", best.Code), zap.Int("devices", len(outcomes)))
	return res, fmt.Errorf("push delivery %s: no device accepted (%d devices): %w", m.DeliveryID, len(outcomes), best)
}

// rank orders failures by how likely a later attempt is to deliver.
func rank(e *senders.Error) int {
	switch e.Class {
	case senders.Ambiguous:
		return 3
	case senders.Transient:
		return 2
	}
	return 1
}
