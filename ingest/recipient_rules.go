package ingest

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/heraldhq/herald"
)

// recipientRequest is what a notification asks of the rules for one user: the channels,
// the category (the template's unless given), the priority, sendAt and an inline recipient.
type recipientRequest struct {
	userID   int64
	channels []herald.Channel
	// available are the channels the installation delivers (Config.Channels).
	available channelSet
	category  string
	priority  herald.Priority
	sendAt    *time.Time
	to        *recipientJSON // nil: the stored contact only
}

// decision is what the rules decide for one user: the channels that get a delivery row, the
// suppressed ones with their reason, and when the deliveries are first due (nil: now).
type decision struct {
	deliver    []herald.Channel
	suppressed []suppressedJSON
	next       *time.Time
}

// decide applies herald's per-user rules to one request: unavailable channels, opt-outs and
// missing addresses suppress channels (route), then sendAt and quiet hours in the user's time zone
// decide the first attempt (firstAttempt). now is the accepting transaction's clock. A single
// POST (accept) and every user of a campaign lot (expandLot) go through this one function.
func decide(req recipientRequest, f *recipientFacts, now time.Time, log *zap.Logger) (decision, error) {
	deliver, suppressed, err := route(req.userID, req.channels, req.available, req.category, req.to, f)
	if err != nil {
		return decision{}, err
	}
	loc, err := loadLocation(f.timeZone)
	if err != nil { // time zones are validated on input; a zone database change could still do it
		log.Warn("unknown stored time zone, using UTC", zap.Int64("user_id", req.userID), zap.Error(err))
		loc = time.UTC
	}
	return decision{
		deliver:    deliver,
		suppressed: suppressed,
		next:       firstAttempt(now, req.sendAt, req.priority, loc, f.quietHours()),
	}, nil
}

// channelSet is the set of channels an installation delivers (Config.Channels); the zero
// value holds every channel.
type channelSet struct {
	only map[herald.Channel]bool // nil: every channel
}

// newChannelSet returns the set of channels; none given: every channel.
func newChannelSet(channels []herald.Channel) channelSet {
	if len(channels) == 0 {
		return channelSet{}
	}
	s := channelSet{only: make(map[herald.Channel]bool, len(channels))}
	for _, c := range channels {
		s.only[c] = true
	}
	return s
}

func (s channelSet) has(c herald.Channel) bool { return s.only == nil || s.only[c] }

// requireAvailable refuses a request none of whose channels the installation delivers
// (422 channel_unavailable): such a notification or campaign could never deliver anything,
// which the client should learn at once rather than find every channel suppressed. A
// request with at least one available channel goes on; its unavailable ones are suppressed
// by route.
func requireAvailable(channels []herald.Channel, available channelSet) error {
	for _, c := range channels {
		if available.has(c) {
			return nil
		}
	}
	return &apiError{status: http.StatusUnprocessableEntity, code: codeChannelUnavailable, title: "Channel unavailable",
		detail: "no requested channel is delivered by this installation",
		fields: []fieldError{{Field: "channels", Message: "no provider is configured for any of these channels"}}}
}
