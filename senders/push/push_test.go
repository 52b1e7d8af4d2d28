package push

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
	"github.com/heraldhq/herald/senders/sendertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stub is a platform sender that is also a sendertest.Fake: it answers like a platform
// sender would for each outcome.
type stub struct {
	name string
	mu   sync.Mutex
	o    sendertest.Outcome
	per  map[string]error // per-token override
	keys []string
}

func (s *stub) Provider() string { return s.name }
func (s *stub) Next(o sendertest.Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.o = o
}
func (s *stub) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

func (s *stub) Send(ctx context.Context, m *senders.Message) (senders.Result, error) {
	if len(m.To.PushTokens) != 1 {
		return senders.Result{}, errors.New("want exactly one token")
	}
	tok := m.To.PushTokens[0].Token
	if err := ctx.Err(); err != nil {
		return senders.Result{}, senders.TransientError("canceled", 0, err)
	}
	s.mu.Lock()
	s.keys = append(s.keys, m.DeliveryID)
	o, override, hasOverride := s.o, s.per[tok], s.per != nil
	s.mu.Unlock()
	res := senders.Result{Provider: s.name}
	if hasOverride {
		if override == nil {
			res.ProviderMessageID = "id-" + tok
			return res, nil
		}
		if _, se := senders.Classify(override); se != nil && se.Code == "UNREGISTERED" {
			res.InvalidTokens = []string{tok}
		}
		return res, override
	}
	switch o {
	case sendertest.Reject:
		res.InvalidTokens = []string{tok}
		return res, senders.PermanentError("UNREGISTERED", errors.New("unregistered"))
	case sendertest.Unavailable:
		return res, senders.TransientError("UNAVAILABLE", 0, errors.New("unavailable"))
	case sendertest.RateLimit:
		return res, senders.TransientError("QUOTA_EXCEEDED", 4*time.Second, errors.New("quota"))
	case sendertest.Hang:
		<-ctx.Done()
		return res, senders.AmbiguousError("timeout", errors.New("timeout"))
	}
	return res, nil
}

func TestConformance(t *testing.T) {
	sendertest.Run(t, func(t *testing.T, log *zap.Logger, timeout time.Duration) sendertest.Target {
		fcm := &stub{name: "push:fcm", o: sendertest.Accept}
		s, err := New(Config{Timeout: timeout}, map[string]PlatformSender{"FCM": fcm}, log)
		require.NoError(t, err)
		return sendertest.Target{Sender: s, Fake: fcm, Channel: herald.ChannelPush, Platform: "FCM",
			RetryAfter: 4 * time.Second,
			Codes: map[sendertest.Outcome]string{sendertest.Reject: "UNREGISTERED", sendertest.Unavailable: "UNAVAILABLE",
				sendertest.RateLimit: "QUOTA_EXCEEDED"}}
	})
}

func message(tokens ...senders.PushToken) *senders.Message {
	m := sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelPush})
	m.To.PushTokens = tokens
	return m
}

