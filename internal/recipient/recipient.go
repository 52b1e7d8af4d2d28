// Package recipient holds the per-user rules that a single POST /api/notifications and every
// user of a campaign lot share: which requested channels get a delivery row and which are
// suppressed (with their reason), and when the deliveries are first due (docs/api.md, "Which
// deliveries exist" and "When deliveries are due"). It also holds what those rules read about
// a user (Facts, with the one SQL select list that loads them) and the answer a notification
// stores (Accepted), so that ingest and the campaign expander build both the same way.
package recipient

import (
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/schedule"
)

// Reasons a requested channel gets no delivery row; they are the keys of a notification's
// suppressed list and of a campaign's suppressed counts.
const (
	// ReasonChannelUnavailable: the installation has no provider for the channel (ChannelSet).
	ReasonChannelUnavailable = "channel_unavailable"
	ReasonOptedOut           = "opted_out"    // the user opted out of the channel (for this category or all)
	ReasonNoContact          = "no_contact"   // neither the stored contact nor the inline recipient has an address for it
	ReasonUnknownUser        = "unknown_user" // a campaign lists a user id the directory does not hold
)

// Suppressed is a requested channel that got no delivery, with its reason.
type Suppressed struct {
	Channel herald.Channel `json:"channel"`
	Reason  string         `json:"reason"`
}

// Request is what a notification asks of the rules for one user.
type Request struct {
	UserID   int64
	Channels []herald.Channel
	// Available are the channels the installation delivers.
	Available ChannelSet
	// Category is the notification's, or its template's when the request has none.
	Category string
	Priority herald.Priority
	SendAt   *time.Time // nil: at once
	// To are the addresses an inline recipient holds; the zero value: the stored contact only.
	To Addresses
}

// Decision is what the rules decide for one user: the channels that get a delivery row, the
// suppressed ones with their reason, and when the deliveries are first due (nil: now).
type Decision struct {
	Deliver    []herald.Channel
	Suppressed []Suppressed // never nil
	Next       *time.Time
}

// Decide applies the rules to one user: unavailable channels, opt-outs and missing addresses
// suppress channels (route), then sendAt and quiet hours in the user's time zone decide the
// first attempt (schedule.FirstAttempt). now is the writing transaction's clock. A single
// POST and every user of a campaign lot go through this one function.
func Decide(req Request, f *Facts, now time.Time, log *zap.Logger) (Decision, error) {
	deliver, suppressed, err := route(req, f)
	if err != nil {
		return Decision{}, err
	}
	loc, err := schedule.Location(f.TimeZone)
	if err != nil { // time zones are validated on input; a zone database change could still do it
		log.Warn("unknown stored time zone, using UTC", zap.Int64("user_id", req.UserID), zap.Error(err))
		loc = time.UTC
	}
	return Decision{
		Deliver:    deliver,
		Suppressed: suppressed,
		Next:       schedule.FirstAttempt(now, req.SendAt, req.Priority, loc, f.quietHours()),
	}, nil
}

// route splits the requested channels into those that get a delivery row and those that are
// suppressed, with the reason. An unavailable channel wins over an opt-out (it is the
// installation's, whatever the user chose), an opt-out over a missing address.
func route(req Request, f *Facts) (deliver []herald.Channel, suppressed []Suppressed, err error) {
	var outs []OptOut
	if len(f.OptOuts) > 0 {
		if err := json.Unmarshal(f.OptOuts, &outs); err != nil {
			return nil, nil, fmt.Errorf("decode opt-outs of user %d: %w", req.UserID, err)
		}
	}
	suppressed = []Suppressed{}
	for _, c := range req.Channels {
		switch {
		case !req.Available.Has(c):
			suppressed = append(suppressed, Suppressed{Channel: c, Reason: ReasonChannelUnavailable})
		case optedOut(outs, c, req.Category):
			suppressed = append(suppressed, Suppressed{Channel: c, Reason: ReasonOptedOut})
		case !req.To.has(c) && !f.Contact.has(c):
			suppressed = append(suppressed, Suppressed{Channel: c, Reason: ReasonNoContact})
		default:
			deliver = append(deliver, c)
		}
	}
	return deliver, suppressed, nil
}

// OptOut is one entry of user_preference.opt_outs, as the preferences API writes it; an
// empty Category means every category.
type OptOut struct {
	Channel  herald.Channel `json:"channel"`
	Category string         `json:"category,omitempty"`
}

func optedOut(outs []OptOut, c herald.Channel, category string) bool {
	for _, o := range outs {
		if o.Channel == c && (o.Category == "" || o.Category == category) {
			return true
		}
	}
	return false
}
