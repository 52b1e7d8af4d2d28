package apns

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/heraldhq/herald/senders"
)

// reasonClass classifies the APNs "reason" strings
// (developer.apple.com, "Handling notification responses from APNs").
var reasonClass = map[string]senders.Class{
	// The device token is no good for this app: remove it.
	"BadDeviceToken":         senders.Permanent,
	"Unregistered":           senders.Permanent,
	"DeviceTokenNotForTopic": senders.Permanent,
	// The notification itself is malformed: resending it cannot help.
	"PayloadTooLarge":    senders.Permanent,
	"PayloadEmpty":       senders.Permanent,
	"MissingDeviceToken": senders.Permanent,
	"BadMessageId":       senders.Permanent,
	"BadPriority":        senders.Permanent,
	"BadExpirationDate":  senders.Permanent,
	"BadCollapseId":      senders.Permanent,
	"BadTopic":           senders.Permanent,
	"TopicDisallowed":    senders.Permanent,
	"MissingTopic":       senders.Permanent,
	"InvalidPushType":    senders.Permanent,
	// Provider-token problems are fixed by signing a new token (or by the operator).
	"ExpiredProviderToken": senders.Transient,
	"InvalidProviderToken": senders.Transient,
	"MissingProviderToken": senders.Transient,
	// Load and outages.
	"TooManyRequests":             senders.Transient,
	"TooManyProviderTokenUpdates": senders.Transient,
	"InternalServerError":         senders.Transient,
	"ServiceUnavailable":          senders.Transient,
	"Shutdown":                    senders.Transient,
}

// tokenGone reports whether reason means the device token should be removed.
func tokenGone(reason string) bool {
	return reason == "Unregistered" || reason == "BadDeviceToken" || reason == "DeviceTokenNotForTopic"
}

// classify turns a non-200 APNs response ({"reason": "BadDeviceToken"}) into a classified
// error; an unknown reason falls back to the HTTP status.
func classify(status int, body []byte, retryAfter time.Duration) *senders.Error {
	var r struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(body, &r)
	code := r.Reason
	if code == "" {
		code = strconv.Itoa(status)
	}
	err := fmt.Errorf("apns %s (http %d)", code, status)
	switch reasonClass[r.Reason] {
	case senders.Permanent:
		return senders.PermanentError(code, err)
	case senders.Transient:
		return senders.TransientError(code, retryAfter, err)
	}
	return senders.HTTPStatusError(status, code, retryAfter, err)
}
