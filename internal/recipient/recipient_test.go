package recipient

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
)

// Which channels get a delivery and why the others do not: an unavailable channel wins over
// an opt-out, an opt-out over a missing address; an opt-out without a category covers every
// category; an inline address stands in for a missing stored one.
func TestDecideSuppressesInOrder(t *testing.T) {
	all := []herald.Channel{herald.ChannelPush, herald.ChannelEmail, herald.ChannelSMS, herald.ChannelWebhook}
	for _, tc := range []struct {
		name       string
		available  []herald.Channel
		contact    Addresses
		to         Addresses
		optOuts    string
		category   string
		deliver    []herald.Channel
		suppressed []Suppressed
	}{
		{name: "every address", contact: Addresses{Email: true, Phone: true, PushTokens: true, Webhook: true},
			deliver: all, suppressed: []Suppressed{}},
		{name: "no address", deliver: nil, suppressed: []Suppressed{{herald.ChannelPush, ReasonNoContact},
			{herald.ChannelEmail, ReasonNoContact}, {herald.ChannelSMS, ReasonNoContact}, {herald.ChannelWebhook, ReasonNoContact}}},
		{name: "inline addresses", to: Addresses{Email: true, Phone: true, PushTokens: true, Webhook: true},
			deliver: all, suppressed: []Suppressed{}},
		{name: "unavailable over opted out over no contact", available: []herald.Channel{herald.ChannelEmail, herald.ChannelSMS},
			contact: Addresses{Email: true}, optOuts: `[{"channel":"PUSH"},{"channel":"EMAIL","category":"marketing"}]`,
			category: "marketing", deliver: nil, suppressed: []Suppressed{{herald.ChannelPush, ReasonChannelUnavailable},
				{herald.ChannelEmail, ReasonOptedOut}, {herald.ChannelSMS, ReasonNoContact}, {herald.ChannelWebhook, ReasonChannelUnavailable}}},
		{name: "an opt-out of another category", contact: Addresses{Email: true, Phone: true},
			optOuts: `[{"channel":"EMAIL","category":"marketing"},{"channel":"SMS"}]`, category: "security",
			deliver: []herald.Channel{herald.ChannelEmail}, suppressed: []Suppressed{{herald.ChannelPush, ReasonNoContact},
				{herald.ChannelSMS, ReasonOptedOut}, {herald.ChannelWebhook, ReasonNoContact}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &Facts{Contact: tc.contact, TimeZone: "UTC"}
			if tc.optOuts != "" {
				f.OptOuts = []byte(tc.optOuts)
			}
			d, err := Decide(Request{UserID: 1, Channels: all, Available: NewChannelSet(tc.available), Category: tc.category,
				Priority: herald.PriorityNormal, To: tc.to}, f, time.Now(), zap.NewNop())
			require.NoError(t, err)
			require.Equal(t, tc.deliver, d.Deliver)
			require.Equal(t, tc.suppressed, d.Suppressed)
			require.Nil(t, d.Next, "no sendAt, no quiet hours: due at once")
		})
	}
}

// Quiet hours in the user's zone defer the first attempt of a NORMAL notification to the
// window's end; HIGH is exempt; an unknown stored zone falls back to UTC.
func TestDecideDefersToTheEndOfQuietHours(t *testing.T) {
	now := time.Date(2026, 12, 1, 23, 30, 0, 0, time.UTC) // 00:30 in Berlin
	minutes := func(m int64) pgtype.Time {
		return pgtype.Time{Microseconds: m * int64(time.Minute/time.Microsecond), Valid: true}
	}
	f := &Facts{Contact: Addresses{Phone: true}, TimeZone: "Europe/Berlin", QuietStart: minutes(22 * 60), QuietEnd: minutes(7 * 60)}
	req := Request{UserID: 1, Channels: []herald.Channel{herald.ChannelSMS}, Priority: herald.PriorityNormal}
	d, err := Decide(req, f, now, zap.NewNop())
	require.NoError(t, err)
	require.NotNil(t, d.Next)
	require.Equal(t, time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC), d.Next.UTC(), "07:00 in Berlin")

	req.Priority = herald.PriorityHigh
	d, err = Decide(req, f, now, zap.NewNop())
	require.NoError(t, err)
	require.Nil(t, d.Next)

	f.TimeZone, req.Priority = "Nowhere/Atlantis", herald.PriorityNormal
	d, err = Decide(req, f, now, zap.NewNop())
	require.NoError(t, err)
	require.NotNil(t, d.Next)
	require.Equal(t, time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC), d.Next.UTC(), "07:00 in UTC")
}
