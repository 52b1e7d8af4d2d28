// Package redrive sends FAILED and EXPIRED deliveries again on an operator's request
// (docs/api.md "Re-drive", docs/operations.md): Create checks a request, counts what its
// filter matches and writes the audited redrive row; the Executor then re-arms the matching
// deliveries in lots, each lot one transaction, paced like a campaign's expansion, resumable
// after a crash. A re-armed delivery keeps its id, its history and its attempt numbers; the
// transition itself is internal/delivery's Redrive.
package redrive

import (
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/heraldhq/herald"
)

// Statuses of a re-drive. A dry run is DONE when written.
const (
	StatusRunning = "RUNNING" // lots are being executed
	StatusDone    = "DONE"    // every match was re-armed or skipped
)

// Reasons a matched delivery is skipped (Redrive.Skipped).
const (
	SkipPermanent         = "permanent"          // its last attempt failed permanently; includePermanent re-drives it
	SkipExpired           = "expired"            // its expires_at has passed and the request gave no new expiresAt
	SkipCampaignCancelled = "campaign_cancelled" // its campaign was cancelled
	SkipMovedOn           = "moved_on"           // it changed between the match and the write
)

// DefaultMax is the default bound on the deliveries one re-drive may match.
const DefaultMax = 1_000_000

// Redrivable lists the statuses a filter may name today. UNDELIVERED (a receipt that says
// the message never arrived) is refused until herald records receipts: ErrStatusNotSupported.
var Redrivable = []herald.Status{herald.StatusFailed, herald.StatusExpired}

// StatusUndelivered is the receipt status a filter will accept once receipts exist.
const StatusUndelivered herald.Status = "UNDELIVERED"

// ErrorClasses are the values of Filter.ErrorClass: the outcome class of a delivery's last
// attempt.
var ErrorClasses = []string{"TRANSIENT", "PERMANENT", "AMBIGUOUS", "EXPIRED"}

// Filter selects the deliveries of a re-drive. Zero fields match everything; Status empty
// means every status in Redrivable.
type Filter struct {
	Status []herald.Status `json:"status"`
	// Channel of the delivery.
	Channel herald.Channel `json:"channel,omitempty"`
	// Provider is the provider account of the delivery's last attempt ("sms:twilio").
	Provider string `json:"provider,omitempty"`
	// ErrorClass is the outcome class of the last attempt (ErrorClasses).
	ErrorClass string `json:"errorClass,omitempty"`
	// ErrorCode is the provider's code of the last attempt.
	ErrorCode string `json:"errorCode,omitempty"`
	// Template is the notification's template.
	Template string `json:"template,omitempty"`
	// CampaignID is the campaign the notification was expanded from.
	CampaignID *uuid.UUID `json:"campaignId,omitempty"`
	// From and To bound the time the delivery reached its status (its last write),
	// From ≤ t < To.
	From *time.Time `json:"from,omitempty"`
	To   *time.Time `json:"to,omitempty"`
}

// Request is a re-drive as asked for.
type Request struct {
	Filter           Filter     `json:"filter"`
	DryRun           bool       `json:"dryRun"`
	IncludePermanent bool       `json:"includePermanent"`
	ExpiresAt        *time.Time `json:"expiresAt,omitempty"`
}

// Redrive is a re-drive as stored: the answer of POST and GET /api/redrives.
type Redrive struct {
	ID               uuid.UUID
	ClientID         string
	Status           string
	DryRun           bool
	Matched          int64
	Redriven         int64
	Skipped          map[string]int64
	Filter           Filter
	IncludePermanent bool
	ExpiresAt        *time.Time
	CreatedAt        time.Time
	FinishedAt       *time.Time
}

// FieldError names one invalid input of a request; Field is its JSON path ("filter.to").
type FieldError struct {
	Field, Message string
}

// InvalidError lists the invalid fields of a request.
type InvalidError struct{ Fields []FieldError }