func TestFanOut(t *testing.T) {
	gone := senders.PermanentError("UNREGISTERED", errors.New("gone"))
	busy := senders.TransientError("UNAVAILABLE", 2*time.Second, errors.New("busy"))
	busier := senders.TransientError("QUOTA_EXCEEDED", 9*time.Second, errors.New("quota"))
	lost := senders.AmbiguousError("timeout", errors.New("timeout"))
	for _, tc := range []struct {
		name        string
		fcm, apns   map[string]error
		tokens      []senders.PushToken
		wantErr     senders.Class // 0: sent
		wantCode    string
		wantInvalid []string
		wantRetry   time.Duration
	}{
		{name: "one accepted of three, invalid removed",
			fcm: map[string]error{"a": gone, "b": nil}, apns: map[string]error{"c": busy},
			tokens:      []senders.PushToken{{Token: "a", Platform: "FCM"}, {Token: "b", Platform: "FCM"}, {Token: "c", Platform: "APNS"}},
			wantCode:    "1/3",
			wantInvalid: []string{"a"}},
		{name: "all gone is permanent",
			fcm: map[string]error{"a": gone}, apns: map[string]error{"c": gone},
			tokens:      []senders.PushToken{{Token: "a", Platform: "FCM"}, {Token: "c", Platform: "APNS"}},
			wantErr:     senders.Permanent,
			wantInvalid: []string{"a", "c"}},
		{name: "transient beats permanent with the longest Retry-After",
			fcm: map[string]error{"a": gone, "b": busy}, apns: map[string]error{"c": busier},
			tokens:      []senders.PushToken{{Token: "a", Platform: "FCM"}, {Token: "b", Platform: "FCM"}, {Token: "c", Platform: "APNS"}},
			wantErr:     senders.Transient,
			wantInvalid: []string{"a"}, wantRetry: 9 * time.Second},
		{name: "ambiguous beats transient",
			fcm: map[string]error{"a": lost}, apns: map[string]error{"c": busy},
			tokens:  []senders.PushToken{{Token: "a", Platform: "FCM"}, {Token: "c", Platform: "APNS"}},
			wantErr: senders.Ambiguous},
		{name: "unknown platform",
			fcm:     map[string]error{},
			tokens:  []senders.PushToken{{Token: "w", Platform: "WEBPUSH"}},
			wantErr: senders.Permanent},
		{name: "no device",
			wantErr: senders.Permanent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fcm := &stub{name: "push:fcm", per: tc.fcm}
			apns := &stub{name: "push:apns", per: tc.apns}
			s, err := New(Config{}, map[string]PlatformSender{"FCM": fcm, "apns": apns}, zap.NewNop())
			require.NoError(t, err)
			res, err := s.Send(context.Background(), message(tc.tokens...))
			require.ElementsMatch(t, tc.wantInvalid, res.InvalidTokens)
			if tc.wantErr == 0 {
				require.NoError(t, err)
				require.Equal(t, tc.wantCode, res.Code)
				require.Equal(t, "id-b", res.ProviderMessageID)
				return
			}
			class, se := senders.Classify(err)
			require.Equal(t, tc.wantErr, class, "%v", err)
			require.Equal(t, tc.wantRetry, se.RetryAfter)
		})
	}
}

// SendEach asks admit once per device, right before its call, with the device's platform
// account; a device admit refuses is not sent to and fails with admit's error.
func TestSendEachAdmitsEveryCall(t *testing.T) {
	fcm := &stub{name: "push:fcm", per: map[string]error{"a": nil, "b": nil, "refused": nil}}
	apns := &stub{name: "push:apns", per: map[string]error{"c": nil}}
	s, err := New(Config{}, map[string]PlatformSender{"FCM": fcm, "APNS": apns}, zap.NewNop())
	require.NoError(t, err)
	require.Equal(t, []string{"push:apns", "push:fcm"}, s.Accounts())

	var mu sync.Mutex
	asked := map[string]int{}
	refuse := 1 // the first FCM device asked is refused
	admit := func(_ context.Context, account string) error {
		mu.Lock()
		defer mu.Unlock()
		asked[account]++
		if account == "push:fcm" && refuse > 0 {
			refuse--
			return senders.TransientError("rate_limited", time.Second, errors.New("no capacity"))
		}
		return nil
	}
	res, err := s.SendEach(context.Background(), message(
		senders.PushToken{Token: "a", Platform: "FCM"}, senders.PushToken{Token: "b", Platform: "FCM"},
		senders.PushToken{Token: "refused", Platform: "FCM"}, senders.PushToken{Token: "c", Platform: "APNS"},
		senders.PushToken{Token: "w", Platform: "WEBPUSH"}), admit)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"push:fcm": 3, "push:apns": 1}, asked, "one admission per provider call")
	require.Equal(t, "3/5", res.Code)
	require.Len(t, fcm.Keys(), 2, "the refused device was not sent to")
	require.Len(t, apns.Keys(), 1)

	// Every device refused: the most hopeful failure is the refusal.
	_, err = s.SendEach(context.Background(), message(senders.PushToken{Token: "a", Platform: "FCM"}),
		func(context.Context, string) error {
			return senders.TransientError("rate_limited", 2*time.Second, errors.New("no capacity"))
		})
	class, se := senders.Classify(err)
	require.Equal(t, senders.Transient, class)
	require.Equal(t, "rate_limited", se.Code)
	require.Empty(t, fcm.Keys()[2:], "nothing sent")
}
