package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
	"github.com/heraldhq/herald/senders/templates"
)

// Sender delivers messages over one channel through one provider account. Implementations
// live in senders/<provider>; errors should be *senders.Error so that dispatch knows whether
// a retry makes sense (an unclassified error counts as ambiguous).
type Sender interface {
	// Send hands m to the provider. It must honour ctx's deadline and pass m.DeliveryID to
	// the provider as an idempotency key wherever the provider takes one.
	Send(ctx context.Context, m *senders.Message) (senders.Result, error)
	// Provider names the provider account, e.g. "sms:twilio". Rate limits are kept per
	// provider account.
	Provider() string
}

// Template is a template row as the renderer needs it.
type Template struct {
	Name string
	// Content is the template's content jsonb; nil when the template row is missing.
	Content json.RawMessage
}

// Renderer turns a template and a payload into a channel's content. A render error ends the
// delivery FAILED: a retry would render the same way.
type Renderer interface {
	Render(ctx context.Context, t Template, locale string, ch herald.Channel, payload json.RawMessage) (senders.Content, error)
}

// RendererFunc adapts a function to Renderer, e.g. a template package's Render:
//
//	dispatch.RendererFunc(func(_ context.Context, t dispatch.Template, locale string, ch herald.Channel,
//		payload json.RawMessage) (senders.Content, error) {
//		return templates.Render(t.Content, locale, ch, payload)
//	})
type RendererFunc func(ctx context.Context, t Template, locale string, ch herald.Channel, payload json.RawMessage) (senders.Content, error)

// Render implements Renderer.
func (f RendererFunc) Render(ctx context.Context, t Template, locale string, ch herald.Channel, payload json.RawMessage) (senders.Content, error) {
	return f(ctx, t, locale, ch, payload)
}

// DefaultRenderer renders with herald's one template engine, senders/templates, which
// enforces the template limits (docs/senders.md "Template limits"). A template stored without
// content (absent, null or {}) renders its name as the text, title, body and subject, with
// the payload as the webhook body; a WEBHOOK delivery whose template has no WEBHOOK content
// gets the sender's envelope (empty JSON). Any other failure (a missing variable, no content
// for the channel, a render over its budget) is an error, and the delivery ends FAILED.
type DefaultRenderer struct{}

// Render implements Renderer.
func (DefaultRenderer) Render(_ context.Context, t Template, locale string, ch herald.Channel, payload json.RawMessage) (senders.Content, error) {
	if emptyContent(t.Content) {
		c := senders.Content{Title: t.Name, Body: t.Name, Subject: t.Name, Text: t.Name}
		if ch == herald.ChannelWebhook {
			c.JSON = payload
			if len(c.JSON) == 0 {
				c.JSON = json.RawMessage("{}")
			}
		}
		return c, nil
	}
	c, err := templates.Render(t.Content, locale, ch, payload)
	if err != nil && ch == herald.ChannelWebhook && errors.Is(err, templates.ErrNoContent) {
		return senders.Content{}, nil
	}
	if err != nil {
		return senders.Content{}, fmt.Errorf("template %s: %w", t.Name, err)
	}
	return c, nil
}

// emptyContent reports whether template content is absent, null or the empty object.
func emptyContent(c json.RawMessage) bool {
	s := strings.TrimSpace(string(c))
	if s == "" || s == "null" {
		return true
	}
	var m map[string]json.RawMessage
	return json.Unmarshal(c, &m) == nil && len(m) == 0
}
