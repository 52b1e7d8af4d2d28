package senders

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Class says what a failed send means for the delivery.
type Class int

const (
	// Transient: the provider did not take the message and a later attempt may succeed
	// (429, 5xx before the message was accepted, connection refused).
	Transient Class = iota + 1
	// Permanent: retrying cannot help (invalid number, unregistered token, invalid address).
	Permanent
	// Ambiguous: the request may have been delivered (a timeout after the request left, a
	// reset connection mid-response). What follows is dispatch's per-priority policy.
	Ambiguous
)

func (c Class) String() string {
	switch c {
	case Transient:
		return "TRANSIENT"
	case Permanent:
		return "PERMANENT"
	case Ambiguous:
		return "AMBIGUOUS"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Error is a classified send failure. Senders return it (wrapped or not); dispatch decides
// what happens next from its Class and RetryAfter.
type Error struct {
	Class Class
	// Code is the provider's own code: "21211", "UNREGISTERED", "BadDeviceToken", "503".
	Code string
	// RetryAfter is the provider's Retry-After, zero when it gave none.
	RetryAfter time.Duration
	// Err is the underlying error. Its text must hold no personal data.
	Err error
}

func (e *Error) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("%s (%s): %v", e.Class, e.Code, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Class, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Classify returns the class of err. An error that is not an *Error is treated as
// Ambiguous: a sender that cannot say whether its provider took the message must not be
// assumed to have failed cleanly.
func Classify(err error) (Class, *Error) {
	var e *Error
	if errors.As(err, &e) {
		return e.Class, e
	}
	return Ambiguous, nil
}

// TransientError returns a Transient *Error.
func TransientError(code string, retryAfter time.Duration, err error) *Error {
	return &Error{Class: Transient, Code: code, RetryAfter: retryAfter, Err: err}
}

// PermanentError returns a Permanent *Error.
func PermanentError(code string, err error) *Error {
	return &Error{Class: Permanent, Code: code, Err: err}
}

// AmbiguousError returns an Ambiguous *Error.
func AmbiguousError(code string, err error) *Error {
	return &Error{Class: Ambiguous, Code: code, Err: err}
}

// LogFailure logs a failed send at debug level with what is safe to log: the delivery id,
// the class and the provider's code. Never the recipient, the content or the error text,
// which may quote either.
func LogFailure(log *zap.Logger, m *Message, err error) {
	class, se := Classify(err)
	code := ""
	if se != nil {
		code = se.Code
	}
	log.Debug("send failed", zap.String("delivery_id", m.DeliveryID), zap.Stringer("class", class), zap.String("code", code))
}
