package ingest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/heraldhq/herald"
)

// Reasons a requested channel gets no delivery row.
const (
	// reasonChannelUnavailable: the installation has no provider for the channel (Config.Channels).
	reasonChannelUnavailable = "channel_unavailable"
	reasonOptedOut           = "opted_out"  // the user opted out of the channel (for this category or all)
	reasonNoContact          = "no_contact" // neither the stored contact nor "to" has an address for it
)

// recipientFactsColumns selects a recipientFacts (scanned by its dest) from user_contact c
// and user_preference p, each LEFT JOINed on the user: the one definition of those facts for
// a single POST (loadAcceptContext) and a campaign lot (campaign_lot.go).
const recipientFactsColumns = `c.email IS NOT NULL, c.phone IS NOT NULL, c.webhook_url IS NOT NULL,
       EXISTS (SELECT 1 FROM push_token pt WHERE pt.user_id = c.user_id),
       coalesce(c.time_zone, 'UTC'), p.opt_outs, p.quiet_start, p.quiet_end`

// dest lists the scan destinations of recipientFactsColumns.
func (f *recipientFacts) dest() []any {
	return []any{&f.hasEmail, &f.hasPhone, &f.hasWebhook, &f.hasPushTokens, &f.timeZone, &f.optOuts, &f.quietStart, &f.quietEnd}
}

// loadAcceptContext reads, in one round trip, everything a POST needs besides its body: the
// database clock, an earlier notification with the same
// Idempotency-Key, the template (with its content), the user's locale, which addresses the user's contact holds, and the user's
// preferences. Every part is a LEFT JOIN so that one row always comes back.
const loadAcceptContext = `
SELECT now(),
       k.request_hash, ex.response,
       t.category, t.channels, t.content, coalesce(c.locale, ''),
       ` + recipientFactsColumns + `
FROM (SELECT 1) AS one
LEFT JOIN idempotency_key k ON k.client_id = $1 AND k.idempotency_key = $2
LEFT JOIN notification ex ON ex.id = k.notification_id
LEFT JOIN template t ON t.name = $4
LEFT JOIN user_contact c ON c.user_id = $3
LEFT JOIN user_preference p ON p.user_id = $3`

// acceptContext is the row of loadAcceptContext.
type acceptContext struct {
	now              time.Time
	existingHash     []byte // nil: no earlier notification with this key
	existingResponse []byte
	templateCategory *string // nil: unknown template
	templateChannels []string
	templateContent  []byte // senders/templates content; {} for the built-in fallback
	locale           string // the stored contact's locale; "" = the template's default
	recipientFacts
}

// recipientFacts is what the user directory holds about one user that the routing rules
// read: which addresses the contact has, the time zone and the preferences. A single POST
// loads it with loadAcceptContext, a campaign lot with the lot queries (campaign_lot.go);
// both then apply the same rules (decide).
type recipientFacts struct {
	hasEmail      bool
	hasPhone      bool
	hasWebhook    bool
	hasPushTokens bool
	timeZone      string
	optOuts       []byte
	quietStart    pgtype.Time
	quietEnd      pgtype.Time
}

func scanAcceptContext(row pgx.Row, userID int64) (*acceptContext, error) {
	var ac acceptContext
	dest := []any{&ac.now, &ac.existingHash, &ac.existingResponse,
		&ac.templateCategory, &ac.templateChannels, &ac.templateContent, &ac.locale}
	err := row.Scan(append(dest, ac.recipientFacts.dest()...)...)
	if err != nil {
		return nil, fmt.Errorf("load accept context of user %d: %w", userID, err)
	}
	return &ac, nil
}

// optOut is one entry of user_preference.opt_outs; an empty Category means every category.
type optOut struct {
	Channel  herald.Channel `json:"channel"`
	Category string         `json:"category,omitempty"`
}

type suppressedJSON struct {
	Channel herald.Channel `json:"channel"`
	Reason  string         `json:"reason"`
}

// route splits the requested channels into those that get a delivery row and those that are
// suppressed, with the reason. An unavailable channel wins over an opt-out (it is the
// installation's, whatever the user chose), an opt-out over a missing address.
func route(userID int64, channels []herald.Channel, available channelSet, category string, to *recipientJSON, f *recipientFacts) (deliver []herald.Channel, suppressed []suppressedJSON, err error) {
	var outs []optOut
	if len(f.optOuts) > 0 {
		if err := json.Unmarshal(f.optOuts, &outs); err != nil {
			return nil, nil, fmt.Errorf("decode opt-outs of user %d: %w", userID, err)
		}
	}
	suppressed = []suppressedJSON{}
	for _, c := range channels {
		switch {
		case !available.has(c):
			suppressed = append(suppressed, suppressedJSON{Channel: c, Reason: reasonChannelUnavailable})
		case optedOut(outs, c, category):
			suppressed = append(suppressed, suppressedJSON{Channel: c, Reason: reasonOptedOut})
		case !hasAddress(c, to, f):
			suppressed = append(suppressed, suppressedJSON{Channel: c, Reason: reasonNoContact})
		default:
			deliver = append(deliver, c)
		}
	}
	return deliver, suppressed, nil
}

func optedOut(outs []optOut, c herald.Channel, category string) bool {
	for _, o := range outs {
		if o.Channel == c && (o.Category == "" || o.Category == category) {
			return true
		}
	}
	return false
}

func hasAddress(c herald.Channel, to *recipientJSON, ac *recipientFacts) bool {
	if to == nil {
		to = &recipientJSON{}
	}
	switch c {
	case herald.ChannelEmail:
		return to.Email != "" || ac.hasEmail
	case herald.ChannelSMS:
		return to.Phone != "" || ac.hasPhone
	case herald.ChannelPush:
		return len(to.PushTokens) > 0 || ac.hasPushTokens
	case herald.ChannelWebhook:
		return to.WebhookURL != "" || ac.hasWebhook
	}
	return false
}

// quietHours returns the user's quiet hours, or nil.
func (ac *recipientFacts) quietHours() *quietHours {
	if !ac.quietStart.Valid || !ac.quietEnd.Valid {
		return nil
	}
	const usPerMinute = int64(time.Minute / time.Microsecond)
	q := quietHours{start: clock(ac.quietStart.Microseconds / usPerMinute), end: clock(ac.quietEnd.Microseconds / usPerMinute)}
	if q.start == q.end {
		return nil
	}
	return &q
}
