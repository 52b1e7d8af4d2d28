package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald"
)

// notificationRequest is the body of POST /api/notifications as sent. Pointers tell a
// missing member from a zero one.
type notificationRequest struct {
	UserID    *int64          `json:"userId"`
	Template  *string         `json:"template"`
	Payload   json.RawMessage `json:"payload"`
	Priority  *string         `json:"priority"`
	Channels  []string        `json:"channels"`
	Category  *string         `json:"category"`
	SendAt    *string         `json:"sendAt"`
	ExpiresAt *string         `json:"expiresAt"`
	To        *recipientJSON  `json:"to"`
}

// recipientJSON is an inline recipient ("to") or the address part of a contact profile. It
// is stored as-is in notification.recipient for the dispatcher: the members it holds
// override the stored contact for that notification only.
type recipientJSON struct {
	Email      string          `json:"email,omitempty"`
	Phone      string          `json:"phone,omitempty"`
	PushTokens []pushTokenJSON `json:"pushTokens,omitempty"`
	WebhookURL string          `json:"webhookUrl,omitempty"`
}

func (r *recipientJSON) empty() bool {
	return r == nil || (r.Email == "" && r.Phone == "" && len(r.PushTokens) == 0 && r.WebhookURL == "")
}

// notificationInput is a validated, normalized request. Its JSON encoding is what the
// request hash covers (see hash).
type notificationInput struct {
	UserID    int64            `json:"userId"`
	Template  string           `json:"template"`
	Payload   json.RawMessage  `json:"payload"` // normalized: keys sorted, no white space
	payload   map[string]any   // Payload decoded, for the render check
	Priority  herald.Priority  `json:"priority"` // default applied
	Channels  []herald.Channel `json:"channels"` // canonical order
	Category  string           `json:"category,omitempty"`
	SendAt    *time.Time       `json:"sendAt,omitempty"` // UTC
	ExpiresAt *time.Time       `json:"expiresAt,omitempty"`
	To        *recipientJSON   `json:"to,omitempty"` // nil when absent or empty
}

// decodeNotification decodes and validates a POST /api/notifications body. It is pure:
// everything that needs the database (template, contact, clock) is checked later. Every
// error is an *apiError with status 400 or 413.
func decodeNotification(body io.Reader, maxPayload int) (*notificationInput, error) {
	var req notificationRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	var fe fieldErrors
	in := &notificationInput{Priority: herald.PriorityNormal}

	switch {
	case req.UserID == nil:
		fe.add("userId", "is required")
	case *req.UserID <= 0:
		fe.add("userId", "must be a positive integer")
	default:
		in.UserID = *req.UserID
	}
	if req.Template == nil {
		fe.add("template", "is required")
	} else {
		in.Template = *req.Template
		checkTemplateName(&fe, "template", in.Template)
	}
	in.Payload, in.payload = normalizeObject(&fe, "payload", req.Payload, maxPayload)
	if req.Priority != nil {
		p, err := herald.ParsePriority(*req.Priority)
		if err != nil {
			fe.add("priority", "must be HIGH, NORMAL or LOW")
		}
		in.Priority = p
	}
	in.Channels = parseChannels(&fe, "channels", req.Channels, req.Channels != nil)
	if req.Category != nil {
		in.Category = *req.Category
		checkCategory(&fe, "category", in.Category)
	}
	in.SendAt = parseTimestamp(&fe, "sendAt", req.SendAt)
	in.ExpiresAt = parseTimestamp(&fe, "expiresAt", req.ExpiresAt)
	if in.SendAt != nil && in.ExpiresAt != nil && !in.ExpiresAt.After(*in.SendAt) {
		fe.add("expiresAt", "must be after sendAt")
	}
	if !req.To.empty() {
		checkRecipient(&fe, "to", req.To)
		in.To = req.To
	}
	if err := fe.err(); err != nil {
		return nil, err
	}
	return in, nil
}

func checkRecipient(fe *fieldErrors, field string, r *recipientJSON) {
	if r.Email != "" {
		checkEmail(fe, field+".email", r.Email)
	}
	if r.Phone != "" {
		checkPhone(fe, field+".phone", r.Phone)
	}
	if r.WebhookURL != "" {
		checkWebhookURL(fe, field+".webhookUrl", r.WebhookURL)
	}
	checkPushTokens(fe, field+".pushTokens", r.PushTokens)
}

