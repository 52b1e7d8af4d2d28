package ingest

import (
	"net/http"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/recipient"
)

// The per-user rules themselves (opt-outs, missing addresses, quiet hours, sendAt) are
// internal/recipient's, shared with the campaign expander; this file is the API's side of
// them.

// requireAvailable refuses a request none of whose channels the installation delivers
// (422 channel_unavailable): such a notification or campaign could never deliver anything,
// which the client should learn at once rather than find every channel suppressed. A
// request with at least one available channel goes on; its unavailable ones are suppressed
// by recipient.Decide.
func requireAvailable(channels []herald.Channel, available recipient.ChannelSet) error {
	if available.HasAny(channels) {
		return nil
	}
	return &apiError{status: http.StatusUnprocessableEntity, code: codeChannelUnavailable, title: "Channel unavailable",
		detail: "no requested channel is delivered by this installation",
		fields: []fieldError{{Field: "channels", Message: "no provider is configured for any of these channels"}}}
}

// addresses says which addresses the inline recipient holds; nil holds none.
func (r *recipientJSON) addresses() recipient.Addresses {
	if r == nil {
		return recipient.Addresses{}
	}
	return recipient.Addresses{Email: r.Email != "", Phone: r.Phone != "", PushTokens: len(r.PushTokens) > 0,
		Webhook: r.WebhookURL != ""}
}
