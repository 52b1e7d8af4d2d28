package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
)

// errNoRecipient: neither the user's contact nor the inline override gives an address for
// the channel. Retrying cannot help.
var errNoRecipient = errors.New("no recipient address for channel")

// inlineTo is the notification's recipient override ("to" in the API).
type inlineTo struct {
	Email      string          `json:"email"`
	Phone      string          `json:"phone"`
	WebhookURL string          `json:"webhookUrl"`
	PushTokens json.RawMessage `json:"pushTokens"`
}

// recipient is the stored contact overridden field by field by the inline "to".
func (r *row) recipient() (senders.Recipient, error) {
	rc := senders.Recipient{UserID: r.UserID, Email: deref(r.Email), Phone: deref(r.Phone), WebhookURL: deref(r.WebhookURL)}
	if len(r.PushTokens) > 0 {
		toks, err := decodePushTokens(r.PushTokens)
		if err != nil {
			return rc, fmt.Errorf("delivery %s: stored push tokens: %w", r.ID, err)
		}
		rc.PushTokens = toks
	}
	if len(r.To) > 0 && string(r.To) != "null" {
		var to inlineTo
		if err := json.Unmarshal(r.To, &to); err != nil {
			return rc, fmt.Errorf("delivery %s: recipient override: %w", r.ID, err)
		}
		if to.Email != "" {
			rc.Email = to.Email
		}
		if to.Phone != "" {
			rc.Phone = to.Phone
		}
		if to.WebhookURL != "" {
			rc.WebhookURL = to.WebhookURL
		}
		if len(to.PushTokens) > 0 && string(to.PushTokens) != "null" {
			toks, err := decodePushTokens(to.PushTokens)
			if err != nil {
				return rc, fmt.Errorf("delivery %s: recipient override push tokens: %w", r.ID, err)
			}
			if len(toks) > 0 {
				rc.PushTokens = toks
			}
		}
	}
	var missing bool
	switch r.Channel {
	case herald.ChannelEmail:
		missing = rc.Email == ""
	case herald.ChannelSMS:
		missing = rc.Phone == ""
	case herald.ChannelWebhook:
		missing = rc.WebhookURL == ""
	case herald.ChannelPush:
		missing = len(rc.PushTokens) == 0
	}
	if missing {
		return rc, fmt.Errorf("delivery %s %s: %w", r.ID, r.Channel, errNoRecipient)
	}
	return rc, nil
}

// decodePushTokens accepts [{"token":..,"platform":..}] and ["token", ...] (platform FCM).
func decodePushTokens(raw json.RawMessage) ([]senders.PushToken, error) {
	var objs []struct {
		Token    string `json:"token"`
		Platform string `json:"platform"`
	}
	if err := json.Unmarshal(raw, &objs); err == nil {
		out := make([]senders.PushToken, 0, len(objs))
		for _, o := range objs {
			if o.Token == "" {
				continue
			}
			if o.Platform == "" {
				o.Platform = "FCM"
			}
			out = append(out, senders.PushToken{Token: o.Token, Platform: o.Platform})
		}
		return out, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err != nil {
		return nil, errors.New("push tokens are neither objects nor strings")
	}
	out := make([]senders.PushToken, 0, len(strs))
	for _, s := range strs {
		if s != "" {
			out = append(out, senders.PushToken{Token: s, Platform: "FCM"})
		}
	}
	return out, nil
}

// message builds the message for attempt number attempt of r.
func (r *row) message(ctx context.Context, rd Renderer, attempt int) (*senders.Message, error) {
	to, err := r.recipient()
	if err != nil {
		return nil, err
	}
	locale := deref(r.Locale)
	content, err := rd.Render(ctx, Template{Name: r.Template, Content: r.Content}, locale, r.Channel, r.Payload)
	if err != nil {
		return nil, fmt.Errorf("delivery %s: %w", r.ID, err)
	}
	return &senders.Message{
		DeliveryID: r.ID, NotificationID: r.NotificationID, ClientID: r.ClientID, Channel: r.Channel, Priority: r.Priority,
		Attempt: attempt, Category: r.Category, Template: r.Template, Locale: locale,
		Payload: r.Payload, To: to, Content: content,
		// created_at moved onto the local monotonic clock, so that the latency measured from
		// it does not depend on the skew between this host's clock and the database's.
		AcceptedAt: r.loadedAt.Add(-r.DBNow.Sub(r.CreatedAt)),
	}, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