// Accepted sendAt and expiresAt lie in [earliestTimestamp, latestTimestamp). The upper bound
// leaves a year of headroom below the largest time RFC 3339 can write (9999-12-31): the
// times derived from these (the end of a quiet window, a retry's backoff, both within days)
// must stay writable, or every GET of the notification would fail to encode it.
var (
	earliestTimestamp = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	latestTimestamp   = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
)

// parseTimestamp parses an optional RFC 3339 time and returns it in UTC.
func parseTimestamp(fe *fieldErrors, field string, s *string) *time.Time {
	if s == nil {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil || t.Before(earliestTimestamp) || !t.Before(latestTimestamp) {
		fe.add(field, "must be an RFC 3339 timestamp (e.g. 2026-01-02T15:04:05Z) from 2000-01-01T00:00:00Z up to, not including, 9999-01-01T00:00:00Z")
		return nil
	}
	t = t.UTC().Truncate(time.Microsecond) // PostgreSQL's resolution
	return &t
}

// hash returns the SHA-256 of the normalized request. Two bodies are "the same" for
// Idempotency-Key purposes iff their hashes are equal: member order, white space, the
// order of channels, an explicit default priority and the time zone of a timestamp do not
// matter; any other difference does.
func (in *notificationInput) hash() []byte {
	b, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("marshal normalized request: %v", err)) // plain data; cannot fail
	}
	h := sha256.Sum256(b)
	return h[:]
}

// Payload limits beyond the byte size, so that whatever passes is storable as jsonb.
const (
	maxPayloadDepth     = 32
	maxPayloadNumberLen = 100
	maxPayloadExponent  = 308
)

// normalizeObject checks that raw is a JSON object (or absent/null) within the limits and
// returns it re-encoded with sorted keys and no white space (numbers keep their text),
// with the object as decoded (templates.RenderDecoded's data). Both are nil when it is not
// valid, and fe says why.
func normalizeObject(fe *fieldErrors, field string, raw json.RawMessage, maxBytes int) (json.RawMessage, map[string]any) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}"), map[string]any{}
	}
	if raw[0] != '{' {
		fe.add(field, "must be a JSON object")
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		fe.add(field, "must be a JSON object")
		return nil, nil
	}
	if msg := checkPayloadValue(v, 1); msg != "" {
		fe.add(field, "%s", msg)
		return nil, nil
	}
	out, err := json.Marshal(v)
	if err != nil {
		fe.add(field, "must be a JSON object")
		return nil, nil
	}
	if len(out) > maxBytes {
		fe.add(field, "must be at most %d bytes of compact JSON", maxBytes)
		return nil, nil
	}
	return out, v
}

// checkPayloadValue walks a decoded payload and returns why PostgreSQL's jsonb would not
// take it, or "".
func checkPayloadValue(v any, depth int) string {
	if depth > maxPayloadDepth {
		return fmt.Sprintf("must not nest deeper than %d levels", maxPayloadDepth)
	}
	switch x := v.(type) {
	case string:
		if strings.ContainsRune(x, 0) {
			return "must not contain the character U+0000"
		}
	case json.Number:
		if !storableNumber(string(x)) {
			return fmt.Sprintf("numbers must have at most %d characters and an exponent within ±%d", maxPayloadNumberLen, maxPayloadExponent)
		}
	case []any:
		for _, e := range x {
			if msg := checkPayloadValue(e, depth+1); msg != "" {
				return msg
			}
		}
	case map[string]any:
		for k, e := range x {
			if strings.ContainsRune(k, 0) {
				return "must not contain the character U+0000"
			}
			if msg := checkPayloadValue(e, depth+1); msg != "" {
				return msg
			}
		}
	}
	return ""
}

func storableNumber(s string) bool {
	if len(s) > maxPayloadNumberLen {
		return false
	}
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return true
	}
	exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
	return err == nil && exp >= -maxPayloadExponent && exp <= maxPayloadExponent
}
