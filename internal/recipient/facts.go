package recipient

import (
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/pushtoken"
	"github.com/heraldhq/herald/internal/schedule"
)

// Addresses says which addresses a contact (stored or inline) holds, one flag per channel.
type Addresses struct {
	Email, Phone, PushTokens, Webhook bool
}

func (a Addresses) has(c herald.Channel) bool {
	switch c {
	case herald.ChannelEmail:
		return a.Email
	case herald.ChannelSMS:
		return a.Phone
	case herald.ChannelPush:
		return a.PushTokens
	case herald.ChannelWebhook:
		return a.Webhook
	}
	return false
}

// Facts is what the user directory holds about one user that the rules read: which
// addresses the stored contact has, the time zone and the preferences. A single POST and a
// campaign lot load it with FactsColumns.
type Facts struct {
	Contact  Addresses
	TimeZone string
	OptOuts  []byte // user_preference.opt_outs, a JSON list of OptOut; nil: none
	// QuietStart and QuietEnd are the quiet hours; invalid (NULL): none.
	QuietStart, QuietEnd pgtype.Time
}

// FactsColumns selects a Facts (scanned into Facts.Dest) from user_contact c and
// user_preference p, each LEFT JOINed on the user: the one definition of those facts for a
// single POST and a campaign lot. A user the directory does not hold reads as one with no
// address, UTC and no preferences.
const FactsColumns = `c.email IS NOT NULL, c.phone IS NOT NULL, ` + pushtoken.ContactHasAny + `,
       c.webhook_url IS NOT NULL, coalesce(c.time_zone, 'UTC'), p.opt_outs, p.quiet_start, p.quiet_end`

// Dest lists the scan destinations of FactsColumns, in its order.
func (f *Facts) Dest() []any {
	return []any{&f.Contact.Email, &f.Contact.Phone, &f.Contact.PushTokens, &f.Contact.Webhook,
		&f.TimeZone, &f.OptOuts, &f.QuietStart, &f.QuietEnd}
}

// quietHours returns the user's quiet hours, or nil.
func (f *Facts) quietHours() *schedule.QuietHours {
	return schedule.QuietHoursOf(f.QuietStart, f.QuietEnd)
}
