// Package timeline reads what happened to one notification from the database alone
// (docs/operations.md, "Following one notification"): when it was accepted and under which trace, every status change of each
// delivery with the time since the one before, every attempt from delivery_attempt, and the
// final state. herald trace, GET /api/notifications/{id} and the console show it.
//
// It only reads. The status changes come from delivery.transition_status/transition_at,
// which the delivery_touch trigger appends to on every change of status (migration 00045).
package timeline

import (
	"errors"
	"strings"
	"time"

	"github.com/heraldhq/herald"
)

// ErrNotFound: no notification has that id, no delivery has it, or no notification of that
// client has that idempotency key.
var ErrNotFound = errors.New("no such notification")

// Timeline is one notification and the history of its deliveries.
type Timeline struct {
	NotificationID string          `json:"notificationId"`
	ClientID       string          `json:"clientId"`
	UserID         int64           `json:"userId"`
	Template       string          `json:"template"`
	Category       string          `json:"category"`
	Priority       herald.Priority `json:"priority"`
	AcceptedAt     time.Time       `json:"acceptedAt"`
	// TraceID is the W3C trace id of the accepting request (from the stored traceparent);
	// "" when the request carried none and no span was recording.
	TraceID    string     `json:"traceId"`
	Deliveries []Delivery `json:"deliveries"`
}

// Delivery is one delivery's history.
type Delivery struct {
	ID                string         `json:"id"`
	Channel           herald.Channel `json:"channel"`
	Status            herald.Status  `json:"status"` // the state now; final when Status.Terminal()
	Attempts          int            `json:"attempts"`
	Provider          string         `json:"provider,omitempty"`
	ProviderMessageID string         `json:"providerMessageId,omitempty"`
	// RedriveID is the operator re-drive that last sent the delivery back to PENDING; ""
	// when none did.
	RedriveID string `json:"redriveId,omitempty"`
	// NextAttemptAt is when a PENDING delivery is due; nil once final.
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
	Steps         []Step     `json:"steps"`
	AttemptLog    []Attempt  `json:"attemptLog"`
	// Receipts are the provider's receipts about the delivery, oldest first (docs/receipts.md).
	Receipts []Receipt `json:"receipts"`
}

// Receipt is one provider receipt as internal/delivery's ApplyReceipt logged it on the
// delivery (the delivery.receipts column, in this JSON form).
type Receipt struct {
	// Provider is the account that sent it ("sms:twilio"); Status and Code the provider's
	// own words ("delivered", "undelivered" 30005, "bounce" 5.1.1).
	Provider string `json:"provider"`
	Status   string `json:"status"`
	Code     string `json:"code,omitempty"`
	// At is the provider's time of the event, ReceivedAt herald's (the database clock).
	At         time.Time `json:"at"`
	ReceivedAt time.Time `json:"receivedAt"`
	// Applied: this receipt moved the delivery from SENT to DELIVERED or UNDELIVERED.
	Applied bool `json:"applied"`
}

// Step is one status the delivery entered: PENDING when it was written, then each change.
type Step struct {
	Status herald.Status `json:"status"`
	At     time.Time     `json:"at"`
	// Since is the time from the step before (the first step: from the accept).
	Since time.Duration `json:"sinceNs"`
	// Note says why, where the attempt log tells: "accepted", "attempt 2", "retry (TRANSIENT)",
	// "deferred", "lease over", ...
	Note string `json:"note,omitempty"`
}

// Attempt is one row of delivery_attempt: a provider call, or a decision that ended an
// attempt without one (EXPIRED, or a reaped claim whose outcome is unknown).
type Attempt struct {
	Attempt  int       `json:"attempt"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Outcome is SENT, ERROR or EXPIRED; ErrorClass is TRANSIENT, PERMANENT or AMBIGUOUS
	// for an ERROR, "" otherwise.
	Outcome       string     `json:"outcome"`
	ErrorClass    string     `json:"errorClass,omitempty"`
	Provider      string     `json:"provider,omitempty"`
	ProviderCode  string     `json:"providerCode,omitempty"`
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
	// RedriveID is the re-drive the attempt ran under; "" for an attempt before any.
	RedriveID string `json:"redriveId,omitempty"`
	// TokensRemoved is how many push tokens the provider reported invalid in this attempt;
	// herald removed them from the user's profile.
	TokensRemoved int `json:"tokensRemoved,omitempty"`
}

// The attempt outcomes a timeline shows: the stored outcomes without a provider error
// (herald.AttemptOutcome), and ERROR for an attempt that ended in an error class.
const (
	OutcomeSent    = string(herald.AttemptSent)
	OutcomeError   = "ERROR"
	OutcomeExpired = string(herald.AttemptExpired)
)

// attemptOutcome splits delivery_attempt.outcome (SENT, EXPIRED or an error class) into an
// outcome and an error class.
func attemptOutcome(stored string) (outcome, class string) {
	switch stored {
	case OutcomeSent, OutcomeExpired:
		return stored, ""
	}
	return OutcomeError, stored
}

// TraceID returns the trace id of a W3C traceparent ("00-<32 hex>-<16 hex>-<2 hex>"), or ""
// when tp is not one.
func TraceID(tp string) string {
	parts := strings.Split(tp, "-")
	if len(parts) < 4 || len(parts[1]) != 32 || strings.Trim(parts[1], "0") == "" {
		return ""
	}
	for _, c := range parts[1] {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return ""
		}
	}
	return parts[1]
}

// JaegerURL is the page of trace in the Jaeger UI at base, or "" when either is empty.
func JaegerURL(base, trace string) string {
	if base == "" || trace == "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/trace/" + trace
}
