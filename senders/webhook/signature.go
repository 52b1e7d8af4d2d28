package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks (https://www.standardwebhooks.com) headers set on every request.
const (
	HeaderWebhookID        = "webhook-id"        // the delivery id, the same on every attempt
	HeaderWebhookTimestamp = "webhook-timestamp" // unix seconds of this attempt
	HeaderWebhookSignature = "webhook-signature" // "v1,<base64 HMAC-SHA256>", space-separated, one per secret
)

// secretPrefix starts every Standard Webhooks secret; the rest is the key in standard base64.
const secretPrefix = "whsec_"

// Errors returned by Sign and Verify.
var (
	ErrBadSecret    = errors.New("webhook secret is not whsec_<base64>")
	ErrBadSignature = errors.New("webhook signature does not match")
	ErrStale        = errors.New("webhook timestamp outside tolerance")
)

// decodeSecret returns the HMAC key of a "whsec_<base64>" secret.
func decodeSecret(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil || len(key) == 0 {
		return nil, ErrBadSecret
	}
	return key, nil
}

// signature is the base64 of HMAC-SHA256(key, "<id>.<timestamp>.<body>").
func signature(key []byte, id, ts string, body []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte("."))
	h.Write([]byte(ts))
	h.Write([]byte("."))
	h.Write(body)
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// Sign returns the webhook-signature header value of message id with body sent at t: one
// "v1,<signature>" per secret, space-separated (two during a secret rotation).
func Sign(secrets []string, id string, t time.Time, body []byte) (string, error) {
	if len(secrets) == 0 {
		return "", ErrBadSecret
	}
	ts := strconv.FormatInt(t.Unix(), 10)
	sigs := make([]string, len(secrets))
	for i, s := range secrets {
		key, err := decodeSecret(s)
		if err != nil {
			return "", err
		}
		sigs[i] = "v1," + signature(key, id, ts, body)
	}
	return strings.Join(sigs, " "), nil
}

// Verify checks a webhook as a receiver does, for receivers written in Go that would rather
// not add a dependency (any Standard Webhooks library does the same): the webhook-signature
// header must hold a v1 signature of webhook-id, webhook-timestamp and body made with
// secret, and the timestamp must be within tolerance of now. A receiver also remembers
// webhook-id to drop redeliveries.
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	key, err := decodeSecret(secret)
	if err != nil {
		return err
	}
	id, ts, sigs := h.Get(HeaderWebhookID), h.Get(HeaderWebhookTimestamp), h.Get(HeaderWebhookSignature)
	if id == "" || ts == "" || sigs == "" {
		return ErrBadSignature
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(unix, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	want := []byte(signature(key, id, ts, body))
	for _, s := range strings.Split(sigs, " ") {
		version, sig, ok := strings.Cut(s, ",")
		if ok && version == "v1" && hmac.Equal([]byte(sig), want) {
			return nil
		}
	}
	return ErrBadSignature
}