func (e *InvalidError) Error() string {
	return fmt.Sprintf("invalid re-drive request: %d fields (first %s: %s)", len(e.Fields), e.Fields[0].Field, e.Fields[0].Message)
}

// TooManyError: the filter matches more deliveries than one re-drive may re-arm.
type TooManyError struct{ Matched, Max int64 }

func (e *TooManyError) Error() string {
	return fmt.Sprintf("the filter matches %d deliveries; at most %d per re-drive", e.Matched, e.Max)
}

// Conditions a caller branches on.
var (
	// ErrUnbounded: a filter with neither a status nor a time range would match every
	// failure herald holds.
	ErrUnbounded = errors.New("the filter names no status and no time range (from, to): it would match every failed delivery")
	// ErrExpiresAtRequired: EXPIRED deliveries would expire again at once.
	ErrExpiresAtRequired = errors.New("re-driving EXPIRED deliveries needs a new expiresAt")
	// ErrStatusNotSupported: UNDELIVERED cannot be re-driven yet.
	ErrStatusNotSupported = errors.New("status UNDELIVERED cannot be re-driven: herald does not record delivery receipts yet")
	// ErrKeyReused: the Idempotency-Key was used before with another request.
	ErrKeyReused = errors.New("this Idempotency-Key was already used with a different request")
	// ErrNotFound: no re-drive has that id.
	ErrNotFound = errors.New("no such re-drive")
)

// Check validates r and normalizes it (statuses sorted and deduplicated, the default
// statuses filled in): an *InvalidError for values out of their range, else
// ErrStatusNotSupported, ErrUnbounded or ErrExpiresAtRequired. It is pure; that expiresAt
// lies in the future is checked by Create on the database clock.
func (r *Request) Check() error {
	var fe []FieldError
	add := func(field, format string, a ...any) {
		fe = append(fe, FieldError{Field: field, Message: fmt.Sprintf(format, a...)})
	}
	f := &r.Filter
	undelivered := false
	for i, s := range f.Status {
		switch {
		case s == StatusUndelivered:
			undelivered = true
		case !slices.Contains(Redrivable, s):
			add(fmt.Sprintf("filter.status[%d]", i), "must be FAILED, EXPIRED or UNDELIVERED")
		}
	}
	if f.Channel != "" {
		if _, err := herald.ParseChannel(string(f.Channel)); err != nil {
			add("filter.channel", "must be PUSH, EMAIL, SMS or WEBHOOK")
		}
	}
	if f.ErrorClass != "" && !slices.Contains(ErrorClasses, f.ErrorClass) {
		add("filter.errorClass", "must be TRANSIENT, PERMANENT, AMBIGUOUS or EXPIRED")
	}
	for field, v := range map[string]string{"filter.provider": f.Provider, "filter.errorCode": f.ErrorCode, "filter.template": f.Template} {
		if len(v) > 200 {
			add(field, "must be at most 200 bytes")
		}
	}
	if f.From != nil && f.To != nil && !f.To.After(*f.From) {
		add("filter.to", "must be after filter.from")
	}
	if len(fe) > 0 {
		slices.SortFunc(fe, func(a, b FieldError) int { return cmp.Compare(a.Field, b.Field) })
		return &InvalidError{Fields: fe}
	}
	if undelivered {
		return ErrStatusNotSupported
	}
	if len(f.Status) == 0 && f.From == nil && f.To == nil {
		return ErrUnbounded
	}
	if len(f.Status) == 0 {
		f.Status = slices.Clone(Redrivable)
	}
	slices.Sort(f.Status)
	f.Status = slices.Compact(f.Status)
	if slices.Contains(f.Status, herald.StatusExpired) && r.ExpiresAt == nil {
		return ErrExpiresAtRequired
	}
	return nil
}

// hash is the SHA-256 of the normalized request: what "the same request" means for an
// Idempotency-Key.
func (r *Request) hash() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("marshal normalized re-drive request: %v", err)) // plain data; cannot fail
	}
	h := sha256.Sum256(b)
	return h[:]
}
