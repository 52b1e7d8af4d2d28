package fcm

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/heraldhq/herald/senders"
)

// apiError is the body of an FCM v1 error response:
//
//	{"error": {"code": 404, "message": "...", "status": "NOT_FOUND",
//	  "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
//	               "errorCode": "UNREGISTERED"}]}}
type apiError struct {
	Error struct {
		Code    int    `json:"code"`
		Status  string `json:"status"`
		Details []struct {
			Type      string `json:"@type"`
			ErrorCode string `json:"errorCode"`
		} `json:"details"`
	} `json:"error"`
}

const fcmErrorType = "type.googleapis.com/google.firebase.fcm.v1.FcmError"

// Classes of the FCM v1 error codes
// (https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode).
var codeClass = map[string]senders.Class{
	"UNREGISTERED":       senders.Permanent, // the app instance is gone
	"INVALID_ARGUMENT":   senders.Permanent, // malformed token or message
	"SENDER_ID_MISMATCH": senders.Permanent, // the token belongs to another project
	"QUOTA_EXCEEDED":     senders.Transient,
	"UNAVAILABLE":        senders.Transient,
	"INTERNAL":           senders.Transient,
	"UNSPECIFIED_ERROR":  senders.Transient,
	// THIRD_PARTY_AUTH_ERROR: the project's APNs key or web-push credentials are wrong;
	// the operator fixes it, the device token is fine.
	"THIRD_PARTY_AUTH_ERROR": senders.Transient,
	// Canonical statuses, for responses without an FcmError detail.
	"NOT_FOUND":          senders.Permanent,
	"PERMISSION_DENIED":  senders.Permanent,
	"RESOURCE_EXHAUSTED": senders.Transient,
	"UNAUTHENTICATED":    senders.Transient, // an access token expired between fetch and use
}

// tokenGone reports whether code means the device token should be removed.
func tokenGone(code string) bool {
	return code == "UNREGISTERED" || code == "SENDER_ID_MISMATCH"
}

// classify turns a non-200 FCM response into a classified error. The FCM error message is
// not copied: it may quote the token.
func classify(status int, body []byte, retryAfter time.Duration) *senders.Error {
	var ae apiError
	_ = json.Unmarshal(body, &ae)
	code := ae.Error.Status
	for _, d := range ae.Error.Details {
		if d.Type == fcmErrorType && d.ErrorCode != "" {
			code = d.ErrorCode
		}
	}
	err := fmt.Errorf("fcm error %s (http %d)", code, status)
	if code == "" {
		code = strconv.Itoa(status)
		err = fmt.Errorf("fcm http %d", status)
	}
	switch codeClass[code] {
	case senders.Permanent:
		return senders.PermanentError(code, err)
	case senders.Transient:
		return senders.TransientError(code, retryAfter, err)
	}
	return senders.HTTPStatusError(status, code, retryAfter, err)
}
